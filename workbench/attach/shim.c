/* The recording shim, loaded into an unmodified program by LD_PRELOAD (and named as its
   NVTX injection library): pthread mutexes, condition variables and semaphores, and, when
   built with the NVTX headers (WB_NVTX), NVTX ranges, marks, domains and resource names.

   Each intercepted call adds one or two fixed events to the ring (ring.h): a lock's acquire
   (call start, acquired), its release (taken before the real unlock, so the release of one
   holder is in the ring before the acquire of the next), a condition wait (the mutex released
   at its start and re-acquired at its end) and a semaphore wait.

   The real functions are found with dlsym(RTLD_NEXT) on first use, from whichever comes
   first: this library's constructor or a lock taken by another library's static initialiser
   before it. While that runs (dlsym may lock) the calling thread is marked, and any lock it
   or another thread takes meanwhile goes to glibc's own exported entry points unrecorded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
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

static inline uint32_t tid(void) {
    uint32_t t = wb_tid;
    if (WB_UNLIKELY(!t)) t = wb_tid = wb_gettid();
    return t;
}

static void after_fork(void) {
    wb_pid = (uint32_t)getpid();
    wb_tid = 0; /* the forking thread has a new id in the child */
}

static void *next_symbol(const char *name, const char *version) {
    void *found = version ? dlvsym(RTLD_NEXT, name, version) : NULL;
    return found ? found : dlsym(RTLD_NEXT, name);
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
    if (wb_map(WB_FEATURE_LOCKS)) pthread_atfork(NULL, NULL, after_fork);
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

WB_EXPORT int pthread_mutex_lock(pthread_mutex_t *m) {
    if (WB_UNLIKELY(!RECORDING())) return real_lock ? real_lock(m) : __pthread_mutex_lock(m);
    /* Uncontended, the lock is had at once: one clock reading, a wait of zero. */
    if (real_trylock(m) == 0) {
        uint64_t t = wb_now();
        wb_emit(WB_LOCK, 0, tid(), (uintptr_t)m, 0, t, t);
        return 0;
    }
    uint64_t t0 = wb_now();
    int rc = real_lock(m);
    if (rc == 0) wb_emit(WB_LOCK, 0, tid(), (uintptr_t)m, 0, t0, wb_now());
    return rc;
}

WB_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m) {
    if (WB_UNLIKELY(!RECORDING())) return real_trylock ? real_trylock(m) : __pthread_mutex_trylock(m);
    int rc = real_trylock(m);
    if (rc == 0) {
        uint64_t t = wb_now();
        wb_emit(WB_LOCK, WB_F_TRY, tid(), (uintptr_t)m, 0, t, t);
    }
    return rc;
}

WB_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *until) {
    if (WB_UNLIKELY(!RECORDING() || !real_timedlock)) {
        if (!real_timedlock) real_timedlock = next_symbol("pthread_mutex_timedlock", NULL);
        return real_timedlock(m, until);
    }
    uint64_t t0 = wb_now();
    int rc = real_timedlock(m, until);
    if (rc == 0) wb_emit(WB_LOCK, WB_F_TIMED, tid(), (uintptr_t)m, 0, t0, wb_now());
    return rc;
}

WB_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m) {
    if (WB_UNLIKELY(!RECORDING())) return real_unlock ? real_unlock(m) : __pthread_mutex_unlock(m);
    uint64_t t = wb_now();
    wb_emit(WB_UNLOCK, 0, tid(), (uintptr_t)m, 0, t, t);
    return real_unlock(m);
}

/* A condition wait releases its mutex at the start and holds it again at the end. */
static inline uint64_t cond_begin(pthread_mutex_t *m) {
    uint64_t t0 = wb_now();
    wb_emit(WB_UNLOCK, WB_F_COND, tid(), (uintptr_t)m, 0, t0, t0);
    return t0;
}

static inline void cond_end(pthread_cond_t *c, pthread_mutex_t *m, uint64_t t0, uint16_t flags, int rc) {
    uint64_t t1 = wb_now();
    if (rc == ETIMEDOUT) flags |= WB_F_TIMEOUT;
    wb_emit(WB_COND, flags, tid(), (uintptr_t)c, (uintptr_t)m, t0, t1);
    wb_emit(WB_LOCK, WB_F_COND, tid(), (uintptr_t)m, 0, t1, t1);
}

static void resolve_waits(void) {
    if (!real_cond_wait) real_cond_wait = next_symbol("pthread_cond_wait", "GLIBC_2.3.2");
    if (!real_cond_timedwait) real_cond_timedwait = next_symbol("pthread_cond_timedwait", "GLIBC_2.3.2");
    if (!real_cond_clockwait) real_cond_clockwait = next_symbol("pthread_cond_clockwait", NULL);
    if (!real_sem_wait) real_sem_wait = next_symbol("sem_wait", NULL);
    if (!real_sem_timedwait) real_sem_timedwait = next_symbol("sem_timedwait", NULL);
}

WB_EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
    if (WB_UNLIKELY(!RECORDING())) {
        resolve_waits();
        return real_cond_wait(c, m);
    }
    uint64_t t0 = cond_begin(m);
    int rc = real_cond_wait(c, m);
    cond_end(c, m, t0, 0, rc);
    return rc;
}

WB_EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *until) {
    if (WB_UNLIKELY(!RECORDING())) {
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
    if (WB_UNLIKELY(!RECORDING() || !real_cond_clockwait)) {
        resolve_waits();
        return real_cond_clockwait(c, m, clock, until);
    }
    uint64_t t0 = cond_begin(m);
    int rc = real_cond_clockwait(c, m, clock, until);
    cond_end(c, m, t0, WB_F_TIMED, rc);
    return rc;
}

WB_EXPORT int sem_wait(sem_t *s) {
    if (WB_UNLIKELY(!RECORDING())) {
        resolve_waits();
        return real_sem_wait(s);
    }
    uint64_t t0 = wb_now();
    int rc = real_sem_wait(s);
    wb_emit(WB_SEM, 0, tid(), (uintptr_t)s, 0, t0, wb_now());
    return rc;
}

WB_EXPORT int sem_timedwait(sem_t *s, const struct timespec *until) {
    if (WB_UNLIKELY(!RECORDING())) {
        resolve_waits();
        return real_sem_timedwait(s, until);
    }
    uint64_t t0 = wb_now();
    int rc = real_sem_timedwait(s, until);
    wb_emit(WB_SEM, rc != 0 && errno == ETIMEDOUT ? WB_F_TIMED | WB_F_TIMEOUT : WB_F_TIMED, tid(),
            (uintptr_t)s, 0, t0, wb_now());
    return rc;
}

#ifdef WB_NVTX
#include "nvtx_injection.c"
#endif
