/* A program of ours for `workbench record`: two threads take one PTHREAD_MUTEX_RECURSIVE
   mutex nested (lock, lock again, unlock the inner, work, unlock the outer), so a recording
   must see one hold from the outer lock to the outer unlock. Each round thread 0 takes the
   mutex, waits until thread 1 sleeps in its own lock call of it (the kernel says so: the mutex
   is contended from the first round), then lets go; thread 1 then takes it the same way. It
   prints what it did, so a test can check the recording against it.

     recursive ROUNDS */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define AFTER_INNER_US 300 /* held this long after the inner unlock, before the outer one */

static pthread_mutex_t mutex;
static atomic_int stage, finished;
static atomic_long tids[2];
static int rounds = 10, holds[2], contended;

static long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

static void spin_us(long us) {
    long until = now_us() + us;
    while (now_us() < until) {}
}

/* Whether the thread sleeps (state S in /proc): read with plain system calls, no stdio lock. */
static int asleep(long tid) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, line, sizeof line - 1);
    close(fd);
    if (n <= 0) return 0;
    line[n] = 0;
    char *end = strrchr(line, ')'); /* the state follows the command name */
    return end && end[1] == ' ' && end[2] == 'S';
}

static void nested(int id) {
    pthread_mutex_lock(&mutex);
    pthread_mutex_lock(&mutex);
    holds[id]++; /* one hold: the outer lock's */
    if (id == 0) {
        atomic_store(&stage, 1 + 2 * atomic_load(&finished));
        long give_up = now_us() + 5000000;
        while (!asleep(atomic_load(&tids[1])) && now_us() < give_up) {}
        if (asleep(atomic_load(&tids[1]))) contended++; /* thread 1 waits for this hold */
    }
    pthread_mutex_unlock(&mutex);
    spin_us(AFTER_INNER_US);
    pthread_mutex_unlock(&mutex);
}

static void *worker(void *arg) {
    int id = (int)(long)arg;
    atomic_store(&tids[id], (long)syscall(SYS_gettid));
    for (int r = 0; r < rounds; r++) {
        if (id == 0) {
            while (atomic_load(&finished) < r) {}
            nested(0);
        } else {
            while (atomic_load(&stage) != 1 + 2 * r) {}
            nested(1);
            atomic_store(&finished, r + 1);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 10;
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&mutex, &attr);
    pthread_t threads[2];
    pthread_create(&threads[1], NULL, worker, (void *)1L);
    while (!atomic_load(&tids[1])) {}
    pthread_create(&threads[0], NULL, worker, (void *)0L);
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    printf("mutex=%p tid0=%ld tid1=%ld\n", (void *)&mutex, atomic_load(&tids[0]), atomic_load(&tids[1]));
    printf("holds0=%d holds1=%d contended=%d rounds=%d after_inner_us=%d\n", holds[0], holds[1], contended,
           rounds, AFTER_INNER_US);
    return 0;
}
