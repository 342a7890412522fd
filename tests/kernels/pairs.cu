// One block publishes a counter as a pair (and a quad) of equal words with
// one vector store, as CUB's decoupled look-back publishes a tile's status
// and value; another block reads them with one vector load and counts the
// reads whose words differ (a torn access). The reader stops once it saw
// the last value, or after a bound when blocks do not run side by side.
extern "C" __global__ void torn_pairs(unsigned *pair, unsigned *quad, unsigned rounds, unsigned *result)
{
    if (threadIdx.x != 0)
        return;
    if (blockIdx.x == 0) {
        for (unsigned k = 1; k <= rounds; k++) {
            asm volatile("st.relaxed.gpu.v2.u32 [%0], {%1, %2};" ::"l"(pair), "r"(k), "r"(k) : "memory");
            asm volatile("st.relaxed.gpu.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(quad), "r"(k), "r"(k), "r"(k),
                         "r"(k)
                         : "memory");
        }
        return;
    }
    unsigned torn = 0, reads = 0, last = 0;
    for (unsigned i = 0; i < 40u * rounds && last != rounds; i++) {
        unsigned a, b, c, d, e, f;
        asm volatile("ld.relaxed.gpu.v2.u32 {%0, %1}, [%2];" : "=r"(a), "=r"(b) : "l"(pair) : "memory");
        asm volatile("ld.relaxed.gpu.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(c), "=r"(d), "=r"(e), "=r"(f)
                     : "l"(quad)
                     : "memory");
        torn += (a != b) + (c != d || d != e || e != f);
        reads++;
        last = c < a ? c : a;
    }
    result[0] = torn;
    result[1] = reads;
    result[2] = last;
}
