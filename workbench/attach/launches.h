/* Kernel launches without a kernel activity record each (cupti_injection.c includes this):
   WORKBENCH_RECORD_CUDA_MODE=launches or sampled.

   CUPTI's kernel record costs a launch-bound program ~1.5 us a launch on the H200
   (benchmarks/RESULTS.md): the driver instruments each launch for its GPU timestamps. Here a
   launch is timed on the host instead, through CUPTI's callback API with only the launch
   calls' callbacks enabled (runtime and driver domains): the call's entry and exit times on
   CLOCK_MONOTONIC, the launching thread, the kernel's name, the correlation id CUPTI gives the
   call (the one a kernel record of it carries). One WB_LAUNCH event a launch: obj the
   kernel's name id, aux the call's name id << 32 | the correlation id, flags 1 for a driver
   call. A launch call made inside another (the driver's inside the runtime's, the runtime's
   inside its own entry of a `<<<...>>>` launch) is the same launch: the outermost is sent.

   `sampled` adds kernel activity records on a duty cycle: a thread of ours enables them for
   the first WINDOW ms of every PERIOD ms (WORKBENCH_RECORD_SAMPLE_MS=WINDOW/PERIOD, default
   1/10) and sends a WB_WINDOW event for each window (t0 enabled from, t1 disabled at, obj its
   number, aux the ns the two CUPTI calls took), so the trace says when kernels were recorded
   and launched kernels elsewhere are counted by their launches alone. */
#ifndef WB_LAUNCHES_H
#define WB_LAUNCHES_H

#include <errno.h>
#include <pthread.h>

enum { MODE_ACTIVITY = 0, MODE_LAUNCHES = 1, MODE_SAMPLED = 2 };

static int cuda_mode;
static CUpti_SubscriberHandle launch_subscriber;
static _Thread_local int launch_depth; /* launch calls this thread is inside */
static _Thread_local uint32_t launching_tid;  /* gettid is a system call: once a thread */

static void forget_tid(void) { launching_tid = 0; } /* a forked child's thread is another */

/* The launch calls, by name: kernels, cooperative kernels and graphs, not host functions. */
static int is_launch_call(const char *name) {
    if (!name) return 0;
    if (strncmp(name, "__", 2) == 0) name += 2;
    const char *at = strncmp(name, "cuda", 4) == 0 ? name + 4 : strncmp(name, "cu", 2) == 0 ? name + 2 : NULL;
    if (!at) return 0;
    if (strncmp(at, "GraphLaunch", 11) == 0) return 1;
    return strncmp(at, "Launch", 6) == 0 && !strstr(at, "HostFunc");
}

/* A kernel name's id; the name a launch callback gives is the driver's while its module is
   loaded, so the pointer finds it, and the text kept beside it confirms it (a module unloaded
   and another loaded where it was must not lend its names). */
#define LAUNCH_NAMES 1024u
struct launch_name { const char *pointer; char *text; uint64_t id; };
static struct launch_name launch_names[LAUNCH_NAMES];

static uint64_t launch_kernel_id(const char *name) {
    unsigned i = (unsigned)((((uintptr_t)name >> 3) * 0x9E3779B97F4A7C15ULL) >> 54) & (LAUNCH_NAMES - 1);
    lock_names();
    struct launch_name *slot = &launch_names[i];
    uint64_t id = 0;
    if (slot->pointer == name && slot->text && strcmp(slot->text, name) == 0) id = slot->id;
    if (!id) {
        size_t n = strlen(name);
        id = name_id_locked(name, n, fnv1a(name, n));
        char *copy = malloc(n + 1);
        if (copy) {
            memcpy(copy, name, n + 1);
            free(slot->text);
            *slot = (struct launch_name){name, copy, id};
        }
    }
    unlock_names();
    return id;
}

static void CUPTIAPI on_launch(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                               const void *data) {
    (void)userdata;
    const CUpti_CallbackData *call = (const CUpti_CallbackData *)data;
    int driver = domain == CUPTI_CB_DOMAIN_DRIVER_API;
    if (call->callbackSite == CUPTI_API_ENTER) {
        if (launch_depth++ == 0) *call->correlationData = wb_now();
        return;
    }
    if (launch_depth > 0 && --launch_depth > 0) return; /* the launch call around it sends it */
    uint64_t end = wb_now(), start = *call->correlationData;
    uint64_t call_name = call_id(driver, cbid) & 0xFFFFFFFFu;
    const char *kernel = call->symbolName;
    if (!kernel) kernel = call->functionName && strstr(call->functionName, "Graph") ? "(graph)" : "?";
    if (!launching_tid) launching_tid = wb_gettid();
    wb_emit(WB_LAUNCH, (uint16_t)driver, launching_tid, launch_kernel_id(kernel),
            (call_name << 32) | call->correlationId, start ? start : end, end);
}

/* Subscribes to the launch callbacks of both domains (WORKBENCH_RECORD_LAUNCH_DOMAINS=runtime
   or driver: one alone); 0 when CUPTI refused, with a note. */
static int enable_launch_callbacks(void) {
    pthread_atfork(NULL, NULL, forget_tid);
    CUptiResult r = cuptiSubscribe(&launch_subscriber, (CUpti_CallbackFunc)on_launch, NULL);
    if (r != CUPTI_SUCCESS) {
        note("kernel launches not recorded: cuptiSubscribe", r);
        return 0;
    }
    const char *only = getenv("WORKBENCH_RECORD_LAUNCH_DOMAINS");
    const struct { CUpti_CallbackDomain domain; CUpti_CallbackId size; const char *word; } domains[] = {
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, "runtime"},
        {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, "driver"}};
    unsigned enabled = 0;
    for (unsigned d = 0; d < 2; d++) {
        if (only && *only && strcmp(only, domains[d].word) != 0) continue;
        for (CUpti_CallbackId cbid = 1; cbid < domains[d].size; cbid++) {
            const char *name = NULL;
            if (cuptiGetCallbackName(domains[d].domain, cbid, &name) != CUPTI_SUCCESS || !is_launch_call(name))
                continue;
            call_id((int)d, cbid); /* named now: no CUPTI call, no text sent, inside a launch */
            r = cuptiEnableCallback(1, launch_subscriber, domains[d].domain, cbid);
            if (r == CUPTI_SUCCESS) enabled++;
            else note("cuptiEnableCallback (a launch call)", r);
        }
    }
    if (!enabled) {
        note("kernel launches not recorded: no launch callback could be enabled", CUPTI_ERROR_NOT_SUPPORTED);
        return 0;
    }
    return 1;
}

/* The duty cycle (`sampled`): its own thread, which sleeps on CLOCK_MONOTONIC between the
   switches, so no program thread pays for them; the switch and the exit's flush take a flag
   of ours (not a pthread lock: the lock shim records those) so a window is closed once. */
static unsigned long sample_window_ns = 1000000ul, sample_period_ns = 10000000ul;
static atomic_flag sample_lock = ATOMIC_FLAG_INIT;
static int sample_stopped, sample_on;
static uint64_t sample_from, sample_enable_ns, sample_count;
static CUpti_ActivityKind sample_kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;

static void sample_take(void) {
    while (atomic_flag_test_and_set_explicit(&sample_lock, memory_order_acquire)) {}
}

static void sample_give(void) { atomic_flag_clear_explicit(&sample_lock, memory_order_release); }

/* Closes the open window (the sample lock is held): disables kernel records, sends it. Where
   CUPTI will not disable them they stay on, so the window stays open until `final` (the exit)
   and sampling stops: the trace says kernels were recorded all that while. */
static void sample_close_locked(int final) {
    if (!sample_on) return;
    uint64_t before = wb_now();
    CUptiResult r = cuptiActivityDisable(sample_kind);
    uint64_t after = wb_now();
    if (r != CUPTI_SUCCESS && !sample_stopped)
        note("sampled kernel records: cuptiActivityDisable (kernel records stay on to the end)", r);
    if (r != CUPTI_SUCCESS && !final) {
        sample_stopped = 1;
        return;
    }
    sample_on = 0;
    wb_emit(WB_WINDOW, 0, 0, sample_count++, sample_enable_ns + (after - before), sample_from, before);
}

/* Opens a window (the sample lock is held); 0 when CUPTI refused (sampling stops). */
static int sample_open_locked(void) {
    uint64_t before = wb_now();
    CUptiResult r = cuptiActivityEnable(sample_kind);
    uint64_t after = wb_now();
    if (r != CUPTI_SUCCESS) {
        note("sampled kernel records: cuptiActivityEnable (sampling stopped)", r);
        sample_stopped = 1;
        return 0;
    }
    sample_on = 1;
    sample_from = after;
    sample_enable_ns = after - before;
    return 1;
}

static void sleep_until(uint64_t ns) {
    struct timespec at = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR) {}
}

static void *sampler(void *unused) {
    (void)unused;
    uint64_t period_start = wb_now();
    for (;;) {
        sample_take();
        int go = !sample_stopped && sample_open_locked();
        sample_give();
        if (!go) return NULL;
        sleep_until(period_start + sample_window_ns);
        sample_take();
        sample_close_locked(0);
        go = !sample_stopped;
        sample_give();
        if (!go) return NULL;
        period_start += sample_period_ns;
        uint64_t now = wb_now();
        if (period_start < now) /* the thread was held up: the next period starts now */
            period_start = now;
        sleep_until(period_start);
    }
}

/* WORKBENCH_RECORD_SAMPLE_MS=WINDOW/PERIOD: whole or decimal ms, 0 < WINDOW < PERIOD. */
static int read_sample(void) {
    const char *text = getenv("WORKBENCH_RECORD_SAMPLE_MS");
    if (!text || !*text) return 1;
    char *end = NULL;
    double window = strtod(text, &end);
    if (!end || *end != '/') return 0;
    double period = strtod(end + 1, &end);
    if (!end || *end || !(window > 0) || !(period > window) || period > 60000) return 0;
    sample_window_ns = (unsigned long)(window * 1e6);
    sample_period_ns = (unsigned long)(period * 1e6);
    return sample_window_ns > 0;
}

static void start_sampling(CUpti_ActivityKind kind) {
    sample_kind = kind;
    if (!read_sample()) {
        char text[WB_TEXT_MAX];
        int n = snprintf(text, sizeof text, "WORKBENCH_RECORD_SAMPLE_MS=%s is not WINDOW/PERIOD in ms with "
                         "0 < WINDOW < PERIOD: 1/10 taken", getenv("WORKBENCH_RECORD_SAMPLE_MS"));
        wb_emit_text(WB_T_NOTE, 0, 0, 0, text, n > 0 ? (size_t)n : 0);
        sample_window_ns = 1000000ul;
        sample_period_ns = 10000000ul;
    }
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attr, sampler, NULL) != 0)
        note("sampled kernel records: no thread for the duty cycle (none sampled)", CUPTI_ERROR_UNKNOWN);
    pthread_attr_destroy(&attr);
}

/* At exit: the open window closed (its kernels flushed after), the thread told to stop. */
static void stop_sampling(void) {
    sample_take();
    sample_close_locked(1);
    sample_stopped = 1;
    sample_give();
}

#endif
