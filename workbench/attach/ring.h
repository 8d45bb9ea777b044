/* The shared-memory ring between a recorded program and the recorder (ring.py reads it).

   One file, made by the recorder, named to the program in WORKBENCH_RECORD_RING: a header
   page, then `capacity` fixed 48-byte event slots, then `text_capacity` 256-byte text slots
   (names of ranges, domains, locks, threads, kernels). Each ring is many-producer, one
   consumer and lock-free: a producer reserves a slot by compare-and-swap on `head`, fills it
   and publishes it by storing `seq` = position + 1 last; the recorder copies the published
   prefix and moves `tail` on. A full ring drops the event and counts it in `dropped`: the
   program is never made to wait for the recorder. Offsets are fixed (ring.py has them too). */
#ifndef WB_RING_H
#define WB_RING_H

#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WB_MAGIC 0x31304752494e4257ULL /* "WBRING01" */
#define WB_VERSION 1u
#define WB_DATA_OFFSET 4096u
#define WB_TEXT_MAX 224u

enum wb_kind {
    WB_LOCK = 1, WB_UNLOCK = 2, WB_COND = 3, WB_SEM = 4,
    WB_PUSH = 5, WB_POP = 6, WB_START = 7, WB_END = 8, WB_MARK = 9,
    WB_KERNEL = 16, WB_MEMCPY = 17, WB_MEMSET = 18, WB_SYNC = 19, WB_API = 20, WB_CLOCK = 21,
    WB_OVERHEAD = 22, WB_LAUNCH = 23, WB_WINDOW = 24,
};
enum wb_text_kind { WB_T_STRING = 1, WB_T_DOMAIN = 2, WB_T_OBJECT = 3, WB_T_THREAD = 4, WB_T_NOTE = 5 };
enum wb_flag { WB_F_TRY = 1, WB_F_TIMED = 2, WB_F_TIMEOUT = 4, WB_F_COND = 8, WB_F_WAITED = 16 };
enum wb_feature { WB_FEATURE_LOCKS = 1, WB_FEATURE_NVTX = 2, WB_FEATURE_CUPTI = 4 };

struct wb_event {
    _Atomic uint32_t seq;
    uint16_t kind, flags;
    uint32_t tid, pid;
    uint64_t obj, aux, t0, t1;
};

struct wb_text {
    _Atomic uint32_t seq;
    uint16_t kind, len;
    uint32_t pid, tid;
    uint64_t id, ref;
    char text[WB_TEXT_MAX];
};

struct wb_header {
    uint64_t magic;
    uint32_t version, event_bytes;
    uint64_t capacity, text_capacity;
    uint32_t text_bytes;
    _Atomic uint32_t features;
    _Atomic uint64_t unrecorded; /* holds of uncontended mutexes not sent (shim.c, contended mode) */
    _Atomic uint64_t untracked;  /* contended mutexes the shim's set had no room for */
    uint64_t reserved;
    _Alignas(64) _Atomic uint64_t head;
    _Alignas(64) _Atomic uint64_t tail;
    _Alignas(64) _Atomic uint64_t dropped;
    _Alignas(64) _Atomic uint64_t text_head;
    _Alignas(64) _Atomic uint64_t text_tail;
    _Alignas(64) _Atomic uint64_t text_dropped;
    _Alignas(64) _Atomic uint64_t next_id;
};

_Static_assert(sizeof(struct wb_event) == 48, "event slot");
_Static_assert(sizeof(struct wb_text) == 256, "text slot");
_Static_assert(offsetof(struct wb_header, head) == 64 && offsetof(struct wb_header, tail) == 128
               && offsetof(struct wb_header, dropped) == 192 && offsetof(struct wb_header, text_head) == 256
               && offsetof(struct wb_header, text_tail) == 320 && offsetof(struct wb_header, next_id) == 448
               && offsetof(struct wb_header, unrecorded) == 40 && offsetof(struct wb_header, untracked) == 48,
               "header offsets (ring.py)");

static struct wb_header *wb_ring;
static struct wb_event *wb_events;
static struct wb_text *wb_texts;
static uint64_t wb_mask, wb_text_mask;
static uint32_t wb_pid;

static inline uint64_t wb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint32_t wb_gettid(void) { return (uint32_t)syscall(SYS_gettid); }

/* Takes a mapped ring (this process's other shim may have mapped it already). */
static int wb_attach(struct wb_header *h, uint32_t feature) {
    if (!h || h->magic != WB_MAGIC) return 0;
    wb_mask = h->capacity - 1;
    wb_text_mask = h->text_capacity - 1;
    wb_events = (struct wb_event *)((char *)h + WB_DATA_OFFSET);
    wb_texts = (struct wb_text *)((char *)h + WB_DATA_OFFSET + h->capacity * sizeof(struct wb_event));
    wb_pid = (uint32_t)getpid();
    wb_ring = h;
    atomic_fetch_or(&wb_ring->features, feature);
    return 1;
}

/* Maps the ring named in the environment: by its path, else by the descriptor the recorder
   handed down (where /proc paths cannot be opened); 0, and nothing recorded, when neither. */
static int wb_map(uint32_t feature) {
    const char *path = getenv("WORKBENCH_RECORD_RING"), *inherited = getenv("WORKBENCH_RECORD_RING_FD");
    if (!path || !*path) return 0;
    int fd = open(path, O_RDWR | O_CLOEXEC), own = 1;
    if (fd < 0 && inherited && *inherited) {
        fd = atoi(inherited);
        own = 0;
    }
    if (fd < 0) return 0;
    struct wb_header h;
    void *p = MAP_FAILED;
    if (pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && h.magic == WB_MAGIC && h.version == WB_VERSION
        && h.event_bytes == sizeof(struct wb_event) && h.text_bytes == sizeof(struct wb_text)) {
        size_t size = WB_DATA_OFFSET + h.capacity * sizeof(struct wb_event)
                      + h.text_capacity * sizeof(struct wb_text);
        /* Populated now: a page fault inside a lock call would cost more than the call. */
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    }
    if (own) close(fd);
    return p != MAP_FAILED && wb_attach((struct wb_header *)p, feature);
}

static inline void wb_emit(uint16_t kind, uint16_t flags, uint32_t tid, uint64_t obj, uint64_t aux,
                           uint64_t t0, uint64_t t1) {
    struct wb_header *h = wb_ring;
    if (!h) return;
    uint64_t pos = atomic_load_explicit(&h->head, memory_order_relaxed);
    do {
        if (pos - atomic_load_explicit(&h->tail, memory_order_acquire) > wb_mask) {
            atomic_fetch_add_explicit(&h->dropped, 1, memory_order_relaxed);
            return;
        }
    } while (!atomic_compare_exchange_weak_explicit(&h->head, &pos, pos + 1, memory_order_relaxed,
                                                    memory_order_relaxed));
    struct wb_event *e = &wb_events[pos & wb_mask];
    e->kind = kind;
    e->flags = flags;
    e->tid = tid;
    e->pid = wb_pid;
    e->obj = obj;
    e->aux = aux;
    e->t0 = t0;
    e->t1 = t1;
    atomic_store_explicit(&e->seq, (uint32_t)(pos + 1), memory_order_release);
}

__attribute__((unused)) static inline uint64_t wb_new_id(void) {
    return wb_ring ? atomic_fetch_add_explicit(&wb_ring->next_id, 1, memory_order_relaxed) + 1 : 0;
}

__attribute__((unused)) static void wb_emit_text(uint16_t kind, uint32_t tid, uint64_t id, uint64_t ref, const char *s, size_t len) {
    struct wb_header *h = wb_ring;
    if (!h) return;
    if (len > WB_TEXT_MAX) len = WB_TEXT_MAX;
    uint64_t pos = atomic_load_explicit(&h->text_head, memory_order_relaxed);
    do {
        if (pos - atomic_load_explicit(&h->text_tail, memory_order_acquire) > wb_text_mask) {
            atomic_fetch_add_explicit(&h->text_dropped, 1, memory_order_relaxed);
            return;
        }
    } while (!atomic_compare_exchange_weak_explicit(&h->text_head, &pos, pos + 1, memory_order_relaxed,
                                                    memory_order_relaxed));
    struct wb_text *t = &wb_texts[pos & wb_text_mask];
    t->kind = kind;
    t->len = (uint16_t)len;
    t->pid = wb_pid;
    t->tid = tid;
    t->id = id;
    t->ref = ref;
    if (len) memcpy(t->text, s, len);
    atomic_store_explicit(&t->seq, (uint32_t)(pos + 1), memory_order_release);
}

#endif
