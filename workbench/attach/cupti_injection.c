/* CUDA injection (CUDA_INJECTION64_PATH): the driver calls InitializeInjection when the
   program initialises CUDA; from then on CUPTI's activity records of kernels, copies (with
   their memory kinds), memsets, synchronisations and runtime calls go to the ring (ring.h).

   CUPTI hands full buffers back on its own threads, flushed every FLUSH_MS so a live view
   follows the program; the rest is flushed at exit. Device timestamps are CUPTI's clock: a
   WB_CLOCK event pairs one with CLOCK_MONOTONIC at every buffer, and the recorder shifts.
   The record layouts are those of this toolkit's headers (build.py names the newest version
   of each struct it finds there as WB_KERNEL_T, WB_MEMCPY_T, WB_MEMSET_T, WB_SYNC_T).

   What is recorded, and how often it is handed over, are the environment's (each costs the
   program's threads time, benchmarks/record_gpu.py measures them one by one):
   - WORKBENCH_RECORD_CUDA_KINDS: the activity kinds, a comma list of kernel, memcpy, memset,
     sync and runtime (the launching, copying, waiting and allocating runtime calls), or
     `all`, or `none` (CUPTI attached, nothing enabled); by default all of them; `overhead`
     (not in `all`) adds CUPTI's records of its own overhead, which the recorder sums;
   - WORKBENCH_RECORD_CUDA_CALLS=all: every runtime call, not only those (with `runtime`);
   - WORKBENCH_RECORD_FLUSH_MS: CUPTI's flush period (default 100; 0: CUPTI's own heuristics);
   - WORKBENCH_RECORD_BUFFER_KB: the size of each activity buffer (default 4096);
   - WORKBENCH_RECORD_CUDA_TIDS=pthread: CUPTI's own thread ids, not the system's (below);
   - WORKBENCH_RECORD_KERNEL_KIND=serial: kernels recorded by the kind that serialises them;
   - WORKBENCH_RECORD_CUDA_MODE: how kernels are recorded: `activity` (the default: a CUPTI
     activity record of each), `launches` (each launch timed on the host through CUPTI's
     callbacks, no kernel record) or `sampled` (those, and kernel records in a window of every
     period, WORKBENCH_RECORD_SAMPLE_MS; WORKBENCH_RECORD_LAUNCH_DOMAINS=runtime or driver:
     one domain's launch callbacks alone): launches.h;
   - CUPTI's attributes (set_attributes, below). */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

#define WB_EXPORT __attribute__((visibility("default")))
#define BUFFER_KB 4096u
#define FLUSH_MS 100u
#define NAMES 8192u
#define CALLS 8192u
#define CONTEXTS 256u

struct name_entry { uint64_t hash, id; };
static struct name_entry names[NAMES];
static uint64_t call_ids[2][CALLS];
static int32_t context_device[CONTEXTS];
static atomic_flag names_lock = ATOMIC_FLAG_INIT;
static size_t buffer_bytes = (size_t)BUFFER_KB << 10;

/* A kernel's name is one string for all of its records (CUPTI's documented contract), so its
   id is found by the pointer first: no hashing of a long mangled name per launch. */
#define BY_POINTER 4096u
struct pointer_entry { const char *name; uint64_t id; };
static struct pointer_entry by_pointer[BY_POINTER];

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h | 1;
}

/* The id of a name, found or made in the table; the names' lock is held. A new name is sent
   as a text record the first time it is seen (a full probe sequence sends it each time). */
static uint64_t name_id_locked(const char *s, size_t n, uint64_t h) {
    unsigned i = (unsigned)h & (NAMES - 1);
    for (unsigned probe = 0; probe < 64; probe++, i = (i + 1) & (NAMES - 1)) {
        if (names[i].hash == h) return names[i].id;
        if (names[i].hash == 0) {
            names[i].hash = h;
            names[i].id = wb_new_id();
            wb_emit_text(WB_T_STRING, 0, names[i].id, 0, s, n);
            return names[i].id;
        }
    }
    uint64_t id = wb_new_id();
    wb_emit_text(WB_T_STRING, 0, id, 0, s, n);
    return id;
}

static inline void lock_names(void) {
    while (atomic_flag_test_and_set_explicit(&names_lock, memory_order_acquire)) {}
}

static inline void unlock_names(void) { atomic_flag_clear_explicit(&names_lock, memory_order_release); }

/* The id of a kernel's or call's name. */
static uint64_t name_id(const char *s) {
    if (!s) s = "?";
    size_t n = strlen(s);
    uint64_t h = fnv1a(s, n);
    lock_names();
    uint64_t id = name_id_locked(s, n, h);
    unlock_names();
    return id;
}

/* Buffers are delivered on CUPTI's thread and, at exit, on the flushing one: the table is
   read and written under the names' lock (a look-up there costs less than hashing the name),
   taken once whether the pointer is known or not. */
static uint64_t kernel_id(const char *name) {
    if (!name) return name_id(name);
    unsigned i = (unsigned)((((uintptr_t)name >> 3) * 0x9E3779B97F4A7C15ULL) >> 52) & (BY_POINTER - 1);
    lock_names();
    uint64_t id = by_pointer[i].name == name ? by_pointer[i].id : 0;
    if (!id) {
        size_t n = strlen(name);
        id = name_id_locked(name, n, fnv1a(name, n));
        by_pointer[i] = (struct pointer_entry){name, id};
    }
    unlock_names();
    return id;
}

static uint64_t call_id(int driver, uint32_t cbid) {
    if (cbid < CALLS && call_ids[driver][cbid]) return call_ids[driver][cbid];
    const char *name = NULL;
    cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name);
    uint64_t id = name_id(name ? name : "cuda call");
    if (cbid < CALLS) call_ids[driver][cbid] = id;
    return id;
}

static void clock_pair(void) {
    uint64_t device = 0, before = wb_now();
    cuptiGetTimestamp(&device);
    uint64_t after = wb_now();
    wb_emit(WB_CLOCK, 0, 0, 0, 0, device, before + (after - before) / 2);
}

static uint64_t where(uint32_t device, uint32_t stream) { return ((uint64_t)device << 32) | stream; }

static void learn_context(uint32_t context, uint32_t device) {
    if (context < CONTEXTS) context_device[context] = (int32_t)device + 1;
}

static void take(CUpti_Activity *record) {
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        WB_KERNEL_T *k = (WB_KERNEL_T *)record;
        learn_context(k->contextId, k->deviceId);
        wb_emit(WB_KERNEL, 0, k->correlationId, kernel_id(k->name), where(k->deviceId, k->streamId), k->start,
                k->end);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        WB_MEMCPY_T *m = (WB_MEMCPY_T *)record;
        learn_context(m->contextId, m->deviceId);
        uint16_t kinds = (uint16_t)((m->copyKind & 31) | ((m->srcKind & 31) << 5) | ((m->dstKind & 31) << 10));
        wb_emit(WB_MEMCPY, kinds, m->correlationId, m->bytes, where(m->deviceId, m->streamId), m->start, m->end);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        WB_MEMSET_T *m = (WB_MEMSET_T *)record;
        wb_emit(WB_MEMSET, (uint16_t)m->memoryKind, m->correlationId, m->bytes, where(m->deviceId, m->streamId),
                m->start, m->end);
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        WB_SYNC_T *s = (WB_SYNC_T *)record;
        int32_t known = s->contextId < CONTEXTS ? context_device[s->contextId] : 0;
        uint32_t device = known > 0 ? (uint32_t)(known - 1) : 0;
        uint32_t stream = s->streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? 0 : s->streamId;
        wb_emit(WB_SYNC, 0, s->correlationId, (uint64_t)s->type, where(device, stream), s->start, s->end);
        break;
    }
#ifdef WB_OVERHEAD_T
    case CUPTI_ACTIVITY_KIND_OVERHEAD: { /* CUPTI's own time: its kind in obj, summed by the recorder */
        WB_OVERHEAD_T *o = (WB_OVERHEAD_T *)record;
        wb_emit(WB_OVERHEAD, 0, 0, (uint64_t)o->overheadKind, (uint64_t)o->objectKind, o->start, o->end);
#if WB_OVERHEAD_T_V >= 3
        free(o->overheadData); /* the client's to free (cupti_activity.h) */
#endif
        break;
    }
#endif
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)record;
        wb_emit(WB_API, 0, a->threadId, call_id(record->kind == CUPTI_ACTIVITY_KIND_DRIVER, a->cbid),
                a->correlationId, a->start, a->end);
        break;
    }
    default:
        break;
    }
}

/* Buffers handed to CUPTI zeroed already (WORKBENCH_RECORD_BUFFER_POOL=N, up to N kept):
   otherwise CUPTI zeroes each new buffer itself, on the thread that asked for it, the
   program's. A delivered buffer is zeroed where CUPTI wrote it (records are written from its
   start: `valid` bytes), on CUPTI's thread, and kept for the next request, its pages mapped. */
#define POOL_MAX 64u
static uint8_t *pool[POOL_MAX];
static unsigned pool_size, pool_count;
static atomic_flag pool_lock = ATOMIC_FLAG_INIT;

static uint8_t *pool_take(void) {
    while (atomic_flag_test_and_set_explicit(&pool_lock, memory_order_acquire)) {}
    uint8_t *b = pool_count ? pool[--pool_count] : NULL;
    atomic_flag_clear_explicit(&pool_lock, memory_order_release);
    return b ? b : calloc(1, buffer_bytes);
}

static void pool_give(uint8_t *buffer, size_t valid) {
    memset(buffer, 0, valid < buffer_bytes ? valid : buffer_bytes);
    while (atomic_flag_test_and_set_explicit(&pool_lock, memory_order_acquire)) {}
    int kept = pool_count < pool_size;
    if (kept) pool[pool_count++] = buffer;
    atomic_flag_clear_explicit(&pool_lock, memory_order_release);
    if (!kept) free(buffer);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = pool_size ? pool_take() : aligned_alloc(8, buffer_bytes);
    *size = *buffer ? buffer_bytes : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    (void)size;
    clock_pair();
    CUpti_Activity *record = NULL;
    while (valid && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) take(record);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS && dropped && wb_ring)
        atomic_fetch_add(&wb_ring->dropped, dropped);
    if (pool_size) pool_give(buffer, valid);
    else free(buffer);
}

static void note(const char *what, CUptiResult result) {
    const char *said = NULL;
    cuptiGetResultString(result, &said);
    char text[WB_TEXT_MAX];
    int n = snprintf(text, sizeof text, "%s: %s", what, said ? said : "CUPTI error");
    wb_emit_text(WB_T_NOTE, 0, 0, 0, text, n > 0 ? (size_t)n : 0);
}

#include "launches.h"

/* Runtime calls recorded: those that launch, copy, set, wait or allocate (each record costs
   the calling thread time: a program makes many calls that answer at once, cudaGetDevice...). */
static const char *const CALL_PREFIXES[] = {"cudaLaunch", "cudaMemcpy", "cudaMemset", "cudaStreamSynchronize",
                                            "cudaEventSynchronize", "cudaDeviceSynchronize", "cudaStreamWaitEvent",
                                            "cudaGraphLaunch", "cudaMalloc", "cudaFree", "cudaHostAlloc",
                                            "cudaHostRegister"};

/* Whether a runtime call is recorded as an activity record: one the prefixes name, and not a
   launch where launches are timed by callback (launches.h) instead. */
static int call_chosen(const char *name) {
    if (cuda_mode != MODE_ACTIVITY && is_launch_call(name)) return 0;
    for (unsigned k = 0; k < sizeof CALL_PREFIXES / sizeof CALL_PREFIXES[0]; k++)
        if (strncmp(name, CALL_PREFIXES[k], strlen(CALL_PREFIXES[k])) == 0) return 1;
    return 0;
}

static void enable_calls(void) {
    CUptiResult (*select)(CUpti_CallbackId, uint8_t) =
        (CUptiResult (*)(CUpti_CallbackId, uint8_t))dlsym(RTLD_DEFAULT, "cuptiActivityEnableRuntimeApi");
    const char *all = getenv("WORKBENCH_RECORD_CUDA_CALLS");
    if (!select || (all && strcmp(all, "all") == 0)) {
        CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
        if (r != CUPTI_SUCCESS) note("cuptiActivityEnable(runtime)", r);
        return;
    }
    for (CUpti_CallbackId cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; cbid++) {
        const char *name = NULL;
        if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) != CUPTI_SUCCESS || !name) continue;
        if (call_chosen(name)) select(cbid, 1);
    }
}

/* The activity kinds asked for (WORKBENCH_RECORD_CUDA_KINDS); a word not known is noted. */
enum { KIND_KERNEL = 1, KIND_MEMCPY = 2, KIND_MEMSET = 4, KIND_SYNC = 8, KIND_RUNTIME = 16, KINDS_ALL = 31,
       KIND_OVERHEAD = 32 };

static unsigned chosen_kinds(void) {
    const char *asked = getenv("WORKBENCH_RECORD_CUDA_KINDS");
    if (!asked || !*asked) return KINDS_ALL;
    static const struct { const char *word; unsigned bits; } words[] = {
        {"kernel", KIND_KERNEL}, {"memcpy", KIND_MEMCPY}, {"memset", KIND_MEMSET}, {"sync", KIND_SYNC},
        {"runtime", KIND_RUNTIME}, {"overhead", KIND_OVERHEAD}, {"all", KINDS_ALL}, {"none", 0}};
    unsigned chosen = 0;
    for (const char *at = asked; *at;) {
        size_t n = strcspn(at, ",");
        unsigned w = 0;
        while (w < sizeof words / sizeof words[0] && (strlen(words[w].word) != n || strncmp(at, words[w].word, n)))
            w++;
        if (w < sizeof words / sizeof words[0]) {
            chosen |= words[w].bits;
        } else if (n) {
            char text[WB_TEXT_MAX];
            int len = snprintf(text, sizeof text, "WORKBENCH_RECORD_CUDA_KINDS: %.*s is not one of kernel, memcpy, "
                               "memset, sync, runtime, overhead, all, none: left out", (int)n, at);
            wb_emit_text(WB_T_NOTE, 0, 0, 0, text, len > 0 ? (size_t)len : 0);
        }
        at += n + (at[n] == ',');
    }
    return chosen;
}

/* A whole number from the environment within [low, high], else `fallback`. */
static unsigned long number(const char *name, unsigned long fallback, unsigned long low, unsigned long high) {
    const char *text = getenv(name);
    char *end = NULL;
    unsigned long value = text && *text ? strtoul(text, &end, 10) : fallback;
    return end && (*end || value < low || value > high) ? fallback : value;
}

/* CUPTI's own settings (CUpti_ActivityAttribute in cupti_activity.h), each left at CUPTI's
   default unless the environment names it (benchmarks/record_gpu.py times them):
   - WORKBENCH_RECORD_BUFFER_POOL=N: zeroed buffers from a pool (above);
   - WORKBENCH_RECORD_DEVICE_BUFFER_KB: the memory a buffer of kernel, copy and memset
     timestamps takes (CUPTI's default about 3 MB, 100,000 records), and
     WORKBENCH_RECORD_DEVICE_BUFFERS how many CUPTI makes at the start (default 3);
   - WORKBENCH_RECORD_HOST_PINNED=1: those timestamps in pinned host memory, not the device's;
   - WORKBENCH_RECORD_PER_THREAD_BUFFERS=0: one activity buffer for all threads, not one a
     thread (the toolkit's headers must know the attribute).
   Set before the callbacks are registered and before CUDA makes a context, as CUPTI asks. */
static void set_attribute(const char *what, CUpti_ActivityAttribute attribute, void *value, size_t size) {
    CUptiResult r = cuptiActivitySetAttribute(attribute, &size, value);
    if (r != CUPTI_SUCCESS) note(what, r);
}

static void set_attributes(void) {
    pool_size = (unsigned)number("WORKBENCH_RECORD_BUFFER_POOL", 0, 0, POOL_MAX);
    if (pool_size) {
        uint8_t zeroed = 1;
        set_attribute("cuptiActivitySetAttribute(zeroed buffers)", CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
                      &zeroed, sizeof zeroed);
    }
    size_t device_kb = number("WORKBENCH_RECORD_DEVICE_BUFFER_KB", 0, 64, 1u << 22);
    if (device_kb) {
        size_t bytes = device_kb << 10;
        set_attribute("cuptiActivitySetAttribute(device buffer size)", CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE,
                      &bytes, sizeof bytes);
    }
    size_t made = number("WORKBENCH_RECORD_DEVICE_BUFFERS", 0, 1, 200);
    if (made)
        set_attribute("cuptiActivitySetAttribute(device buffers made at the start)",
                      CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, &made, sizeof made);
    if (number("WORKBENCH_RECORD_HOST_PINNED", 0, 0, 1)) {
        uint8_t pinned = 1;
        set_attribute("cuptiActivitySetAttribute(pinned host buffers)",
                      CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, &pinned, sizeof pinned);
    }
    if (!number("WORKBENCH_RECORD_PER_THREAD_BUFFERS", 1, 0, 1)) {
#ifdef WB_PER_THREAD_ATTR
        uint8_t per_thread = 0;
        set_attribute("cuptiActivitySetAttribute(per-thread buffers)", CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER,
                      &per_thread, sizeof per_thread);
#else
        note("WORKBENCH_RECORD_PER_THREAD_BUFFERS=0 left out: these CUPTI headers have no such attribute",
             CUPTI_ERROR_NOT_SUPPORTED);
#endif
    }
}

/* WORKBENCH_RECORD_CUDA_MODE (launches.h); a word not known is noted and the default taken. */
static int chosen_mode(void) {
    const char *asked = getenv("WORKBENCH_RECORD_CUDA_MODE");
    if (!asked || !*asked || strcmp(asked, "activity") == 0) return MODE_ACTIVITY;
    if (strcmp(asked, "launches") == 0) return MODE_LAUNCHES;
    if (strcmp(asked, "sampled") == 0) return MODE_SAMPLED;
    char text[WB_TEXT_MAX];
    int n = snprintf(text, sizeof text, "WORKBENCH_RECORD_CUDA_MODE: %.64s is not one of activity, launches, "
                     "sampled: activity taken", asked);
    wb_emit_text(WB_T_NOTE, 0, 0, 0, text, n > 0 ? (size_t)n : 0);
    return MODE_ACTIVITY;
}

static void flush_at_exit(void) {
    if (cuda_mode == MODE_SAMPLED) stop_sampling();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

WB_EXPORT int InitializeInjection(void) {
    void *(*mapped)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "workbench_record_ring");
    if (!wb_attach(mapped ? (struct wb_header *)mapped() : NULL, 0) && !wb_map(0))
        return 1; /* not being recorded: nothing to do */
    buffer_bytes = (size_t)number("WORKBENCH_RECORD_BUFFER_KB", BUFFER_KB, 16, 1u << 20) << 10;
    set_attributes();
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
        note("CUDA activity not recorded: cuptiActivityRegisterCallbacks", r);
        return 1;
    }
    /* System thread ids, as the lock shim's; WORKBENCH_RECORD_CUDA_TIDS=pthread leaves CUPTI's
       own (pthread_self, which the recorder cannot put on a thread's track: for measuring). */
    const char *tids = getenv("WORKBENCH_RECORD_CUDA_TIDS");
    if (!tids || strcmp(tids, "pthread") != 0) cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    unsigned chosen = chosen_kinds();
    cuda_mode = chosen_mode();
    int launches = 0;
    if (cuda_mode != MODE_ACTIVITY && (chosen & KIND_KERNEL)) {
        /* Kernels by their launches (launches.h), not a record each; where CUPTI refuses the
           callbacks, the notes say so and kernels are not recorded. */
        chosen &= ~(unsigned)KIND_KERNEL;
        launches = enable_launch_callbacks();
    } else {
        cuda_mode = MODE_ACTIVITY; /* kernels not asked for: nothing to count */
    }
    /* WORKBENCH_RECORD_KERNEL_KIND=serial: CUPTI's kernel kind that runs every kernel alone on
       the GPU (a different instrumentation, for timing it against the concurrent one only). */
    const char *serial = getenv("WORKBENCH_RECORD_KERNEL_KIND");
    CUpti_ActivityKind kernels = serial && strcmp(serial, "serial") == 0 ? CUPTI_ACTIVITY_KIND_KERNEL
                                                                          : CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    const struct { unsigned bit; CUpti_ActivityKind kind; } kinds[] = {
        {KIND_KERNEL, kernels}, {KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY},
        {KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMSET}, {KIND_SYNC, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
#ifdef WB_OVERHEAD_T
        {KIND_OVERHEAD, CUPTI_ACTIVITY_KIND_OVERHEAD},
#endif
    };
    for (unsigned i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (chosen & kinds[i].bit && (r = cuptiActivityEnable(kinds[i].kind)) != CUPTI_SUCCESS)
            note("cuptiActivityEnable", r);
    if (chosen & KIND_RUNTIME) enable_calls();
    /* The driver's and the profiling library's own locks are not the program's. */
    void (*ignore)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "workbench_record_ignore_library");
    if (ignore) {
        ignore("libcuda.so");
        ignore("libcupti.so");
    }
    clock_pair();
    if (launches && cuda_mode == MODE_SAMPLED) start_sampling(kernels);
    cuptiActivityFlushPeriod((uint32_t)number("WORKBENCH_RECORD_FLUSH_MS", FLUSH_MS, 0, 60000));
    atexit(flush_at_exit);
    atomic_fetch_or(&wb_ring->features, WB_FEATURE_CUPTI);
    return 1;
}
