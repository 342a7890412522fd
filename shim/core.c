/* The shim's core state: the devices the program sees (local ones through
 * the real driver, then the proxies of each agent), the calling thread's
 * current proxy context, and the allocations on proxies. */
#include "shim/core.h"

#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/job.h"
#include "proto/key.h"
#include "proto/names.h"
#include "proto/records.h"
#include "proto/report.h"
#include "proto/wire.h"
#include "shim/link.h"
#include "shim/log.h"
#include "shim/mesh.h"
#include "shim/proxy.h"

/* Marks this library so the local-driver search never loads the shim itself.
 * A function, not data: sanitizers add companion symbols to exported data. */
__attribute__((visibility("default"))) void rig_shim_marker(void)
{
}

static shim_device devices[SHIM_DEVICES_MAX];
static int device_count, local_count;
static agent_link *links;
static size_t link_count;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool init_done;
static CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;

/* The thread's current proxy context; a local context is the real driver's
 * business. The stack mirrors push/pop across both kinds. */
static __thread proxy_obj *tls_current;
#define CTX_STACK 32
static __thread struct { proxy_obj *proxy; bool used; } tls_stack[CTX_STACK];
static __thread int tls_depth;

bool shim_initialized(void)
{
    return __atomic_load_n(&init_done, __ATOMIC_ACQUIRE) && init_result == CUDA_SUCCESS;
}

shim_device *shim_device_at(int ordinal)
{
    if (ordinal < 0 || ordinal >= device_count)
        return NULL;
    return &devices[ordinal];
}

bool shim_has_proxies(void)
{
    return shim_initialized() && device_count > local_count;
}

int shim_local_count(void)
{
    return local_count;
}

proxy_obj *shim_proxy_current(void)
{
    return tls_current;
}

void shim_set_proxy_current(proxy_obj *ctx)
{
    tls_current = ctx;
}

bool shim_ctx_push(proxy_obj *proxy)
{
    if (tls_depth == CTX_STACK)
        return false;
    tls_stack[tls_depth].proxy = tls_current;
    tls_stack[tls_depth].used = true;
    tls_depth++;
    tls_current = proxy;
    return true;
}

bool shim_ctx_pop(proxy_obj **was)
{
    if (tls_depth == 0)
        return false;
    *was = tls_current;
    tls_depth--;
    tls_current = tls_stack[tls_depth].proxy;
    return true;
}

bool shim_is_proxy_handle(const void *h)
{
    return arena_contains(h);
}

bool shim_current_is_proxy(void)
{
    return tls_current != NULL;
}

int shim_device_count(void)
{
    return shim_initialized() ? device_count : 0;
}

/* Primary contexts of local devices handed out through export table 2:
 * retained once per device on first request and kept. */
static CUcontext local_primaries[SHIM_DEVICES_MAX];

CUresult shim_primary_context(CUdevice dev, CUcontext *out)
{
    shim_device *d = shim_device_at(dev);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    if (d->proxy) {
        *out = (CUcontext)d->primary;
        return CUDA_SUCCESS;
    }
    const shim_driver *drv = shim_local_driver();
    pthread_mutex_lock(&init_lock);
    CUresult rc = CUDA_SUCCESS;
    if (!local_primaries[dev])
        rc = drv->fn_cuDevicePrimaryCtxRetain(&local_primaries[dev], d->local_ordinal);
    *out = local_primaries[dev];
    pthread_mutex_unlock(&init_lock);
    return rc;
}

CUresult shim_device_identity(CUdevice dev, uint8_t uuid[16], int *pci_domain, int *pci_bus, int *pci_device)
{
    shim_device *d = shim_device_at(dev);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    if (d->proxy) {
        memcpy(uuid, d->uuid, 16);
        *pci_domain = d->attrs[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID];
        *pci_bus = d->attrs[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID];
        *pci_device = d->attrs[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID];
        return CUDA_SUCCESS;
    }
    const shim_driver *drv = shim_local_driver();
    CUuuid u;
    CUresult rc = drv->fn_cuDeviceGetUuid_v2 ? drv->fn_cuDeviceGetUuid_v2(&u, dev) : drv->fn_cuDeviceGetUuid(&u, dev);
    if (rc)
        return rc;
    memcpy(uuid, u.bytes, 16);
    if ((rc = drv->fn_cuDeviceGetAttribute(pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev)) ||
        (rc = drv->fn_cuDeviceGetAttribute(pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev)) ||
        (rc = drv->fn_cuDeviceGetAttribute(pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev)))
        return rc;
    return CUDA_SUCCESS;
}

const char *shim_current_device_label(void)
{
    if (tls_current) {
        shim_device *d = shim_device_at(tls_current->device);
        return d ? d->label : "a proxy device";
    }
    static __thread char label[32];
    const shim_driver *drv = shim_local_driver();
    CUdevice dev = -1;
    if (!drv || !drv->fn_cuCtxGetDevice || drv->fn_cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return "no device";
    snprintf(label, sizeof label, "CUDA:%d", dev);
    return label;
}

/* ---- initialisation ---- */

static int read_key(rig_key *key, rig_why *why)
{
    const char *hex = getenv("RIG_REMOTE_KEY");
    if (hex && *hex)
        return key_from_hex(key, hex, why);
    const char *file = getenv("RIG_KEY_FILE");
    if (file && *file)
        return key_read_file(key, file, why);
    return why_set(why, RIG_E_INVALID, "RIG_REMOTE_AGENTS is set but neither RIG_REMOTE_KEY nor RIG_KEY_FILE is");
}

/* The UUID a proxy reports, unless an earlier device has it (softgpu on
 * both ends, or one machine's agent seen twice): then one derived from the
 * agent's name, so no two devices of the program share a UUID. */
static void make_uuid_unique(int ordinal)
{
    shim_device *d = &devices[ordinal];
    for (int i = 0; i < ordinal; i++) {
        uint8_t other[16];
        int dom, bus, dev;
        if (devices[i].proxy)
            memcpy(other, devices[i].uuid, 16);
        else if (shim_device_identity(i, other, &dom, &bus, &dev) != CUDA_SUCCESS)
            continue;
        if (memcmp(other, d->uuid, 16) == 0) {
            uint8_t h[32];
            char seed[160];
            snprintf(seed, sizeof seed, "rig proxy %s", d->label);
            crypto_generichash_blake2b(h, sizeof h, (const uint8_t *)seed, strlen(seed), d->uuid, 16);
            memcpy(d->uuid, h, 16);
            return;
        }
    }
}

/* Creates a proxy device's primary context and NULL stream objects and
 * tells the agent the NULL stream's id. */
static CUresult open_proxy_objects(int ordinal)
{
    shim_device *d = &devices[ordinal];
    d->primary = arena_new(PROXY_CONTEXT, ordinal);
    d->null_stream = arena_new(PROXY_STREAM, ordinal);
    if (!d->primary || !d->null_stream)
        return CUDA_ERROR_OUT_OF_MEMORY;
    d->primary->u.ctx.primary = true;
    uint8_t body[rec_stream_create_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_stream_create_put(&w, &(rec_stream_create){ .device = (uint32_t)d->remote_ordinal, .flags = JOB_STREAM_NULL });
    handover h = { .op = JOB_OP_STREAM_CREATE, .object = d->null_stream->id, .body = body, .body_len = w.off };
    return link_handover(d->link, &h, NULL);
}

/* RIG_REMOTE_DEVICES=CUDA:N@NAME,...: when set, the only proxies the
 * program sees (`rig run --gpus` places a job on some devices of a
 * machine). The link's devices, first at devs[0], are kept in their order
 * and moved down over the ones left out; returns how many remain. */
static int keep_listed_devices(agent_link *l, shim_device *devs, const char *list, rig_why *why)
{
    bool keep[SHIM_DEVICES_MAX] = { false };
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        char entry[NAMES_TEXT_MAX];
        names_name n;
        if (len == 0 || len >= sizeof entry)
            return why_set(why, RIG_E_INVALID, "RIG_REMOTE_DEVICES: an entry is %s", len ? "too long" : "empty");
        memcpy(entry, p, len);
        entry[len] = '\0';
        if (names_parse(entry, &n, why) < 0 || n.kind != NAMES_CUDA || !n.named)
            return why_set(why, RIG_E_INVALID, "RIG_REMOTE_DEVICES: '%s' is not CUDA:N@NAME", entry);
        if (strcmp(n.name, l->name) == 0) {
            if (n.device >= (uint32_t)l->device_count)
                return why_set(why, RIG_E_INVALID, "RIG_REMOTE_DEVICES: %s: %s has %d device%s", entry, l->name,
                               l->device_count, l->device_count == 1 ? "" : "s");
            keep[n.device] = true;
        }
        p += len + (p[len] == ',');
    }
    int kept = 0;
    for (int i = 0; i < l->device_count; i++)
        if (keep[i])
            devs[kept++] = devs[i];
    for (int i = kept; i < l->device_count; i++)
        memset(&devs[i], 0, sizeof devs[i]);
    l->device_count = kept;
    return kept;
}

static CUresult init_remote(rig_why *why)
{
    const char *list = getenv("RIG_REMOTE_AGENTS");
    if (!list || !*list)
        return CUDA_SUCCESS;
    names_agents agents;
    if (names_parse_agents(list, &agents, why) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    const char *only = getenv("RIG_REMOTE_DEVICES");
    for (const char *p = only ? only : ""; *p;) {
        /* Each entry names an agent of the job (its form is checked per link). */
        size_t len = strcspn(p, ","), at = len;
        while (at > 0 && p[at - 1] != '@')
            at--;
        bool known = false;
        for (size_t i = 0; at && i < agents.count && !known; i++)
            known = strlen(agents.agents[i].name) == len - at && memcmp(agents.agents[i].name, p + at, len - at) == 0;
        if (!known) {
            why_set(why, RIG_E_INVALID, "RIG_REMOTE_DEVICES: '%.*s' names no agent of RIG_REMOTE_AGENTS", (int)len, p);
            names_agents_free(&agents);
            return CUDA_ERROR_INVALID_VALUE;
        }
        p += len + (p[len] == ',');
    }
    rig_key key;
    if (read_key(&key, why) < 0) {
        names_agents_free(&agents);
        return CUDA_ERROR_INVALID_VALUE;
    }
    links = calloc(agents.count, sizeof *links);
    if (!links) {
        why_set(why, RIG_E_NOMEM, "no memory for the links to %zu agents", agents.count);
        key_wipe(&key);
        names_agents_free(&agents);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = CUDA_SUCCESS;
    for (size_t i = 0; i < agents.count && rc == CUDA_SUCCESS; i++) {
        agent_link *l = &links[i];
        int first = device_count;
        if (link_open(l, agents.agents[i].name, &agents.agents[i].addr, (uint32_t)(i + 1), &key,
                      &devices[first], SHIM_DEVICES_MAX - first, why) < 0) {
            rc = CUDA_ERROR_NO_DEVICE;
            break;
        }
        link_count++;
        if (only && *only && keep_listed_devices(l, &devices[first], only, why) < 0) {
            rc = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        l->first_device = first;
        device_count += l->device_count;
        for (int o = first; o < device_count && rc == CUDA_SUCCESS; o++) {
            make_uuid_unique(o);
            rc = open_proxy_objects(o);
        }
    }
    key_wipe(&key);
    names_agents_free(&agents);
    if (rc == CUDA_SUCCESS)
        rc = shim_mesh_join(links, link_count, why);
    return rc;
}

/* Takes the job's variables out of the environment once cuInit read them,
 * so programs this one starts inherit no key (RIG_REMOTE_REPORT went when
 * report_open_from_env read it). The key's text is wiped first: an
 * environment string set at exec stays readable in /proc/PID/environ. */
static void forget_remote_env(void)
{
    char *hex = getenv("RIG_REMOTE_KEY");
    if (hex)
        sodium_memzero(hex, strlen(hex));
    unsetenv("RIG_REMOTE_KEY");
    unsetenv("RIG_REMOTE_AGENTS");
    unsetenv("RIG_REMOTE_REPORT");
    unsetenv("RIG_REMOTE_DEVICES");
}

/* An agent replaying on softgpu runs PTX only, what CUDA_FORCE_PTX_JIT=1
 * asks of a driver; the CUDA libraries read that variable (cuBLASLt at
 * cublasCreate) to pick kernels that carry PTX, so it is set, unless the
 * program set it or has local devices, whose driver would then ignore its
 * SASS too (docs/softgpu.md: softgpu and the CUDA libraries). softgpu as
 * the local driver sets it itself. */
static void declare_ptx_only(void)
{
    if (local_count > 0)
        return;
    for (size_t i = 0; i < link_count; i++)
        if (link_on_softgpu(&links[i])) {
            setenv("CUDA_FORCE_PTX_JIT", "1", 0);
            return;
        }
}

/* RIG_STATS=1: one line per proxy device at exit. Figures are per agent
 * (one connection serves all of an agent's devices). */
static void print_stats(void)
{
    const char *v = getenv("RIG_STATS");
    if (!v || strcmp(v, "1") != 0)
        return;
    char line[256];
    int n = snprintf(line, sizeof line, "rig: %-20s %10s %11s %14s %14s %10s\n", "device", "calls", "round trips",
                     "bytes out", "bytes in", "wait ms");
    if (write(2, line, (size_t)n) < 0)
        return;
    for (int d = 0; d < device_count; d++) {
        if (!devices[d].proxy)
            continue;
        agent_link *l = devices[d].link;
        pthread_mutex_lock(&l->lock);
        n = snprintf(line, sizeof line, "rig: %-20s %10llu %11llu %14llu %14llu %10.1f\n", devices[d].label,
                     (unsigned long long)l->calls, (unsigned long long)l->round_trips,
                     (unsigned long long)l->c.bytes_sent, (unsigned long long)l->c.bytes_received,
                     (double)l->wait_ns / 1e6);
        pthread_mutex_unlock(&l->lock);
        if (write(2, line, (size_t)n) < 0)
            return;
        /* Copies' bytes that went compressed, when any did. */
        unsigned long long out = __atomic_load_n(&l->compressed_out_bytes, __ATOMIC_RELAXED),
                           out_stored = __atomic_load_n(&l->compressed_out_stored, __ATOMIC_RELAXED),
                           in = __atomic_load_n(&l->compressed_in_bytes, __ATOMIC_RELAXED),
                           in_stored = __atomic_load_n(&l->compressed_in_stored, __ATOMIC_RELAXED);
        if (!out && !in)
            continue;
        n = snprintf(line, sizeof line, "rig: %-20s compressed out %llu bytes as %llu, in %llu bytes as %llu\n",
                     devices[d].label, out, out_stored, in, in_stored);
        if (write(2, line, (size_t)n) < 0)
            return;
    }
}

/* The same figures for `rig run --stats`, on the report descriptor. */
static void report_link_stats(void)
{
    for (int d = 0; d < device_count; d++) {
        if (!devices[d].proxy)
            continue;
        agent_link *l = devices[d].link;
        pthread_mutex_lock(&l->lock);
        unsigned long long calls = l->calls, rt = l->round_trips, out = l->c.bytes_sent, in = l->c.bytes_received;
        double wait_ms = (double)l->wait_ns / 1e6;
        pthread_mutex_unlock(&l->lock);
        report_stats(devices[d].label, calls, rt, out, in, wait_ms);
    }
}

static void close_links(void)
{
    print_stats();
    report_link_stats();
    for (size_t i = 0; i < link_count; i++)
        link_close(&links[i]);
    report_closed();
}

CUresult shim_init(unsigned flags)
{
    pthread_mutex_lock(&init_lock);
    if (init_done) {
        pthread_mutex_unlock(&init_lock);
        return init_result;
    }
    rig_why why = { "" };
    CUresult rc = CUDA_SUCCESS;
    char rwhy[200];
    if (report_open_from_env(rwhy, sizeof rwhy) < 0)
        shim_log(SHIM_LOG_ERROR, "%s", rwhy);
    const shim_driver *drv = shim_local_driver();
    if (drv) {
        CUresult lrc = drv->fn_cuInit(flags);
        int n = 0;
        if (lrc == CUDA_SUCCESS && drv->fn_cuDeviceGetCount(&n) == CUDA_SUCCESS) {
            for (int i = 0; i < n && i < SHIM_DEVICES_MAX; i++) {
                devices[i].local_ordinal = i;
                snprintf(devices[i].label, sizeof devices[i].label, "CUDA:%d", i);
            }
            local_count = device_count = n < SHIM_DEVICES_MAX ? n : SHIM_DEVICES_MAX;
        } else if (lrc != CUDA_ERROR_NO_DEVICE) {
            shim_log(SHIM_LOG_WARN, "local driver %s: cuInit failed (%d); no local devices", drv->path, lrc);
        }
    }
    rc = init_remote(&why);
    forget_remote_env();
    if (rc == CUDA_SUCCESS)
        declare_ptx_only();
    if (rc != CUDA_SUCCESS) {
        shim_log(SHIM_LOG_ERROR, "%s", why.text);
        report_failed(why.text);
    } else if (device_count == 0) {
        rc = CUDA_ERROR_NO_DEVICE;
    } else if (link_count) {
        report_started();
        atexit(close_links);
    }
    init_result = rc;
    __atomic_store_n(&init_done, true, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&init_lock);
    return rc;
}

/* ---- allocations on proxies ---- */

typedef struct allocation {
    uint64_t base, size;
    int device;
} allocation;

static allocation *allocs;
static size_t alloc_count, alloc_cap;
static size_t alloc_reserved;   /* room promised by shim_alloc_reserve, not yet used */
static pthread_rwlock_t alloc_lock = PTHREAD_RWLOCK_INITIALIZER;

/* Room for need entries; the caller holds alloc_lock for writing. */
static bool grow_locked(size_t need)
{
    if (need <= alloc_cap)
        return true;
    size_t cap = alloc_cap ? alloc_cap * 2 : 256;
    while (cap < need)
        cap *= 2;
    allocation *grown = realloc(allocs, cap * sizeof *grown);
    if (!grown)
        return false;
    allocs = grown;
    alloc_cap = cap;
    return true;
}

/* Index of the first allocation whose base is above p. */
static size_t upper_bound(uint64_t p)
{
    size_t lo = 0, hi = alloc_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (allocs[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

CUresult shim_alloc_reserve(void)
{
    pthread_rwlock_wrlock(&alloc_lock);
    bool ok = grow_locked(alloc_count + alloc_reserved + 1);
    if (ok)
        alloc_reserved++;
    size_t count = alloc_count;
    pthread_rwlock_unlock(&alloc_lock);
    if (!ok)
        shim_log(SHIM_LOG_ERROR, "no memory to record allocation %zu on proxy devices", count + 1);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

void shim_alloc_unreserve(void)
{
    pthread_rwlock_wrlock(&alloc_lock);
    if (alloc_reserved)
        alloc_reserved--;
    pthread_rwlock_unlock(&alloc_lock);
}

static void insert_locked(uint64_t base, uint64_t size, int device)
{
    size_t at = upper_bound(base);
    memmove(&allocs[at + 1], &allocs[at], (alloc_count - at) * sizeof *allocs);
    allocs[at] = (allocation){ base, size, device };
    alloc_count++;
}

void shim_alloc_add_reserved(uint64_t base, uint64_t size, int device)
{
    pthread_rwlock_wrlock(&alloc_lock);
    if (alloc_reserved)
        alloc_reserved--;
    if (grow_locked(alloc_count + alloc_reserved + 1))   /* always: the reservation made room */
        insert_locked(base, size, device);
    pthread_rwlock_unlock(&alloc_lock);
}

bool shim_alloc_add(uint64_t base, uint64_t size, int device)
{
    pthread_rwlock_wrlock(&alloc_lock);
    bool ok = grow_locked(alloc_count + alloc_reserved + 1);
    if (ok)
        insert_locked(base, size, device);
    pthread_rwlock_unlock(&alloc_lock);
    if (!ok)
        shim_log(SHIM_LOG_ERROR, "no memory to record the allocation at %#llx on a proxy device",
                 (unsigned long long)base);
    return ok;
}

bool shim_alloc_remove(uint64_t base, uint64_t *size, int *device)
{
    pthread_rwlock_wrlock(&alloc_lock);
    size_t at = upper_bound(base);
    bool found = at > 0 && allocs[at - 1].base == base;
    if (found) {
        *size = allocs[at - 1].size;
        *device = allocs[at - 1].device;
        memmove(&allocs[at - 1], &allocs[at], (alloc_count - at) * sizeof *allocs);
        alloc_count--;
    }
    pthread_rwlock_unlock(&alloc_lock);
    return found;
}

bool shim_alloc_find(uint64_t p, uint64_t *base, uint64_t *size, int *device)
{
    pthread_rwlock_rdlock(&alloc_lock);
    size_t at = upper_bound(p);
    bool found = at > 0 && p < allocs[at - 1].base + allocs[at - 1].size;
    if (found) {
        *base = allocs[at - 1].base;
        *size = allocs[at - 1].size;
        *device = allocs[at - 1].device;
    }
    pthread_rwlock_unlock(&alloc_lock);
    return found;
}

int shim_device_of_pointer(uint64_t p)
{
    for (size_t i = 0; i < link_count; i++)
        if (p >= links[i].window_base && p - links[i].window_base < links[i].window_size) {
            uint64_t base, size;
            int device;
            if (shim_alloc_find(p, &base, &size, &device))
                return device;
            return links[i].first_device;
        }
    /* Module globals live where the agent's driver put them, outside the
     * windows; the allocation table knows them. */
    uint64_t base, size;
    int device;
    if (__atomic_load_n(&alloc_count, __ATOMIC_RELAXED) && shim_alloc_find(p, &base, &size, &device))
        return device;
    return -1;
}
