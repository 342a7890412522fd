// Host functions and stream callbacks through the runtime, checked against
// random inputs (seed printed; SEED=N repeats a run):
//  - per round and stream: a kernel writes, cudaMemcpyAsync copies the result
//    into pinned memory, then a cudaLaunchHostFunc checks the pinned buffer
//    (it must see the copy) and writes the next round's input into another
//    pinned buffer, which the next cudaMemcpyAsync on the stream must read
//    (the copy is ordered after the host function);
//  - cudaStreamAddCallback on the same streams, which gets cudaSuccess;
//  - every host function records a sequence number: on one stream they run
//    in submission order, and a host function on stream B ordered after one
//    on stream A by cudaEventRecord/cudaStreamWaitEvent runs after it;
//  - a host function on the default stream; each sync returns only after
//    the host functions before it ran.
//
// softgpu once staged async host-to-device copies from pinned memory at
// submit, so the copy missed what the host function ahead of it wrote;
// fixed by 3e1ec97.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

__global__ void step(const unsigned *in, unsigned *out, int n, unsigned k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] * 2654435761u + k;
}

static std::atomic<int> seq{ 0 }, errors{ 0 };

const int N = 2011, ROUNDS = 6, STREAMS = 2;

struct Lane {
    int id;
    unsigned *in_pinned, *out_pinned;   // host side of the pipeline
    unsigned *din, *dout;
    unsigned expect[N];                 // what out_pinned must hold at the check
    unsigned next[N];                   // what the check writes for the next round
    int round;
    int order[3 * ROUNDS];              // sequence numbers of this lane's host functions
    int calls;
};

static void CUDART_CB check_and_feed(void *p)
{
    Lane *l = (Lane *)p;
    l->order[l->calls++] = seq++;
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (l->out_pinned[i] != l->expect[i] && bad++ < 3)
            printf("lane %d round %d: host function sees out[%d] = %#x, expected %#x\n", l->id, l->round, i,
                   l->out_pinned[i], l->expect[i]);
    errors += bad;
    // the next round's input, which the next H2D copy must pick up
    for (int i = 0; i < N; i++)
        l->in_pinned[i] = l->next[i];
    l->round++;
}

static void CUDART_CB callback(cudaStream_t, cudaError_t status, void *p)
{
    Lane *l = (Lane *)p;
    l->order[l->calls++] = seq++;
    if (status != cudaSuccess) {
        printf("lane %d: stream callback got %s\n", l->id, cudaGetErrorName(status));
        errors++;
    }
}

static std::atomic<int> a_done{ -1 }, b_saw{ -2 };
static void CUDART_CB mark_a(void *) { a_done = seq++; }
static void CUDART_CB mark_b(void *) { b_saw = a_done.load(); seq++; }
static std::atomic<int> default_ran{ 0 };
static void CUDART_CB on_default(void *p) { default_ran = *(int *)p; }

int main()
{
    unsigned seed = run_seed(nullptr);
    seed_rng(seed);
    int wrong = 0;

    static Lane lanes[STREAMS];
    cudaStream_t st[STREAMS];
    for (int k = 0; k < STREAMS; k++) {
        Lane *l = &lanes[k];
        l->id = k;
        CHECK(cudaStreamCreate(&st[k]));
        CHECK(cudaMallocHost(&l->in_pinned, N * sizeof(unsigned)));
        CHECK(cudaMallocHost(&l->out_pinned, N * sizeof(unsigned)));
        CHECK(cudaMalloc(&l->din, N * sizeof(unsigned)));
        CHECK(cudaMalloc(&l->dout, N * sizeof(unsigned)));
        for (int i = 0; i < N; i++)
            l->in_pinned[i] = seed_next32();
    }
    // Rounds are submitted one at a time, but nothing waits between them:
    // each round's input only exists once the previous host function ran.
    // The host function's expectations are set before it is submitted, from
    // the CPU's model of the pipeline.
    unsigned model[STREAMS][N];
    for (int k = 0; k < STREAMS; k++)
        for (int i = 0; i < N; i++)
            model[k][i] = lanes[k].in_pinned[i];
    // One Lane per stream is shared by its host functions; since they run in
    // order on their stream, expect/next per round live in a ring of rounds.
    static unsigned expect_r[STREAMS][ROUNDS][N], next_r[STREAMS][ROUNDS][N];
    for (int k = 0; k < STREAMS; k++)
        for (int r = 0; r < ROUNDS; r++)
            for (int i = 0; i < N; i++) {
                expect_r[k][r][i] = model[k][i] * 2654435761u + (unsigned)(r * 10 + k);
                next_r[k][r][i] = expect_r[k][r][i] ^ seed_next32();
                model[k][i] = next_r[k][r][i];
            }
    struct RoundArg {
        Lane *l;
        int r;
    };
    static RoundArg args[STREAMS][ROUNDS];
    auto load = [](void *p) {
        RoundArg *a = (RoundArg *)p;
        int k = a->l->id;
        for (int i = 0; i < N; i++) {
            a->l->expect[i] = expect_r[k][a->r][i];
            a->l->next[i] = next_r[k][a->r][i];
        }
        check_and_feed(a->l);
    };
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < STREAMS; k++) {
            Lane *l = &lanes[k];
            args[k][r] = { l, r };
            CHECK(cudaMemcpyAsync(l->din, l->in_pinned, N * sizeof(unsigned), cudaMemcpyHostToDevice, st[k]));
            step<<<(N + 127) / 128, 128, 0, st[k]>>>(l->din, l->dout, N, (unsigned)(r * 10 + k));
            CHECK(cudaGetLastError());
            CHECK(cudaMemcpyAsync(l->out_pinned, l->dout, N * sizeof(unsigned), cudaMemcpyDeviceToHost, st[k]));
            CHECK(cudaLaunchHostFunc(st[k], load, &args[k][r]));
            CHECK(cudaStreamAddCallback(st[k], callback, l, 0));
        }
    for (int k = 0; k < STREAMS; k++)
        CHECK(cudaStreamSynchronize(st[k]));
    for (int k = 0; k < STREAMS; k++) {
        Lane *l = &lanes[k];
        if (l->calls != 2 * ROUNDS || l->round != ROUNDS) {
            printf("lane %d: %d host calls, %d rounds checked; expected %d and %d\n", k, l->calls, l->round,
                   2 * ROUNDS, ROUNDS);
            wrong++;
        }
        for (int c = 1; c < l->calls; c++)
            if (l->order[c] <= l->order[c - 1] && wrong++ < 10)
                printf("lane %d: host call %d ran as %d, after call %d as %d\n", k, c, l->order[c], c - 1,
                       l->order[c - 1]);
        int bad = 0;
        for (int i = 0; i < N; i++)
            if (l->in_pinned[i] != model[k][i] && bad++ < 3)
                printf("lane %d: final in[%d] = %#x, expected %#x\n", k, i, l->in_pinned[i], model[k][i]);
        wrong += bad;
    }
    printf("%d streams x %d rounds: %d host functions and callbacks, %d checks failed inside\n", STREAMS, ROUNDS,
           lanes[0].calls + lanes[1].calls, (int)errors);
    wrong += errors;

    // Across streams: B's host function waits, by an event, for A's.
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    step<<<4, 64, 0, st[0]>>>(lanes[0].din, lanes[0].dout, N, 1);
    CHECK(cudaLaunchHostFunc(st[0], mark_a, nullptr));
    CHECK(cudaEventRecord(ev, st[0]));
    CHECK(cudaStreamWaitEvent(st[1], ev, 0));
    CHECK(cudaLaunchHostFunc(st[1], mark_b, nullptr));
    CHECK(cudaStreamSynchronize(st[1]));
    if (b_saw < 0) {
        printf("host function on B ran before A's (saw %d)\n", (int)b_saw);
        wrong++;
    }
    // The default stream; the sync returns after the host function ran.
    static int token = 42;
    step<<<4, 64>>>(lanes[1].din, lanes[1].dout, N, 2);
    CHECK(cudaLaunchHostFunc(0, on_default, &token));
    CHECK(cudaDeviceSynchronize());
    if (default_ran != 42) {
        printf("host function on the default stream had not run at cudaDeviceSynchronize\n");
        wrong++;
    }
    printf("across streams: A's host function ran as %d before B's; default stream: %s\n", (int)b_saw,
           default_ran == 42 ? "ran" : "missing");

    CHECK(cudaEventDestroy(ev));
    for (int k = 0; k < STREAMS; k++) {
        CHECK(cudaStreamDestroy(st[k]));
        CHECK(cudaFreeHost(lanes[k].in_pinned));
        CHECK(cudaFreeHost(lanes[k].out_pinned));
        CHECK(cudaFree(lanes[k].din));
        CHECK(cudaFree(lanes[k].dout));
    }
    if (wrong) {
        printf("hostfunc: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("hostfunc: ok %d rounds %d streams\n", ROUNDS, STREAMS);
    return 0;
}
