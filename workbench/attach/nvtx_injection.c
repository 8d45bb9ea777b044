/* NVTX injection (part of shim.c's translation unit, built when the NVTX headers are found):
   the program's NVTX calls land here once its NVTX_INJECTION64_PATH names this library.

   Ranges go to the ring as events (push/pop per thread, start/end by id, marks), their
   names as text records interned by content, so a name pushed a million times is sent once.
   Domains, registered strings, named resources (a mutex by its address) and named threads
   are text records. Handles handed back to the program are ids, never pointers. */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtSync.h>
#include <wchar.h>

#define WB_INTERN 4096u
struct wb_interned { _Atomic uint64_t hash, id; };
static struct wb_interned interned[WB_INTERN];
static WB_TLS int nvtx_depth;

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h | 1; /* never 0: 0 marks a free entry */
}

static uint64_t string_id(const char *s) {
    if (!wb_ring) return 0;
    if (!s) s = "";
    size_t n = strnlen(s, WB_TEXT_MAX);
    uint64_t h = fnv1a(s, n);
    for (unsigned probe = 0, i = (unsigned)h & (WB_INTERN - 1); probe < 16; probe++, i = (i + 1) & (WB_INTERN - 1)) {
        uint64_t seen = atomic_load_explicit(&interned[i].hash, memory_order_acquire);
        if (seen == 0) {
            uint64_t zero = 0;
            if (!atomic_compare_exchange_strong(&interned[i].hash, &zero, h)) {
                seen = zero;
            } else {
                uint64_t id = wb_new_id();
                wb_emit_text(WB_T_STRING, 0, id, 0, s, n);
                atomic_store_explicit(&interned[i].id, id, memory_order_release);
                return id;
            }
        }
        if (seen == h) {
            uint64_t id = atomic_load_explicit(&interned[i].id, memory_order_acquire);
            if (id) return id;
            break; /* being interned by another thread right now: send it again */
        }
    }
    uint64_t id = wb_new_id();
    wb_emit_text(WB_T_STRING, 0, id, 0, s, n);
    return id;
}

static uint64_t wide_id(const wchar_t *w) {
    char buffer[WB_TEXT_MAX + 1];
    size_t n = 0;
    for (; w && w[n] && n < WB_TEXT_MAX; n++) buffer[n] = w[n] > 0 && w[n] < 128 ? (char)w[n] : '?';
    buffer[n] = 0;
    return string_id(buffer);
}

/* The name of an event's message: ASCII, wide or registered (a registered one is its id already). */
static uint64_t message_id(int type, const nvtxMessageValue_t *message) {
    switch (type) {
    case NVTX_MESSAGE_TYPE_ASCII: return string_id(message->ascii);
    case NVTX_MESSAGE_TYPE_UNICODE: return wide_id(message->unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED: return (uint64_t)(uintptr_t)message->registered;
    default: return string_id("");
    }
}

static uint64_t attributes_id(const nvtxEventAttributes_t *a) {
    if (!a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof(a->message)) return string_id("");
    return message_id(a->messageType, &a->message);
}

static int push(uint64_t domain, uint64_t name) {
    if (recording()) wb_emit(WB_PUSH, 0, tid(), domain, name, wb_now(), 0);
    return nvtx_depth++;
}

static int pop(uint64_t domain) {
    if (recording()) wb_emit(WB_POP, 0, tid(), domain, 0, wb_now(), 0);
    return nvtx_depth > 0 ? --nvtx_depth : -1;
}

static nvtxRangeId_t start(uint64_t domain, uint64_t name) {
    uint64_t id = wb_new_id();
    if (recording()) wb_emit(WB_START, 0, tid(), domain, name, wb_now(), id);
    return id;
}

static void end(uint64_t domain, nvtxRangeId_t id) {
    if (recording()) wb_emit(WB_END, 0, tid(), domain, id, wb_now(), 0);
}

static void mark(uint64_t domain, uint64_t name) {
    if (recording()) {
        uint64_t t = wb_now();
        wb_emit(WB_MARK, 0, tid(), domain, name, t, t);
    }
}

static uint64_t domain_of(nvtxDomainHandle_t d) { return (uint64_t)(uintptr_t)d; }

static int NVTX_API push_ex(const nvtxEventAttributes_t *a) { return push(0, attributes_id(a)); }
static int NVTX_API push_a(const char *s) { return push(0, string_id(s)); }
static int NVTX_API push_w(const wchar_t *s) { return push(0, wide_id(s)); }
static int NVTX_API pop_core(void) { return pop(0); }
static nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t *a) { return start(0, attributes_id(a)); }
static nvtxRangeId_t NVTX_API start_a(const char *s) { return start(0, string_id(s)); }
static nvtxRangeId_t NVTX_API start_w(const wchar_t *s) { return start(0, wide_id(s)); }
static void NVTX_API end_core(nvtxRangeId_t id) { end(0, id); }
static void NVTX_API mark_ex(const nvtxEventAttributes_t *a) { mark(0, attributes_id(a)); }
static void NVTX_API mark_a(const char *s) { mark(0, string_id(s)); }
static void NVTX_API mark_w(const wchar_t *s) { mark(0, wide_id(s)); }

static void NVTX_API name_thread_a(uint32_t thread, const char *name) {
    if (recording() && name) wb_emit_text(WB_T_THREAD, thread, thread, 0, name, strnlen(name, WB_TEXT_MAX));
}

static int NVTX_API d_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    return push(domain_of(d), attributes_id(a));
}
static int NVTX_API d_pop(nvtxDomainHandle_t d) { return pop(domain_of(d)); }
static nvtxRangeId_t NVTX_API d_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    return start(domain_of(d), attributes_id(a));
}
static void NVTX_API d_end(nvtxDomainHandle_t d, nvtxRangeId_t id) { end(domain_of(d), id); }
static void NVTX_API d_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    mark(domain_of(d), attributes_id(a));
}

static nvtxDomainHandle_t NVTX_API d_create_a(const char *name) {
    uint64_t id = wb_new_id();
    if (!id) id = 1u << 30; /* not recording: any handle that is not the default domain */
    if (name) wb_emit_text(WB_T_DOMAIN, 0, id, 0, name, strnlen(name, WB_TEXT_MAX));
    return (nvtxDomainHandle_t)(uintptr_t)id;
}

static nvtxDomainHandle_t NVTX_API d_create_w(const wchar_t *name) {
    char buffer[WB_TEXT_MAX + 1];
    size_t n = 0;
    for (; name && name[n] && n < WB_TEXT_MAX; n++) buffer[n] = name[n] > 0 && name[n] < 128 ? (char)name[n] : '?';
    buffer[n] = 0;
    return d_create_a(buffer);
}

static void NVTX_API d_destroy(nvtxDomainHandle_t d) { (void)d; }

static nvtxStringHandle_t NVTX_API d_register_a(nvtxDomainHandle_t d, const char *s) {
    (void)d;
    uint64_t id = string_id(s);
    return (nvtxStringHandle_t)(uintptr_t)(id ? id : 1);
}

static nvtxStringHandle_t NVTX_API d_register_w(nvtxDomainHandle_t d, const wchar_t *s) {
    (void)d;
    uint64_t id = wide_id(s);
    return (nvtxStringHandle_t)(uintptr_t)(id ? id : 1);
}

/* A named resource: a mutex (or any object) by its address, or a thread by its id. */
static nvtxResourceHandle_t NVTX_API d_resource_create(nvtxDomainHandle_t d, nvtxResourceAttributes_t *a) {
    (void)d;
    uint64_t handle = wb_new_id();
    if (a && a->size >= offsetof(nvtxResourceAttributes_t, message) + sizeof(a->message)) {
        uint64_t object = a->identifier.ullValue;
        const char *text = "";
        uint64_t ref = 0;
        if (a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii) text = a->message.ascii;
        else ref = message_id(a->messageType, &a->message);
        if (a->identifierType == NVTX_RESOURCE_TYPE_GENERIC_THREAD_NATIVE)
            wb_emit_text(WB_T_THREAD, (uint32_t)object, object, ref, text, strnlen(text, WB_TEXT_MAX));
        else
            wb_emit_text(WB_T_OBJECT, 0, object, ref, text, strnlen(text, WB_TEXT_MAX));
    }
    return (nvtxResourceHandle_t)(uintptr_t)(handle ? handle : 1);
}

static void NVTX_API d_resource_destroy(nvtxResourceHandle_t r) { (void)r; }

static void fill(const NvtxExportTableCallbacks *callbacks, NvtxCallbackModule module, const void *const *entries,
                 unsigned count) {
    NvtxFunctionTable table = NULL;
    unsigned size = 0;
    if (!callbacks->GetModuleFunctionTable(module, &table, &size) || !table) return;
    for (unsigned i = 1; i < count && i < size; i++)
        if (entries[i] && table[i]) *table[i] = (NvtxFunctionPointer)entries[i];
}

WB_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
    init();
    const NvtxExportTableCallbacks *callbacks = (const NvtxExportTableCallbacks *)get_table(NVTX_ETID_CALLBACKS);
    if (!callbacks || callbacks->struct_size < sizeof(*callbacks)) return 0;
    const void *core[NVTX_CBID_CORE_SIZE] = {0};
    core[NVTX_CBID_CORE_MarkEx] = (const void *)mark_ex;
    core[NVTX_CBID_CORE_MarkA] = (const void *)mark_a;
    core[NVTX_CBID_CORE_MarkW] = (const void *)mark_w;
    core[NVTX_CBID_CORE_RangeStartEx] = (const void *)start_ex;
    core[NVTX_CBID_CORE_RangeStartA] = (const void *)start_a;
    core[NVTX_CBID_CORE_RangeStartW] = (const void *)start_w;
    core[NVTX_CBID_CORE_RangeEnd] = (const void *)end_core;
    core[NVTX_CBID_CORE_RangePushEx] = (const void *)push_ex;
    core[NVTX_CBID_CORE_RangePushA] = (const void *)push_a;
    core[NVTX_CBID_CORE_RangePushW] = (const void *)push_w;
    core[NVTX_CBID_CORE_RangePop] = (const void *)pop_core;
    core[NVTX_CBID_CORE_NameOsThreadA] = (const void *)name_thread_a;
    fill(callbacks, NVTX_CB_MODULE_CORE, core, NVTX_CBID_CORE_SIZE);
    const void *core2[NVTX_CBID_CORE2_SIZE] = {0};
    core2[NVTX_CBID_CORE2_DomainMarkEx] = (const void *)d_mark;
    core2[NVTX_CBID_CORE2_DomainRangeStartEx] = (const void *)d_start;
    core2[NVTX_CBID_CORE2_DomainRangeEnd] = (const void *)d_end;
    core2[NVTX_CBID_CORE2_DomainRangePushEx] = (const void *)d_push;
    core2[NVTX_CBID_CORE2_DomainRangePop] = (const void *)d_pop;
    core2[NVTX_CBID_CORE2_DomainResourceCreate] = (const void *)d_resource_create;
    core2[NVTX_CBID_CORE2_DomainResourceDestroy] = (const void *)d_resource_destroy;
    core2[NVTX_CBID_CORE2_DomainRegisterStringA] = (const void *)d_register_a;
    core2[NVTX_CBID_CORE2_DomainRegisterStringW] = (const void *)d_register_w;
    core2[NVTX_CBID_CORE2_DomainCreateA] = (const void *)d_create_a;
    core2[NVTX_CBID_CORE2_DomainCreateW] = (const void *)d_create_w;
    core2[NVTX_CBID_CORE2_DomainDestroy] = (const void *)d_destroy;
    fill(callbacks, NVTX_CB_MODULE_CORE2, core2, NVTX_CBID_CORE2_SIZE);
    if (wb_ring) atomic_fetch_or(&wb_ring->features, WB_FEATURE_NVTX);
    return 1;
}
