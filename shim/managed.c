/* Managed memory and mapped host memory on proxies, with the semantics CUDA
 * gives devices without concurrent managed access (the attribute is 0 on
 * proxies). An allocation is device memory on the agent and, at the same
 * address inside the job's pointer window here, pages of this process that
 * are the host copy. Each page is
 *   CLEAN  read-only; the host copy equals the device's,
 *   DIRTY  read-write; written here since it was last sent, sent before the
 *          next launch, or copy or memset touching it, on that stream,
 *   STALE  no access; the device may have written it: the first touch after
 *          a synchronisation faults, and the fault handler has the fetch
 *          thread bring the page's block back before the access resumes.
 * A launch (or a device-side write into the allocation) marks it; the next
 * synchronisation (any wait or query that finds work done) turns its CLEAN
 * pages STALE. DIRTY pages stay: what the CPU wrote since the last launch
 * wins over what the device wrote into the same page.
 *
 * The program sees the pages at the device address (a MAP_SHARED view of a
 * memfd) while this file reads and writes them through a second, always
 * writable view, so sending and fetching never fault and never race the
 * protection of the program's view. The handler takes no mutex: it finds
 * its allocation in a fixed table, takes only the allocation's spin lock
 * around a state change and its mprotect, and waits for the fetch thread on
 * a futex, so a fault in any thread never waits for a lock it may hold.
 *
 * A __managed__ variable's device copy is the module global the agent's
 * driver placed (outside the window); its pages here are at an address of
 * their own (cuLibraryGetManaged at the end). */
#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto/copy.h"
#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/records.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/htod.h"
#include "shim/link.h"
#include "shim/log.h"
#include "shim/proxy.h"
#include "shim/streams.h"

/* cuda.h maps these names onto their newest versions; here each names its
 * own symbol. */
#undef cuMemPrefetchAsync
#undef cuMemPrefetchAsync_ptsz
#undef cuMemAdvise
#undef cuStreamAttachMemAsync

enum { PAGE_CLEAN = 0, PAGE_DIRTY = 1, PAGE_STALE = 2 };

#define REGIONS_MAX 4096
/* A fault fetches the stale pages of the aligned block around it, so a CPU
 * scanning results pays one round trip per block, not per page. */
#define FETCH_BLOCK ((uint64_t)2 << 20)
#define ACCESSED_BY_CPU (UINT64_C(1) << 63)

typedef struct region {
    _Atomic uint64_t base;        /* 0: a free slot */
    uint64_t size;                /* mapped: whole pages */
    uint64_t asked;               /* the size the program asked for */
    uint64_t dev;                 /* the device's copy: base, or a __managed__ variable's global */
    uint64_t dev_size;            /* its bytes: size, or the global's own */
    int device;
    agent_link *link;
    uint8_t *alias;               /* the same pages, always read-write */
    _Atomic uint8_t *state;       /* per page */
    atomic_bool dirty;            /* some page may be DIRTY */
    atomic_bool written;          /* the device may have written since the last invalidation */
    atomic_bool fetch_all;        /* prefetched to the CPU: fetch it whole */
    atomic_flag turn;             /* held while a page's state and protection change together */
    bool host;                    /* cuMemHostAlloc(DEVICEMAP), not managed */
    uint64_t module;              /* a __managed__ variable: its library's id and name */
    char *name;
    unsigned flags;               /* attach flags, or the host allocation's */
    atomic_uint attach;           /* CU_MEM_ATTACH_* now in force */
    /* advice, for cuMemRangeGetAttribute(s), under table_lock */
    bool read_mostly;
    CUmemLocation preferred, last_prefetch;
    uint64_t accessed_by;
} region;

static region regions[REGIONS_MAX];
static _Atomic uint32_t regions_used;     /* slots [0, regions_used) may be live */
static _Atomic uint32_t live_count;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t page_size;

/* ---- the fault handler and the fetch thread ---- */

#define SLOTS 64
enum { SLOT_FREE = 0, SLOT_CLAIMED, SLOT_POSTED, SLOT_DONE };
static struct { _Atomic uint32_t state; uint64_t addr; } slots[SLOTS];
static _Atomic uint32_t fetch_seq;
static struct sigaction previous;
static pid_t owner;                       /* the process whose fetch thread serves */
static __thread bool in_fetch;            /* the fetch thread: its waits are not syncs */

static long futex(_Atomic uint32_t *w, int op, uint32_t val)
{
    return syscall(SYS_futex, (uint32_t *)w, op, val, NULL, NULL, 0);
}

/* The live region holding a, or NULL; safe in the handler. */
static region *region_at(uint64_t a)
{
    uint32_t n = atomic_load(&regions_used);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t b = atomic_load(&regions[i].base);
        if (b && a >= b && a - b < regions[i].size)
            return &regions[i];
    }
    return NULL;
}

/* A page's state and its protection change together, under r's spin lock:
 * otherwise a fault could see the new state with the old protection (and
 * return to fault again for ever) or leave a CLEAN page writable. Held
 * only around a state change and an mprotect, never around a touch of the
 * program's view, so the handler can take it. */
static void turn_take(region *r)
{
    while (atomic_flag_test_and_set_explicit(&r->turn, memory_order_acquire))
        sched_yield();
}

static void turn_give(region *r)
{
    atomic_flag_clear_explicit(&r->turn, memory_order_release);
}

/* A fault that is not ours goes where it would have gone. */
static void chain(int sig, siginfo_t *si, void *uc)
{
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) {
            previous.sa_sigaction(sig, si, uc);
            return;
        }
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* Default: the access runs again without us and kills the process. */
    signal(sig, SIG_DFL);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    uint64_t a = (uint64_t)(uintptr_t)si->si_addr;
    region *r = si->si_code == SEGV_ACCERR ? region_at(a) : NULL;
    if (!r) {
        errno = saved;
        chain(sig, si, uc);
        return;
    }
    uint64_t base = atomic_load(&r->base);
    size_t page = (size_t)((a - base) / page_size);
    void *at = (void *)(uintptr_t)(base + page * page_size);
    turn_take(r);
    uint8_t was = atomic_load(&r->state[page]);
    /* A write to a clean page: it is the host's now, to be sent. A child of
     * fork has no fetch thread (and its job failed): it keeps the host copy
     * of a stale page as it is. */
    bool open = was == PAGE_CLEAN || was == PAGE_DIRTY || (was == PAGE_STALE && getpid() != owner);
    if (open) {
        atomic_store(&r->state[page], PAGE_DIRTY);
        atomic_store(&r->dirty, true);
        mprotect(at, page_size, PROT_READ | PROT_WRITE);
    }
    turn_give(r);
    /* STALE: the fetch thread brings the page back while this one waits;
     * then the access runs again (and faults once more if it writes). */
    for (unsigned i = 0; !open; i = (i + 1) % SLOTS) {
        uint32_t free_ = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&slots[i].state, &free_, SLOT_CLAIMED)) {
            if (i == SLOTS - 1)
                sched_yield();
            continue;
        }
        slots[i].addr = a;
        atomic_store(&slots[i].state, SLOT_POSTED);
        atomic_fetch_add(&fetch_seq, 1);
        futex(&fetch_seq, FUTEX_WAKE_PRIVATE, 1);
        uint32_t s;
        while ((s = atomic_load(&slots[i].state)) != SLOT_DONE)
            futex(&slots[i].state, FUTEX_WAIT_PRIVATE, s);
        atomic_store(&slots[i].state, SLOT_FREE);
        break;
    }
    errno = saved;
}

/* Sets the program's view of pages [first, last) of r to prot. */
static void protect(region *r, size_t first, size_t last, int prot)
{
    if (last > first)
        mprotect((void *)(uintptr_t)(atomic_load(&r->base) + first * page_size), (last - first) * page_size, prot);
}

/* Copies [off, off + n) of r from the device into to (the part the device
 * copy has), waiting. */
static CUresult fetch_bytes(region *r, uint64_t off, uint64_t n, uint8_t *to)
{
    if (off >= r->dev_size)
        return CUDA_SUCCESS;
    if (n > r->dev_size - off)
        n = r->dev_size - off;
    /* The fetch thread's own stream: the NULL stream's words may wait
     * behind a host function, which may be what touched the page. */
    CUresult rc;
    proxy_obj *s = shim_per_thread_stream(r->device, &rc);
    if (!s)
        return rc;
    uint64_t v = 0;
    for (uint64_t done = 0; done < n && rc == CUDA_SUCCESS; done += JOB_COPY_CHUNK) {
        uint64_t len = n - done < JOB_COPY_CHUNK ? n - done : JOB_COPY_CHUNK;
        uint8_t body[COPY_DTOH_BODY];
        copy_dtoh_write(body, r->dev + off + done, len);
        handover h = { .op = CUDA_OP_cuMemcpyDtoHAsync_v2, .stream = s, .body = body, .body_len = sizeof body,
                       .dst = to + done, .dst_len = len };
        rc = link_handover(r->link, &h, &v);
    }
    return rc ? rc : link_wait(r->link, s, v);
}

/* Brings back the stale pages of the block around address a (of all of r
 * after a prefetch to the CPU). Only pages still STALE take the device's
 * bytes: the others may be written by the program meanwhile. */
static void fetch(uint64_t a)
{
    region *r = region_at(a);
    if (!r)
        return;
    uint64_t base = atomic_load(&r->base);
    size_t pages = (size_t)(r->size / page_size);
    size_t first = 0, last = pages;
    if (!atomic_exchange(&r->fetch_all, false)) {
        size_t per = (size_t)(FETCH_BLOCK / page_size), at = (size_t)((a - base) / page_size);
        first = at / per * per;
        last = first + per < pages ? first + per : pages;
    }
    while (first < last && atomic_load(&r->state[first]) != PAGE_STALE)
        first++;
    while (last > first && atomic_load(&r->state[last - 1]) != PAGE_STALE)
        last--;
    if (first == last)
        return;
    uint64_t off = first * page_size, n = (last - first) * page_size;
    uint8_t *got = calloc(1, n);
    CUresult rc = got ? fetch_bytes(r, off, n, got) : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) {
        static atomic_bool told;
        if (!atomic_exchange(&told, true))
            shim_log(SHIM_LOG_ERROR, "managed memory at %#llx: its pages could not be fetched (CUDA error %d); "
                     "the CPU keeps the host copy", (unsigned long long)(base + off), (int)rc);
    }
    for (size_t p = first; p < last; p++) {
        /* Only the fetch thread takes a page out of STALE. */
        if (atomic_load(&r->state[p]) != PAGE_STALE)
            continue;
        if (rc == CUDA_SUCCESS)
            memcpy(r->alias + p * page_size, got + (p - first) * page_size, page_size);
        turn_take(r);
        atomic_store(&r->state[p], rc == CUDA_SUCCESS ? PAGE_CLEAN : PAGE_DIRTY);
        protect(r, p, p + 1, rc == CUDA_SUCCESS ? PROT_READ : PROT_READ | PROT_WRITE);
        turn_give(r);
    }
    free(got);
}

static void *fetch_main(void *unused)
{
    (void)unused;
    in_fetch = true;
    for (;;) {
        uint32_t seq = atomic_load(&fetch_seq);
        bool any = false;
        for (unsigned i = 0; i < SLOTS; i++) {
            if (atomic_load(&slots[i].state) != SLOT_POSTED)
                continue;
            any = true;
            pthread_mutex_lock(&table_lock);   /* no region leaves while it is fetched */
            fetch(slots[i].addr);
            pthread_mutex_unlock(&table_lock);
            atomic_store(&slots[i].state, SLOT_DONE);
            futex(&slots[i].state, FUTEX_WAKE_PRIVATE, INT32_MAX);
        }
        if (!any)
            futex(&fetch_seq, FUTEX_WAIT_PRIVATE, seq);
    }
    return NULL;
}

static bool machinery_ok;

static void machinery_start(void)
{
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    owner = getpid();
    pthread_t t;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);   /* signals stay with the program's threads */
    bool started = pthread_create(&t, NULL, fetch_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!started)
        return;
    pthread_detach(t);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    machinery_ok = sigaction(SIGSEGV, &sa, &previous) == 0;
}

/* Installs the handler and starts the fetch thread, once per process. */
static bool machinery_ready(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, machinery_start);
    return machinery_ok;
}

/* ---- regions ---- */

/* Maps size bytes (whole pages) at base, inside the reserved window, as a
 * region of device on its link whose device copy is at dev. A fresh
 * allocation (dev == base) is zeroed on the device first so both copies
 * start equal (CLEAN, read-only); a __managed__ variable starts STALE, its
 * initial value on the device. */
static CUresult region_add(uint64_t base, uint64_t dev, uint64_t size, uint64_t asked, int device, bool host,
                           unsigned flags)
{
    shim_device *d = shim_device_at(device);
    int fd = memfd_create("rig-managed", MFD_CLOEXEC);
    if (fd < 0)
        return shim_nomem("a host copy of %llu bytes of managed memory (memfd: %s)", (unsigned long long)size,
                          strerror(errno));
    void *alias = MAP_FAILED;
    _Atomic uint8_t *state = calloc(size / page_size, 1);
    if (state && ftruncate(fd, (off_t)size) == 0)
        alias = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    bool global = dev != base;
    void *view = alias == MAP_FAILED ? MAP_FAILED
                                     : mmap((void *)(uintptr_t)base, size, global ? PROT_NONE : PROT_READ,
                                            MAP_SHARED | MAP_FIXED, fd, 0);
    close(fd);
    if (view == MAP_FAILED) {
        if (alias != MAP_FAILED)
            munmap(alias, size);
        free(state);
        return shim_nomem("%s of %llu bytes of managed memory", state ? "the host views" : "the page states",
                          (unsigned long long)size);
    }
    /* The device's copy starts as the host's: zero. */
    uint8_t body[rec_memset_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_memset_put(&w, &(rec_memset){ .dst = base, .pitch = size, .value = 0, .element_size = 1, .width = size,
                                      .height = 1 });
    handover ho = { .op = CUDA_OP_cuMemsetD2D32Async, .stream = d->null_stream, .body = body, .body_len = w.off };
    /* Waited for: work on a stream that does not wait for the NULL stream
     * may write the memory as soon as the allocation returns. */
    uint64_t zeroed = 0;
    CUresult rc = global ? CUDA_SUCCESS : link_handover(d->link, &ho, &zeroed);
    if (rc == CUDA_SUCCESS && !global)
        rc = link_wait(d->link, d->null_stream, zeroed);
    if (global)
        for (uint64_t i = 0; i < size / page_size; i++)
            state[i] = PAGE_STALE;
    pthread_mutex_lock(&table_lock);
    uint32_t slot = REGIONS_MAX;
    for (uint32_t i = 0; i < REGIONS_MAX && rc == CUDA_SUCCESS; i++)
        if (!atomic_load(&regions[i].base)) {
            slot = i;
            break;
        }
    if (rc == CUDA_SUCCESS && slot == REGIONS_MAX) {
        shim_log(SHIM_LOG_ERROR, "no room for more than %d managed allocations", REGIONS_MAX);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS) {
        region *r = &regions[slot];
        r->size = size;
        r->asked = asked;
        r->dev = dev;
        r->dev_size = global ? asked : size;
        r->device = device;
        r->link = d->link;
        r->alias = alias;
        r->state = state;
        atomic_store(&r->dirty, false);
        atomic_store(&r->written, false);
        atomic_store(&r->fetch_all, false);
        atomic_flag_clear(&r->turn);
        r->host = host;
        r->flags = flags;
        atomic_store(&r->attach, host ? CU_MEM_ATTACH_GLOBAL : flags);
        r->read_mostly = false;
        r->preferred = r->last_prefetch = (CUmemLocation){ 0, 0 };
        r->accessed_by = 0;
        atomic_store(&r->base, base);
        if (slot >= atomic_load(&regions_used))
            atomic_store(&regions_used, slot + 1);
        atomic_fetch_add(&live_count, 1);
    }
    pthread_mutex_unlock(&table_lock);
    if (rc != CUDA_SUCCESS) {
        mmap((void *)(uintptr_t)base, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        munmap(alias, size);
        free(state);
    }
    return rc;
}

/* Takes the region at base out of the table and gives its range back to
 * the window's reservation; false when base starts none (of that kind). */
static bool region_remove(uint64_t base, bool host)
{
    if (!atomic_load(&live_count))
        return false;
    pthread_mutex_lock(&table_lock);
    region *r = region_at(base);
    bool found = r && atomic_load(&r->base) == base && r->host == host;
    if (found) {
        atomic_store(&r->base, 0);
        atomic_fetch_sub(&live_count, 1);
        mmap((void *)(uintptr_t)base, r->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
             -1, 0);
        munmap(r->alias, r->size);
        free((void *)r->state);
        r->state = NULL;
        free(r->name);
        r->name = NULL;
    }
    pthread_mutex_unlock(&table_lock);
    return found;
}

static uint64_t round_pages(uint64_t n)
{
    return (n + page_size - 1) / page_size * page_size;
}

/* Gives back an allocation a region could not be made for. */
static void drop_alloc(CUdeviceptr p)
{
    uint64_t sz;
    int dev;
    if (shim_alloc_remove(p, &sz, &dev))
        link_drop(shim_device_at(dev)->link, CUDA_OP_cuMemFree_v2, p);
}

/* Allocates a region on the current proxy context. */
static CUresult region_alloc(proxy_obj *ctx, size_t bytes, bool host, unsigned flags, CUdeviceptr *out)
{
    if (!machinery_ready())
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t size = round_pages(bytes);
    CUdeviceptr p;
    CUresult rc = shim_mem_alloc(ctx, size, &p);
    if (rc)
        return rc;
    rc = region_add(p, p, size, bytes, ctx->device, host, flags);
    if (rc) {
        drop_alloc(p);
        return rc;
    }
    *out = p;
    return CUDA_SUCCESS;
}

/* ---- what the rest of the shim calls ---- */

/* Sends r's DIRTY pages on s and makes them CLEAN. The view is made
 * read-only before the alias is read, so a write after this faults again
 * and is sent next time. */
static CUresult push_region(region *r, proxy_obj *s)
{
    if (!atomic_exchange(&r->dirty, false))
        return CUDA_SUCCESS;
    size_t pages = (size_t)(r->size / page_size);
    CUresult rc = CUDA_SUCCESS;
    for (size_t p = 0; p < pages && rc == CUDA_SUCCESS;) {
        if (atomic_load(&r->state[p]) != PAGE_DIRTY) {
            p++;
            continue;
        }
        size_t q = p;
        turn_take(r);
        while (q < pages && (uint64_t)(q - p) * page_size < JOB_COPY_CHUNK) {
            uint8_t want = PAGE_DIRTY;
            if (!atomic_compare_exchange_strong(&r->state[q], &want, PAGE_CLEAN))
                break;
            q++;
        }
        protect(r, p, q, PROT_READ);
        turn_give(r);
        uint64_t off = p * page_size, len = (q - p) * page_size;
        if (len > r->dev_size - off)
            len = off < r->dev_size ? r->dev_size - off : 0;
        if (len)
            rc = shim_htod_record(r->link, s, r->dev + off, r->alias + off, len,
                                  shim_htod_compress(r->link, s, r->alias + off, len, false), false, false, false,
                                  NULL);
        p = q;
    }
    if (rc != CUDA_SUCCESS)
        atomic_store(&r->dirty, true);
    return rc;
}

/* Regions the device may touch (attached to the host: it may not). */
static bool device_may_use(region *r)
{
    return atomic_load(&r->attach) != CU_MEM_ATTACH_HOST;
}

CUresult shim_managed_before_launch(agent_link *l, proxy_obj *s)
{
    CUresult rc = shim_hostmap_before_launch(l, s);
    if (rc || !atomic_load(&live_count))
        return rc;
    pthread_mutex_lock(&table_lock);
    uint32_t n = atomic_load(&regions_used);
    for (uint32_t i = 0; i < n && rc == CUDA_SUCCESS; i++)
        if (atomic_load(&regions[i].base) && regions[i].link == l && device_may_use(&regions[i]))
            rc = push_region(&regions[i], s);
    pthread_mutex_unlock(&table_lock);
    return rc;
}

void shim_managed_after_launch(agent_link *l)
{
    if (!atomic_load(&live_count))
        return;
    uint32_t n = atomic_load(&regions_used);
    for (uint32_t i = 0; i < n; i++)
        if (atomic_load(&regions[i].base) && regions[i].link == l && device_may_use(&regions[i]))
            atomic_store(&regions[i].written, true);
}

/* True when [p, p + n) touches r's pages or its device copy. */
static bool overlaps(region *r, uint64_t p, uint64_t n)
{
    uint64_t b = atomic_load(&r->base);
    return b && ((p < b + r->size && b < p + n) || (p < r->dev + r->size && r->dev < p + n));
}

CUresult shim_managed_before_access(proxy_obj *s, uint64_t p, uint64_t n)
{
    if (!atomic_load(&live_count) || n == 0)
        return CUDA_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&table_lock);
    uint32_t used = atomic_load(&regions_used);
    for (uint32_t i = 0; i < used && rc == CUDA_SUCCESS; i++)
        if (overlaps(&regions[i], p, n))
            rc = push_region(&regions[i], s);
    pthread_mutex_unlock(&table_lock);
    return rc;
}

void shim_managed_written(uint64_t p, uint64_t n)
{
    if (!atomic_load(&live_count) || n == 0)
        return;
    uint32_t used = atomic_load(&regions_used);
    for (uint32_t i = 0; i < used; i++)
        if (overlaps(&regions[i], p, n))
            atomic_store(&regions[i].written, true);
}

void shim_managed_synced(agent_link *l)
{
    if (in_fetch)
        return;
    shim_hostmap_synced(l);
    if (!atomic_load(&live_count))
        return;
    uint32_t used = atomic_load(&regions_used);
    bool any = false;
    for (uint32_t i = 0; i < used && !any; i++)
        any = atomic_load(&regions[i].base) && regions[i].link == l && atomic_load(&regions[i].written);
    if (!any)
        return;
    /* Work still in flight may write again: the mark stays until none is. */
    pthread_mutex_lock(&l->lock);
    bool idle = l->unreported_bytes == 0;
    pthread_mutex_unlock(&l->lock);
    pthread_mutex_lock(&table_lock);
    for (uint32_t i = 0; i < used; i++) {
        region *r = &regions[i];
        if (!atomic_load(&r->base) || r->link != l || !atomic_load(&r->written))
            continue;
        if (idle)
            atomic_store(&r->written, false);
        size_t pages = (size_t)(r->size / page_size);
        for (size_t p = 0; p < pages;) {
            if (atomic_load(&r->state[p]) != PAGE_CLEAN) {
                p++;
                continue;
            }
            size_t q = p;
            turn_take(r);
            for (uint8_t want = PAGE_CLEAN;
                 q < pages && atomic_compare_exchange_strong(&r->state[q], &want, PAGE_STALE); want = PAGE_CLEAN)
                q++;
            protect(r, p, q, PROT_NONE);
            turn_give(r);
            p = q;
        }
    }
    pthread_mutex_unlock(&table_lock);
}

/* ---- queries from memory.c ---- */

bool shim_managed_find(uint64_t p, shim_managed_info *out)
{
    if (!atomic_load(&live_count))
        return false;
    pthread_mutex_lock(&table_lock);
    region *r = region_at(p);
    if (r) {
        out->base = atomic_load(&r->base);
        out->size = r->asked;
        out->device = r->device;
        out->host = r->host;
        out->flags = r->flags;
    }
    pthread_mutex_unlock(&table_lock);
    return r != NULL;
}

CUresult shim_managed_host_alloc(proxy_obj *ctx, size_t bytes, unsigned flags, void **out)
{
    CUdeviceptr p;
    CUresult rc = region_alloc(ctx, bytes, true, flags, &p);
    if (rc == CUDA_SUCCESS)
        *out = (void *)(uintptr_t)p;
    return rc;
}

bool shim_managed_free(uint64_t base, bool host)
{
    if (!region_remove(base, host))
        return false;
    uint64_t size;
    int device;
    if (shim_alloc_remove(base, &size, &device))
        link_drop(shim_device_at(device)->link, CUDA_OP_cuMemFree_v2, base);
    return true;
}

int shim_managed_device_attribute(CUdevice_attribute a, int agent_value)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 0;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: return 0;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES: return 0;
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST: return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 0;
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: return 0;
    default: return agent_value;
    }
}

/* ---- exports ---- */

SHIM_EXPORT(cuMemAllocManaged)
{
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx)
        return SHIM_LOCAL(cuMemAllocManaged);
    if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    return region_alloc(ctx, bytesize, false, flags, dptr);
}

SHIM_EXPORT(cuMemHostGetDevicePointer_v2)
{
    shim_managed_info m;
    if (shim_managed_find((uint64_t)(uintptr_t)p, &m)) {
        if (!pdptr || Flags != 0)
            return CUDA_ERROR_INVALID_VALUE;
        *pdptr = (CUdeviceptr)(uintptr_t)p;   /* one address on both ends */
        return CUDA_SUCCESS;
    }
    if (shim_hostmap_device_pointer(p, pdptr ? pdptr : &(CUdeviceptr){ 0 }))
        return pdptr && Flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx)
        return SHIM_LOCAL(cuMemHostGetDevicePointer_v2);
    /* Host memory of a proxy context without DEVICEMAP and pageable memory
     * have no device copy on the agent. */
    shim_log_unsupported_once("cuMemHostGetDevicePointer of memory neither allocated with "
                              "CU_MEMHOSTALLOC_DEVICEMAP nor registered with CU_MEMHOSTREGISTER_DEVICEMAP",
                              shim_device_at(ctx->device)->label);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* The region holding [p, p + n), managed or mapped, under table_lock; NULL
 * (lock not held) when there is none. */
static region *region_locked(CUdeviceptr p, size_t n)
{
    pthread_mutex_lock(&table_lock);
    region *r = region_at(p);
    if (r && n <= r->size - (p - atomic_load(&r->base)))
        return r;
    pthread_mutex_unlock(&table_lock);
    return NULL;
}

static bool location_valid(CUmemLocation l)
{
    if (l.type == CU_MEM_LOCATION_TYPE_DEVICE)
        return l.id >= 0 && l.id < shim_device_count();
    return l.type == CU_MEM_LOCATION_TYPE_HOST || l.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT ||
           (l.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && l.id == 0);
}

static CUmemLocation location_of_device(CUdevice d)
{
    if (d == CU_DEVICE_CPU)
        return (CUmemLocation){ CU_MEM_LOCATION_TYPE_HOST, 0 };
    return (CUmemLocation){ CU_MEM_LOCATION_TYPE_DEVICE, d };
}

/* A prefetch to the device sends what the CPU wrote, on the stream; one to
 * the CPU makes the next fault after a synchronisation fetch all of it. */
static CUresult prefetch(CUdeviceptr p, size_t n, CUmemLocation to, unsigned flags, CUstream h, bool per_thread,
                         bool *local)
{
    *local = false;
    if (!shim_managed_find(p, &(shim_managed_info){ 0 })) {
        *local = shim_device_of_pointer(p) < 0;
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (flags != 0 || n == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!location_valid(to))
        return to.type == CU_MEM_LOCATION_TYPE_DEVICE ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_INVALID_VALUE;
    proxy_obj *s = NULL;
    CUresult rc;
    int k = shim_stream(h, per_thread, &s, &rc);
    if (k < 0)
        return rc;
    region *r = region_locked(p, n);
    if (!r || r->host)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (k == 0 || s->link != r->link)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else {
        r->last_prefetch = to;
        rc = CUDA_SUCCESS;
        if (to.type == CU_MEM_LOCATION_TYPE_DEVICE)
            rc = push_region(r, s);
        else
            atomic_store(&r->fetch_all, true);
    }
    if (r)
        pthread_mutex_unlock(&table_lock);
    return rc;
}

#define PREFETCH_EXPORT(sym, location, flags, per_thread)                      \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        bool local;                                                             \
        CUresult rc = prefetch(devPtr, count, location, flags, hStream, per_thread, &local); \
        return local && shim_local_driver() ? SHIM_LOCAL(sym) : rc;             \
    }

PREFETCH_EXPORT(cuMemPrefetchAsync, location_of_device(dstDevice), 0, false)
PREFETCH_EXPORT(cuMemPrefetchAsync_ptsz, location_of_device(dstDevice), 0, true)
PREFETCH_EXPORT(cuMemPrefetchAsync_v2, location, flags, false)
PREFETCH_EXPORT(cuMemPrefetchAsync_v2_ptsz, location, flags, true)

/* Advice is remembered (for the range queries); it changes nothing else:
 * pages move only as the header says. */
static CUresult advise(CUdeviceptr p, size_t n, CUmem_advise what, CUmemLocation where)
{
    if (n == 0 || what < CU_MEM_ADVISE_SET_READ_MOSTLY || what > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
        return CUDA_ERROR_INVALID_VALUE;
    bool needs_location = what == CU_MEM_ADVISE_SET_PREFERRED_LOCATION || what == CU_MEM_ADVISE_SET_ACCESSED_BY ||
                          what == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
    if (needs_location && !location_valid(where))
        return where.type == CU_MEM_LOCATION_TYPE_DEVICE ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_INVALID_VALUE;
    region *r = region_locked(p, n);
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    uint64_t bit = where.type == CU_MEM_LOCATION_TYPE_DEVICE ? UINT64_C(1) << (where.id & 62) : ACCESSED_BY_CPU;
    if (r->host)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        switch (what) {
        case CU_MEM_ADVISE_SET_READ_MOSTLY: r->read_mostly = true; break;
        case CU_MEM_ADVISE_UNSET_READ_MOSTLY: r->read_mostly = false; break;
        case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: r->preferred = where; break;
        case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: r->preferred = (CUmemLocation){ 0, 0 }; break;
        case CU_MEM_ADVISE_SET_ACCESSED_BY: r->accessed_by |= bit; break;
        case CU_MEM_ADVISE_UNSET_ACCESSED_BY: r->accessed_by &= ~bit; break;
        }
    pthread_mutex_unlock(&table_lock);
    return rc;
}

SHIM_EXPORT(cuMemAdvise)
{
    if (shim_device_of_pointer(devPtr) < 0)
        return SHIM_LOCAL(cuMemAdvise);
    return advise(devPtr, count, advice, location_of_device(device));
}

SHIM_EXPORT(cuMemAdvise_v2)
{
    if (shim_device_of_pointer(devPtr) < 0)
        return SHIM_LOCAL(cuMemAdvise_v2);
    return advise(devPtr, count, advice, location);
}

static int device_of_location(CUmemLocation l)
{
    if (l.type == CU_MEM_LOCATION_TYPE_DEVICE)
        return l.id;
    return l.type == 0 ? CU_DEVICE_INVALID : CU_DEVICE_CPU;
}

static CUresult range_attribute(void *data, size_t size, CUmem_range_attribute what, CUdeviceptr p, size_t n)
{
    if (!data || n == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (what == CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY ? size == 0 || size % 4
                                                   : size != 4 || what < 1 || what > 8)
        return CUDA_ERROR_INVALID_VALUE;
    region *r = region_locked(p, n);
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    int32_t *out = data;
    switch (what) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: *out = r->read_mostly; break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION: *out = device_of_location(r->preferred); break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: *out = device_of_location(r->last_prefetch); break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE: *out = (int32_t)r->preferred.type; break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID: *out = r->preferred.id; break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE: *out = (int32_t)r->last_prefetch.type; break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID: *out = r->last_prefetch.id; break;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
        size_t k = 0, room = size / 4;
        if (r->accessed_by & ACCESSED_BY_CPU)
            out[k++] = CU_DEVICE_CPU;
        for (int d = 0; d < 63 && k < room; d++)
            if (r->accessed_by & (UINT64_C(1) << d))
                out[k++] = d;
        while (k < room)
            out[k++] = CU_DEVICE_INVALID;
        break;
    }
    default: break;
    }
    pthread_mutex_unlock(&table_lock);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuMemRangeGetAttribute)
{
    if (shim_device_of_pointer(devPtr) < 0)
        return SHIM_LOCAL(cuMemRangeGetAttribute);
    return range_attribute(data, dataSize, attribute, devPtr, count);
}

SHIM_EXPORT(cuMemRangeGetAttributes)
{
    if (shim_device_of_pointer(devPtr) < 0)
        return SHIM_LOCAL(cuMemRangeGetAttributes);
    if (!data || !dataSizes || !attributes || numAttributes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numAttributes; i++) {
        CUresult rc = range_attribute(data[i], dataSizes[i], attributes[i], devPtr, count);
        if (rc)
            return rc;
    }
    return CUDA_SUCCESS;
}

/* Attached to the host, the device may not touch an allocation, so launches
 * neither send nor invalidate it and the CPU may use it while they run. */
static CUresult attach(CUstream h, CUdeviceptr p, size_t n, unsigned flags, bool per_thread)
{
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST && flags != CU_MEM_ATTACH_SINGLE)
        return CUDA_ERROR_INVALID_VALUE;
    proxy_obj *s = NULL;
    CUresult rc;
    int k = shim_stream(h, per_thread, &s, &rc);
    if (k < 0)
        return rc;
    region *r = region_locked(p, 1);
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    rc = CUDA_SUCCESS;
    if (r->host || atomic_load(&r->base) != p || (n != 0 && n != r->asked))
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (k == 0 || s->link != r->link)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else if (flags == CU_MEM_ATTACH_HOST && atomic_load(&r->attach) != CU_MEM_ATTACH_HOST)
        /* What the CPU wrote reaches the device before it lets go. */
        rc = push_region(r, s);
    if (rc == CUDA_SUCCESS)
        atomic_store(&r->attach, flags);
    pthread_mutex_unlock(&table_lock);
    return rc;
}

SHIM_EXPORT(cuStreamAttachMemAsync)
{
    if (shim_device_of_pointer(dptr) < 0)
        return SHIM_LOCAL(cuStreamAttachMemAsync);
    return attach(hStream, dptr, length, flags, false);
}

SHIM_EXPORT(cuStreamAttachMemAsync_ptsz)
{
    if (shim_device_of_pointer(dptr) < 0)
        return SHIM_LOCAL(cuStreamAttachMemAsync_ptsz);
    return attach(hStream, dptr, length, flags, true);
}

SHIM_EXPORT(cuPointerSetAttribute)
{
    if (shim_device_of_pointer(ptr) < 0)
        return SHIM_LOCAL(cuPointerSetAttribute);
    uint64_t base, size;
    int device;
    if (!value || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS || !shim_alloc_find(ptr, &base, &size, &device))
        return CUDA_ERROR_INVALID_VALUE;
    /* Copies and memsets on a proxy are ordered on their stream already. */
    return CUDA_SUCCESS;
}

/* A __managed__ variable of a library on a proxy: the agent's driver put
 * its storage (the global kernels use by name) where it chose, outside the
 * window, so the program's pages are at an address of the window of their
 * own and the coherence runs between the two. Host code reaches the
 * variable through the pointer cudart keeps, which is this one. */
SHIM_EXPORT(cuLibraryGetManaged)
{
    proxy_obj *m = arena_get(library, PROXY_MODULE);
    if (!m)
        return SHIM_LOCAL(cuLibraryGetManaged);
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx && m->u.module.local)
        return shim_local_driver()->fn_cuLibraryGetManaged(dptr, bytes, m->u.module.local, name);
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    /* Without a current context: the first proxy device holds it. */
    int device = ctx ? ctx->device : shim_local_count();
    if (device >= shim_device_count())
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!machinery_ready())
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t found = 0, found_size = 0;
    pthread_mutex_lock(&table_lock);
    uint32_t used = atomic_load(&regions_used);
    for (uint32_t i = 0; i < used && !found; i++)
        if (atomic_load(&regions[i].base) && regions[i].name && regions[i].module == m->id &&
            regions[i].device == device && strcmp(regions[i].name, name) == 0)
            found = atomic_load(&regions[i].base), found_size = regions[i].asked;
    pthread_mutex_unlock(&table_lock);
    if (!found) {
        CUdeviceptr g;
        size_t size;
        CUresult rc = shim_module_global(m, device, &g, &size, name);
        if (rc)
            return rc;
        char *copy = strdup(name);
        CUdeviceptr h = 0;
        proxy_obj on = { .device = device };
        /* An allocation reserves the pages' address in the window. */
        rc = copy ? shim_mem_alloc(&on, round_pages(size ? size : 1), &h)
                  : shim_nomem("the name of managed variable %s", name);
        if (rc == CUDA_SUCCESS) {
            rc = region_add(h, g, round_pages(size ? size : 1), size, device, false, CU_MEM_ATTACH_GLOBAL);
            if (rc)
                drop_alloc(h);
        }
        if (rc) {
            free(copy);
            return rc;
        }
        pthread_mutex_lock(&table_lock);
        region *r = region_at(h);
        r->module = m->id;
        r->name = copy;
        pthread_mutex_unlock(&table_lock);
        found = h;
        found_size = size;
    }
    if (dptr)
        *dptr = found;
    if (bytes)
        *bytes = found_size;
    return CUDA_SUCCESS;
}

/* ---- batches (CUDA 13) ---- */

static bool batch_valid(CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *locs, size_t *idxs,
                        size_t nlocs, unsigned long long flags, bool with_locations)
{
    if (!dptrs || !sizes || count == 0 || flags != 0)
        return false;
    if (!with_locations)
        return true;
    if (!locs || !idxs || nlocs == 0 || nlocs > count || idxs[0] != 0)
        return false;
    for (size_t j = 1; j < nlocs; j++)
        if (idxs[j] <= idxs[j - 1] || idxs[j] >= count)
            return false;
    return true;
}

/* Each range a prefetch to the location of its part of the batch; a
 * discard leaves contents undefined, and keeping them is allowed. */
static CUresult batch(CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *locs, size_t *idxs,
                      size_t nlocs, unsigned long long flags, CUstream h, bool per_thread, bool with_locations,
                      bool *local)
{
    *local = dptrs && count && shim_device_of_pointer(dptrs[0]) < 0;
    if (*local)
        return CUDA_ERROR_INVALID_VALUE;
    if (!batch_valid(dptrs, sizes, count, locs, idxs, nlocs, flags, with_locations))
        return CUDA_ERROR_INVALID_VALUE;
    if (h == CU_STREAM_LEGACY || (!h && !per_thread))
        return CUDA_ERROR_INVALID_VALUE;   /* batches never go on the legacy NULL stream */
    for (size_t i = 0; i < count; i++) {
        shim_managed_info m;
        if (sizes[i] == 0 || !shim_managed_find(dptrs[i], &m) || m.host ||
            sizes[i] > m.size - (dptrs[i] - m.base))
            return CUDA_ERROR_INVALID_VALUE;
    }
    proxy_obj *s = NULL;
    CUresult rc;
    if (shim_stream(h, per_thread, &s, &rc) < 0)
        return rc;
    size_t j = 0;
    for (size_t i = 0; with_locations && i < count; i++) {
        while (j + 1 < nlocs && idxs[j + 1] <= i)
            j++;
        bool unused;
        if ((rc = prefetch(dptrs[i], sizes[i], locs[j], 0, h, per_thread, &unused)))
            return rc;
    }
    return CUDA_SUCCESS;
}

#define BATCH_EXPORT(sym, locs, idxs, nlocs, per_thread, with_locations)       \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        bool local;                                                             \
        CUresult rc = batch(dptrs, sizes, count, locs, idxs, nlocs, flags, hStream, per_thread, \
                            with_locations, &local);                            \
        return local && shim_local_driver() ? SHIM_LOCAL(sym) : rc;             \
    }

BATCH_EXPORT(cuMemPrefetchBatchAsync, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, false, true)
BATCH_EXPORT(cuMemPrefetchBatchAsync_ptsz, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, true, true)
BATCH_EXPORT(cuMemDiscardAndPrefetchBatchAsync, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, false, true)
BATCH_EXPORT(cuMemDiscardAndPrefetchBatchAsync_ptsz, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, true, true)
BATCH_EXPORT(cuMemDiscardBatchAsync, NULL, NULL, 0, false, false)
BATCH_EXPORT(cuMemDiscardBatchAsync_ptsz, NULL, NULL, 0, true, false)
