/* A stand-in for CUPTI and the CUDA driver, for the CUDA shim without a GPU
   (tests/test_record_cupti_launches.py). It includes the shim (SHIM, cupti_injection.c) and
   defines every CUPTI function the shim calls, then plays a program: THREADS threads each make
   LAUNCHES kernel launches of NAMES kernels through the callbacks the shim enabled, every other
   one with the driver's launch inside the runtime's (as the runtime makes it), SPIN_US of busy
   host work between launches. A kernel launched while the shim has kernel records enabled gets
   a record, handed to the shim at its flush.

       fake_cupti THREADS LAUNCHES NAMES SPIN_US

   Prints the launch phase's wall and CPU ns (W wall cpu), what it did (L tid correlation
   sampled kernel) and what the shim sent (E, T), the callbacks the shim enabled (C domain
   cbid) and how often kernel records were switched on (K n); with FAKE_QUIET, the times alone;
   run by a recorder (WORKBENCH_RECORD_RING), the shim writes the recorder's ring and the
   program prints its launches alone. FAKE_FAIL=subscribe,enable_callback,kernel_enable,kernel_disable makes those calls
   fail. */
#define _GNU_SOURCE
#include SHIM
#include <pthread.h>
#include <stdio.h>

#define RING_EVENTS (1u << 17)
#define RING_TEXTS (1u << 13)
#define MAX_LAUNCHES 200000

/* Its own ring in memory, printed at the end; under a recorder (WORKBENCH_RECORD_RING set) none:
   the shim maps the recorder's, which drains it while the program runs. */
static struct wb_header *ring;
__attribute__((visibility("default"))) void *workbench_record_ring(void) { return ring; }

static int fails(const char *what) {
    const char *list = getenv("FAKE_FAIL");
    return list && strstr(list, what) != NULL;
}

/* -- the callback API --------------------------------------------------------------------- */
static CUpti_CallbackFunc subscriber;
static void *subscriber_data;
static uint8_t enabled_cb[2][1024]; /* [driver][cbid] */

static const struct { CUpti_CallbackDomain domain; uint32_t cbid; const char *name; } FAKE_CALLS[] = {
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel_v7000"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000, "cudaLaunchHostFunc_v10000"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch_v10000"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, "cudaMemcpy_v3020"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc, "cuLaunchHostFunc"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2"},
};

CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name) {
    for (unsigned i = 0; i < sizeof FAKE_CALLS / sizeof FAKE_CALLS[0]; i++)
        if (FAKE_CALLS[i].domain == domain && FAKE_CALLS[i].cbid == cbid) return *name = FAKE_CALLS[i].name, CUPTI_SUCCESS;
    return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *handle, CUpti_CallbackFunc callback, void *userdata) {
    if (fails("subscribe")) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    subscriber = callback;
    subscriber_data = userdata;
    *handle = (CUpti_SubscriberHandle)&subscriber;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle handle, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid) {
    if (fails("enable_callback")) return CUPTI_ERROR_INVALID_PARAMETER;
    if (handle != (CUpti_SubscriberHandle)&subscriber || cbid >= 1024) return CUPTI_ERROR_INVALID_PARAMETER;
    enabled_cb[domain == CUPTI_CB_DOMAIN_DRIVER_API][cbid] = (uint8_t)enable;
    return CUPTI_SUCCESS;
}

/* -- the activity API ----------------------------------------------------------------------- */
static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static _Atomic int kernels_on, kernel_enables;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static WB_KERNEL_T *queue;
static size_t queued;
static const uint64_t DEVICE_EPOCH = 1ull << 60;

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r, CUpti_BuffersCallbackCompleteFunc c) {
    requested = r;
    completed = c;
    return CUPTI_SUCCESS;
}

static int is_kernel_kind(CUpti_ActivityKind kind) {
    return kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_KERNEL;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
    if (is_kernel_kind(kind)) {
        if (fails("kernel_enable")) return CUPTI_ERROR_NOT_COMPATIBLE;
        atomic_store(&kernels_on, 1);
        atomic_fetch_add(&kernel_enables, 1);
    }
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
    if (is_kernel_kind(kind)) {
        if (fails("kernel_disable")) return CUPTI_ERROR_NOT_INITIALIZED;
        atomic_store(&kernels_on, 0);
    }
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    (void)flag;
    pthread_mutex_lock(&queue_lock);
    size_t n = queued;
    queued = 0;
    for (size_t at = 0; at < n;) {
        uint8_t *buffer = NULL;
        size_t size = 0, max = 0;
        requested(&buffer, &size, &max);
        if (!buffer) break;
        size_t fit = size / sizeof(WB_KERNEL_T), take = n - at < fit ? n - at : fit;
        memcpy(buffer, &queue[at], take * sizeof(WB_KERNEL_T));
        at += take;
        completed(NULL, 0, buffer, size, take * sizeof(WB_KERNEL_T));
    }
    pthread_mutex_unlock(&queue_lock);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record) {
    uint8_t *next = *record ? (uint8_t *)*record + sizeof(WB_KERNEL_T) : buffer;
    if (next + sizeof(WB_KERNEL_T) > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)next;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t stream, size_t *dropped) {
    (void)context, (void)stream;
    *dropped = 0;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetTimestamp(uint64_t *timestamp) { return *timestamp = DEVICE_EPOCH + wb_now(), CUPTI_SUCCESS; }
CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *size, void *value) {
    (void)a, (void)size, (void)value;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityFlushPeriod(uint32_t ms) { return (void)ms, CUPTI_SUCCESS; }
CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) { return (void)type, CUPTI_SUCCESS; }
CUptiResult cuptiGetResultString(CUptiResult result, const char **text) {
    (void)result;
    *text = "fake CUPTI error";
    return CUPTI_SUCCESS;
}

/* -- the program ---------------------------------------------------------------------------- */
static int launches_each, names_count;
static double spin_us;
static _Atomic uint32_t next_correlation = 1;
struct launch { uint32_t tid, correlation; int sampled; const char *kernel; };
static struct launch *launched;
static _Atomic size_t launched_count;
static char kernel_names[64][64];

static void callback(CUpti_CallbackDomain domain, uint32_t cbid, CUpti_ApiCallbackSite site, CUpti_CallbackData *d) {
    if (!subscriber || !enabled_cb[domain == CUPTI_CB_DOMAIN_DRIVER_API][cbid]) return;
    d->callbackSite = site;
    subscriber(subscriber_data, domain, cbid, d);
}

static void launch(const char *kernel, int with_driver) {
    uint64_t runtime_slot = 0, driver_slot = 0;
    CUpti_CallbackData rt = {0}, drv = {0};
    rt.functionName = "cudaLaunchKernel_v7000";
    rt.symbolName = kernel;
    rt.correlationData = &runtime_slot;
    rt.correlationId = atomic_fetch_add(&next_correlation, 1);
    uint32_t runtime = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, driver = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
    callback(CUPTI_CB_DOMAIN_RUNTIME_API, runtime, CUPTI_API_ENTER, &rt);
    if (with_driver) {
        drv.functionName = "cuLaunchKernel";
        drv.symbolName = kernel;
        drv.correlationData = &driver_slot;
        drv.correlationId = atomic_fetch_add(&next_correlation, 1);
        callback(CUPTI_CB_DOMAIN_DRIVER_API, driver, CUPTI_API_ENTER, &drv);
    }
    int sampled = atomic_load(&kernels_on);
    if (sampled) {
        pthread_mutex_lock(&queue_lock);
        WB_KERNEL_T *k = &queue[queued++];
        memset(k, 0, sizeof *k);
        k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k->correlationId = rt.correlationId;
        k->name = kernel;
        k->streamId = 7;
        k->start = DEVICE_EPOCH + wb_now() + 1000;
        k->end = k->start + 2000;
        pthread_mutex_unlock(&queue_lock);
    }
    if (with_driver) callback(CUPTI_CB_DOMAIN_DRIVER_API, driver, CUPTI_API_EXIT, &drv);
    callback(CUPTI_CB_DOMAIN_RUNTIME_API, runtime, CUPTI_API_EXIT, &rt);
    size_t at = atomic_fetch_add(&launched_count, 1);
    launched[at] = (struct launch){wb_gettid(), rt.correlationId, sampled, kernel};
}

static void *program_thread(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (int i = 0; i < launches_each; i++) {
        uint64_t until = wb_now() + (uint64_t)(spin_us * 1000);
        while (wb_now() < until) {}
        launch(kernel_names[(seed + (unsigned)i) % (unsigned)names_count], i % 2);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5) return 2;
    int threads = atoi(argv[1]);
    launches_each = atoi(argv[2]);
    names_count = atoi(argv[3]);
    spin_us = atof(argv[4]);
    if (threads < 1 || threads > 16 || names_count < 1 || names_count > 64 || threads * launches_each > MAX_LAUNCHES)
        return 2;
    for (int i = 0; i < names_count; i++) snprintf(kernel_names[i], sizeof kernel_names[i], "void scale_%d<float>(float*)", i);
    launched = calloc(MAX_LAUNCHES, sizeof *launched);
    queue = calloc(MAX_LAUNCHES, sizeof *queue);
    size_t size = WB_DATA_OFFSET + RING_EVENTS * sizeof(struct wb_event) + RING_TEXTS * sizeof(struct wb_text);
    int recorded = getenv("WORKBENCH_RECORD_RING") != NULL;
    if (!recorded) {
        ring = aligned_alloc(4096, size);
        memset(ring, 0, size);
        ring->magic = WB_MAGIC; ring->version = WB_VERSION; ring->capacity = RING_EVENTS;
        ring->text_capacity = RING_TEXTS; ring->event_bytes = sizeof(struct wb_event);
        ring->text_bytes = sizeof(struct wb_text);
    }
    InitializeInjection();
    pthread_t made[16];
    struct timespec cpu0, cpu1;
    uint64_t wall0 = wb_now();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
    for (int t = 0; t < threads; t++) pthread_create(&made[t], NULL, program_thread, (void *)(uintptr_t)t);
    for (int t = 0; t < threads; t++) pthread_join(made[t], NULL);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
    uint64_t wall1 = wb_now();
    flush_at_exit(); /* as the program's exit does */
    printf("W %llu %llu\n", (unsigned long long)(wall1 - wall0),
           (unsigned long long)((cpu1.tv_sec - cpu0.tv_sec) * 1000000000ll + (cpu1.tv_nsec - cpu0.tv_nsec)));
    if (getenv("FAKE_QUIET")) { /* timing only (benchmarks/launch_callback_cost.py) */
        fflush(stdout);
        _exit(0);
    }
    for (size_t i = 0; i < atomic_load(&launched_count); i++)
        printf("L %u %u %d %s\n", launched[i].tid, launched[i].correlation, launched[i].sampled, launched[i].kernel);
    if (recorded) { /* the recorder has what the shim sent */
        fflush(stdout);
        _exit(0);
    }
    for (uint64_t p = 0; p < atomic_load(&ring->head); p++) {
        struct wb_event *e = &wb_events[p & (RING_EVENTS - 1)];
        printf("E %u %u %u %llu %llu %llu %llu\n", e->kind, e->flags, e->tid, (unsigned long long)e->obj,
               (unsigned long long)e->aux, (unsigned long long)e->t0, (unsigned long long)e->t1);
    }
    for (uint64_t p = 0; p < atomic_load(&ring->text_head); p++) {
        struct wb_text *t = &wb_texts[p & (RING_TEXTS - 1)];
        printf("T %u %llu %.*s\n", t->kind, (unsigned long long)t->id, (int)t->len, t->text);
    }
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 1024; c++)
            if (enabled_cb[d][c]) printf("C %d %d\n", d, c);
    printf("K %d\n", atomic_load(&kernel_enables));
    printf("dropped %llu %llu\n", (unsigned long long)ring->dropped, (unsigned long long)ring->text_dropped);
    fflush(stdout);
    _exit(0); /* the shim's exit handler has run: it is not run again */
}
