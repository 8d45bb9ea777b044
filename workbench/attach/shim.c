/* The recording shim, loaded into an unmodified program by LD_PRELOAD (and named as its
   NVTX injection library): pthread mutexes, condition variables and semaphores, and, when
   built with the NVTX headers (WB_NVTX), NVTX ranges, marks, domains and resource names.

   Each recorded call adds one or two fixed events to the ring (ring.h): a lock's acquire
   (call start, acquired), its release (taken before the real unlock, so the release of one
   holder is in the ring before the acquire of the next), a condition wait (the mutex released
   at its start and re-acquired at its end) and a semaphore wait. Which calls are recorded is
   the lock mode's choice (WORKBENCH_RECORD_LOCKS, below): by default a mutex nobody waits
   for sends nothing.

   The real functions are found with dlsym(RTLD_NEXT) on first use, from whichever comes
   first: this library's constructor or a lock taken by another library's static initialiser
   before it. While that runs (dlsym may lock) the calling thread is marked, and any lock it
   or another thread takes meanwhile goes to glibc's own exported entry points unrecorded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include <pthread.h>
#include <semaphore.h>

#include "ring.h"

#define WB_TLS __thread __attribute__((tls_model("initial-exec")))
#define WB_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define WB_EXPORT __attribute__((visibility("default")))

extern int __pthread_mutex_lock(pthread_mutex_t *);
extern int __pthread_mutex_trylock(pthread_mutex_t *);
extern int __pthread_mutex_unlock(pthread_mutex_t *);

static int (*real_lock)(pthread_mutex_t *);
static int (*real_trylock)(pthread_mutex_t *);
static int (*real_unlock)(pthread_mutex_t *);
static int (*real_timedlock)(pthread_mutex_t *, const struct timespec *);
static int (*real_cond_wait)(pthread_cond_t *, pthread_mutex_t *);
static int (*real_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
static int (*real_cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);
static int (*real_sem_wait)(sem_t *);
static int (*real_sem_timedwait)(sem_t *, const struct timespec *);

static _Atomic int wb_state; /* 0 not started, 1 resolving, 2 ready */
static WB_TLS int wb_guard;
static WB_TLS uint32_t wb_tid;
static WB_TLS uint32_t unsent; /* holds not sent (contended mode), not yet added to the ring's count */
static pthread_key_t unsent_key; /* its destructor counts a thread's unsent holds (below) */
static void flush_unsent(void *unused);

static inline uint32_t tid(void) {
    uint32_t t = wb_tid;
    if (WB_UNLIKELY(!t)) t = wb_tid = wb_gettid();
    return t;
}

/* Which locks are recorded (WORKBENCH_RECORD_LOCKS):
   - all: every hold of every mutex (its outermost acquire and release: the re-locks of a
     recursive mutex by its owner are not sent);
   - contended (the default): a mutex's holds and waits from the first time a thread found it
     taken, the hold it found included; the holds of a mutex nobody waited for are counted in
     the ring's header (`unrecorded`), not sent. Condition waits, and semaphore waits that had to
     wait, always;
   - none: no lock, condition or semaphore at all.
   An uncontended lock then costs a trylock, a look-up in the set of contended mutexes, a
   time-stamp reading and an entry on the thread's own stack of held mutexes: no ring write. */
enum { LOCKS_ALL, LOCKS_CONTENDED, LOCKS_NONE };
static int wb_locks = LOCKS_CONTENDED;

static void read_mode(void) {
    const char *mode = getenv("WORKBENCH_RECORD_LOCKS");
    if (mode && strcmp(mode, "all") == 0) wb_locks = LOCKS_ALL;
    else if (mode && strcmp(mode, "none") == 0) wb_locks = LOCKS_NONE;
}

/* When an unsent hold began: the CPU's time-stamp counter where the kernel's own clock is
   that counter (a third of a clock reading's cost), turned into CLOCK_MONOTONIC only for the
   few holds that are sent, at the rate the two clocks have kept since the shim started. */
#if defined(__x86_64__)
#include <x86intrin.h>
static int wb_tsc;
static uint64_t tsc0, ns0;

static void start_stamps(void) {
    char source[16] = {0};
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, source, sizeof source - 1);
        close(fd);
        wb_tsc = n >= 3 && strncmp(source, "tsc", 3) == 0;
    }
    ns0 = wb_now();
    tsc0 = __rdtsc();
}

static inline uint64_t stamp(void) { return wb_tsc ? __rdtsc() : wb_now(); }

static uint64_t stamp_ns(uint64_t at, uint64_t now_ns) {
    if (!wb_tsc) return at;
    uint64_t ticks = __rdtsc();
    if (at >= ticks || ticks <= tsc0 || now_ns <= ns0) return now_ns;
    double per_tick = (double)(now_ns - ns0) / (double)(ticks - tsc0);
    uint64_t back = (uint64_t)((double)(ticks - at) * per_tick);
    return back < now_ns ? now_ns - back : now_ns;
}
#else
static void start_stamps(void) {}
static inline uint64_t stamp(void) { return wb_now(); }
static uint64_t stamp_ns(uint64_t at, uint64_t now_ns) { (void)now_ns; return at; }
#endif

static void after_fork(void) {
    wb_pid = (uint32_t)getpid();
    wb_tid = 0; /* the forking thread has a new id in the child */
    unsent = 0; /* the parent counts those */
}

static void *next_symbol(const char *name, const char *version) {
    void *found = version ? dlvsym(RTLD_NEXT, name, version) : NULL;
    return found ? found : dlsym(RTLD_NEXT, name);
}

/* Whether the program's lock calls come here: loaded only as its NVTX injection (not
   preloaded), this library is not the first that defines them. */
static void init(void);
static int preloaded(void) {
    Dl_info mine, theirs;
    void *found = dlsym(RTLD_DEFAULT, "pthread_mutex_lock");
    return found && dladdr((void *)init, &mine) && dladdr(found, &theirs) && mine.dli_fbase == theirs.dli_fbase;
}

static void init(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&wb_state, &expected, 1)) return;
    wb_guard = 1;
    real_lock = next_symbol("pthread_mutex_lock", NULL);
    real_trylock = next_symbol("pthread_mutex_trylock", NULL);
    real_unlock = next_symbol("pthread_mutex_unlock", NULL);
    real_timedlock = next_symbol("pthread_mutex_timedlock", NULL);
    /* The condition variable's current ABI; a bare dlsym can give the 2.2.5 compatibility one. */
    real_cond_wait = next_symbol("pthread_cond_wait", "GLIBC_2.3.2");
    real_cond_timedwait = next_symbol("pthread_cond_timedwait", "GLIBC_2.3.2");
    real_cond_clockwait = next_symbol("pthread_cond_clockwait", NULL);
    real_sem_wait = next_symbol("sem_wait", NULL);
    real_sem_timedwait = next_symbol("sem_timedwait", NULL);
    if (!real_lock) real_lock = __pthread_mutex_lock;
    if (!real_trylock) real_trylock = __pthread_mutex_trylock;
    if (!real_unlock) real_unlock = __pthread_mutex_unlock;
    read_mode();
    start_stamps();
    pthread_key_create(&unsent_key, flush_unsent);
    if (wb_map(preloaded() ? WB_FEATURE_LOCKS : 0)) pthread_atfork(NULL, NULL, after_fork);
    wb_guard = 0;
    atomic_store(&wb_state, 2);
}

__attribute__((constructor)) static void on_load(void) { init(); }

/* The ring as this process mapped it, for the CUDA injection library loaded later. */
WB_EXPORT void *workbench_record_ring(void) {
    init();
    return wb_ring;
}

/* Code whose locks are the recording's or the driver's own, not the program's: the CUDA shim
   names libcuda and libcupti once CUDA starts; a lock called from there is not recorded. */
#define WB_IGNORED 16
static struct { uintptr_t start, size; } ignored[WB_IGNORED];
static _Atomic int ignored_count;

static int find_library(struct dl_phdr_info *info, size_t size, void *wanted) {
    (void)size;
    if (!info->dlpi_name || !strstr(info->dlpi_name, (const char *)wanted)) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[i];
        int n = atomic_load(&ignored_count);
        if (segment->p_type == PT_LOAD && (segment->p_flags & PF_X) && n < WB_IGNORED) {
            ignored[n].start = info->dlpi_addr + segment->p_vaddr;
            ignored[n].size = segment->p_memsz;
            atomic_store(&ignored_count, n + 1);
        }
    }
    return 0;
}

WB_EXPORT void workbench_record_ignore_library(const char *name) {
    if (name && *name) dl_iterate_phdr(find_library, (void *)name);
}

static inline int ignored_caller(const void *at) {
    int n = atomic_load_explicit(&ignored_count, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if ((uintptr_t)at - ignored[i].start < ignored[i].size) return 1;
    return 0;
}

/* Whether this call is recorded; resolves the real functions on the first call. */
static inline int recording(void) {
    if (WB_UNLIKELY(atomic_load_explicit(&wb_state, memory_order_acquire) != 2)) {
        if (!wb_guard) init();
        if (atomic_load_explicit(&wb_state, memory_order_acquire) != 2) return 0;
    }
    return wb_ring != NULL && !wb_guard;
}

#define RECORDING() (recording() && !ignored_caller(__builtin_return_address(0)))

#define LOCKING() (wb_locks != LOCKS_NONE && RECORDING())

/* The mutexes some thread had to wait for: a lock-free open-addressing set, never emptied. */
#define WB_CONTENDED (1u << 14)
#define WB_PROBES 32
static _Atomic uintptr_t contended[WB_CONTENDED];

static inline unsigned slot_of(uintptr_t m) {
    return (unsigned)(((m >> 3) * 0x9E3779B97F4A7C15ULL) >> 50) & (WB_CONTENDED - 1);
}

static inline int is_contended(const void *m) {
    uintptr_t key = (uintptr_t)m;
    for (unsigned probe = 0, i = slot_of(key); probe < WB_PROBES; probe++, i = (i + 1) & (WB_CONTENDED - 1)) {
        uintptr_t seen = atomic_load_explicit(&contended[i], memory_order_relaxed);
        if (seen == key) return 1;
        if (seen == 0) return 0;
    }
    return 0;
}

static void mark_contended(const void *m) {
    uintptr_t key = (uintptr_t)m;
    for (unsigned probe = 0, i = slot_of(key); probe < WB_PROBES; probe++, i = (i + 1) & (WB_CONTENDED - 1)) {
        uintptr_t seen = atomic_load_explicit(&contended[i], memory_order_relaxed);
        if (seen == key) return;
        if (seen == 0) {
            if (atomic_compare_exchange_strong(&contended[i], &seen, key) || seen == key) return;
        }
    }
    if (wb_ring) atomic_fetch_add_explicit(&wb_ring->untracked, 1, memory_order_relaxed); /* set full */
}

/* The mutexes this thread holds: when each was taken, whether that was sent, and how many
   times more than once it is held (a recursive mutex locked again by its owner): a hold runs
   from the outermost lock to the outermost unlock, whatever the lock mode. */
#define WB_HELD 16
struct wb_held { pthread_mutex_t *m; uint64_t since; uint32_t depth; uint16_t flags; uint8_t sent, stamped; };
static WB_TLS struct wb_held held[WB_HELD];
static WB_TLS int held_count, held_over;

static inline int held_find(const pthread_mutex_t *m) {
    for (int i = held_count - 1; i >= 0; i--)
        if (held[i].m == m) return i;
    return -1;
}

/* The count of unsent holds is the thread's own, added to the ring's header every 256 and
   when the thread ends (a key's destructor) or the program exits. */
static WB_TLS int unsent_registered;

static void flush_unsent(void *unused) {
    (void)unused;
    if (unsent && wb_ring) atomic_fetch_add_explicit(&wb_ring->unrecorded, unsent, memory_order_relaxed);
    unsent = 0;
}

__attribute__((destructor)) static void flush_unsent_at_exit(void) { flush_unsent(NULL); }

static inline void count_unsent(void) {
    if (WB_UNLIKELY(!unsent_registered)) {
        unsent_registered = 1;
        pthread_setspecific(unsent_key, (void *)1);
    }
    if (WB_UNLIKELY(++unsent == 256)) flush_unsent(NULL);
}

/* Whether a mutex's holds go to the ring: all of them under `--locks all`, otherwise those of a
   mutex some thread has waited for. */
static inline int sends(const void *m) { return wb_locks == LOCKS_ALL || is_contended(m); }

/* A re-lock by the thread that holds the mutex (only a recursive mutex allows one): the hold
   goes on, nothing is sent. */
static inline int held_again(const pthread_mutex_t *m) {
    int i = held_find(m);
    if (i < 0) return 0;
    held[i].depth++;
    return 1;
}

/* A mutex taken after a wait, or at the end of a condition wait (times read already). */
static inline void push_held(pthread_mutex_t *m, uint64_t since, uint16_t flags, uint8_t sent, uint8_t stamped) {
    if (WB_UNLIKELY(held_count == WB_HELD)) { /* too deep: sent whatever it is, its release too */
        if (!sent) {
            uint64_t t = wb_now();
            wb_emit(WB_LOCK, flags, tid(), (uintptr_t)m, 0, t, t);
        }
        held_over++;
        return;
    }
    held[held_count++] = (struct wb_held){m, since, 0, flags, sent, stamped};
}

static inline void taken(pthread_mutex_t *m, uint64_t t0, uint64_t t1, uint16_t flags) {
    if (held_again(m)) return;
    uint8_t sent = (flags & WB_F_WAITED) || sends(m);
    if (sent) wb_emit(WB_LOCK, flags, tid(), (uintptr_t)m, 0, t0, t1);
    push_held(m, t1, flags, sent, 0);
}

/* A mutex had at once: unless it is sent (`all`, or another thread ever waited for it), only
   a stamp of when, kept on this thread's stack. */
static inline void taken_at_once(pthread_mutex_t *m, uint16_t flags) {
    if (held_again(m)) return;
    if (WB_UNLIKELY(sends(m))) {
        uint64_t t = wb_now();
        wb_emit(WB_LOCK, flags, tid(), (uintptr_t)m, 0, t, t);
        push_held(m, t, flags, 1, 0);
        return;
    }
    push_held(m, stamp(), flags, 0, 1);
}

/* A mutex about to be released: nothing while an outer lock of it is held still; else its
   hold is sent if it was sent when taken, or if another thread has waited for the mutex since
   (then its acquire goes first). */
static inline void releasing(pthread_mutex_t *m, uint16_t flags) {
    int i = held_find(m);
    if (WB_UNLIKELY(i < 0)) { /* taken before the recording, on another thread, or too deep */
        if (held_over > 0 || sends(m)) {
            uint64_t t = wb_now();
            wb_emit(WB_UNLOCK, flags, tid(), (uintptr_t)m, 0, t, t);
        }
        if (held_over > 0) held_over--;
        return;
    }
    if (WB_UNLIKELY(held[i].depth)) {
        held[i].depth--;
        return;
    }
    struct wb_held h = held[i];
    if (WB_UNLIKELY(i != held_count - 1)) /* released out of order */
        memmove(&held[i], &held[i + 1], (size_t)(held_count - i - 1) * sizeof h);
    held_count--;
    if (!h.sent && !sends(m)) {
        count_unsent();
        return;
    }
    uint64_t t = wb_now();
    if (!h.sent) {
        uint64_t since = h.stamped ? stamp_ns(h.since, t) : h.since;
        wb_emit(WB_LOCK, h.flags, tid(), (uintptr_t)m, 0, since, since);
    }
    wb_emit(WB_UNLOCK, flags, tid(), (uintptr_t)m, 0, t, t);
}

WB_EXPORT int pthread_mutex_lock(pthread_mutex_t *m) {
    if (WB_UNLIKELY(!LOCKING())) return real_lock ? real_lock(m) : __pthread_mutex_lock(m);
    /* Uncontended, the lock is had at once: no wait. */
    if (real_trylock(m) == 0) {
        taken_at_once(m, 0);
        return 0;
    }
    if (wb_locks == LOCKS_CONTENDED) mark_contended(m);
    uint64_t t0 = wb_now();
    int rc = real_lock(m);
    if (rc != 0) return rc;
    taken(m, t0, wb_now(), WB_F_WAITED);
    return rc;
}

WB_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m) {
    if (WB_UNLIKELY(!LOCKING())) return real_trylock ? real_trylock(m) : __pthread_mutex_trylock(m);
    int rc = real_trylock(m);
    if (rc == 0) {
        taken_at_once(m, WB_F_TRY);
    } else if (rc == EBUSY && wb_locks == LOCKS_CONTENDED) {
        mark_contended(m); /* found taken: the holder's hold is sent at its release */
    }
    return rc;
}

WB_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *until) {
    if (WB_UNLIKELY(!LOCKING() || !real_timedlock)) {
        if (!real_timedlock) real_timedlock = next_symbol("pthread_mutex_timedlock", NULL);
        return real_timedlock(m, until);
    }
    uint16_t flags = WB_F_TIMED;
    uint64_t t0 = wb_now();
    int rc = real_trylock(m);
    if (rc != 0) {
        if (wb_locks == LOCKS_CONTENDED) mark_contended(m);
        flags |= WB_F_WAITED;
        rc = real_timedlock(m, until);
        if (rc != 0) return rc;
    }
    taken(m, t0, flags & WB_F_WAITED ? wb_now() : t0, flags);
    return rc;
}

WB_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m) {
    if (WB_UNLIKELY(!LOCKING())) return real_unlock ? real_unlock(m) : __pthread_mutex_unlock(m);
    releasing(m, 0);
    return real_unlock(m);
}

/* A condition wait releases its mutex at the start and holds it again at the end (glibc
   releases a recursive mutex locked more than once only by one level: its hold goes on). */
static inline uint64_t cond_begin(pthread_mutex_t *m) {
    releasing(m, WB_F_COND);
    return wb_now();
}

static inline void cond_end(pthread_cond_t *c, pthread_mutex_t *m, uint64_t t0, uint16_t flags, int rc) {
    uint64_t t1 = wb_now();
    if (rc == ETIMEDOUT) flags |= WB_F_TIMEOUT;
    wb_emit(WB_COND, flags, tid(), (uintptr_t)c, (uintptr_t)m, t0, t1);
    taken(m, t1, t1, WB_F_COND);
}

static void resolve_waits(void) {
    if (!real_cond_wait) real_cond_wait = next_symbol("pthread_cond_wait", "GLIBC_2.3.2");
    if (!real_cond_timedwait) real_cond_timedwait = next_symbol("pthread_cond_timedwait", "GLIBC_2.3.2");
    if (!real_cond_clockwait) real_cond_clockwait = next_symbol("pthread_cond_clockwait", NULL);
    if (!real_sem_wait) real_sem_wait = next_symbol("sem_wait", NULL);
    if (!real_sem_timedwait) real_sem_timedwait = next_symbol("sem_timedwait", NULL);
}

WB_EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
    if (WB_UNLIKELY(!LOCKING())) {
        resolve_waits();
        return real_cond_wait(c, m);
    }
    uint64_t t0 = cond_begin(m);
    int rc = real_cond_wait(c, m);
    cond_end(c, m, t0, 0, rc);
    return rc;
}

WB_EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *until) {
    if (WB_UNLIKELY(!LOCKING())) {
        resolve_waits();
        return real_cond_timedwait(c, m, until);
    }
    uint64_t t0 = cond_begin(m);
    int rc = real_cond_timedwait(c, m, until);
    cond_end(c, m, t0, WB_F_TIMED, rc);
    return rc;
}

WB_EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock,
                                     const struct timespec *until) {
    if (WB_UNLIKELY(!LOCKING() || !real_cond_clockwait)) {
        resolve_waits();
        return real_cond_clockwait(c, m, clock, until);
    }
    uint64_t t0 = cond_begin(m);
    int rc = real_cond_clockwait(c, m, clock, until);
    cond_end(c, m, t0, WB_F_TIMED, rc);
    return rc;
}

/* In contended mode a semaphore taken at the first try is no wait: nothing is sent. */
static inline int sem_at_once(sem_t *s) {
    if (wb_locks != LOCKS_CONTENDED) return 0;
    int saved = errno;
    if (sem_trywait(s) == 0) return 1;
    errno = saved;
    return 0;
}

WB_EXPORT int sem_wait(sem_t *s) {
    if (WB_UNLIKELY(!LOCKING())) {
        resolve_waits();
        return real_sem_wait(s);
    }
    if (sem_at_once(s)) return 0;
    uint64_t t0 = wb_now();
    int rc = real_sem_wait(s);
    wb_emit(WB_SEM, 0, tid(), (uintptr_t)s, 0, t0, wb_now());
    return rc;
}

WB_EXPORT int sem_timedwait(sem_t *s, const struct timespec *until) {
    if (WB_UNLIKELY(!LOCKING())) {
        resolve_waits();
        return real_sem_timedwait(s, until);
    }
    if (sem_at_once(s)) return 0;
    uint64_t t0 = wb_now();
    int rc = real_sem_timedwait(s, until);
    wb_emit(WB_SEM, rc != 0 && errno == ETIMEDOUT ? WB_F_TIMED | WB_F_TIMEOUT : WB_F_TIMED, tid(),
            (uintptr_t)s, 0, t0, wb_now());
    return rc;
}

#ifdef WB_NVTX
#include "nvtx_injection.c"
#endif
