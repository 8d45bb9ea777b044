// A program of ours for `workbench record`: two worker threads take turns on one std::mutex
// (named "gpu0 mutex" through NVTX when built with the NVTX headers), meet at a barrier made
// of a std::mutex and a std::condition_variable every round, and mark each round and each
// hold with NVTX ranges. It prints what it did, so a test can check the recording against it.
//
// `handoff`: each round thread 1 first sleeps on a semaphore ("go") until thread 0 posts it,
// then thread 0 takes the gpu mutex, waits until thread 1 is asleep in its own lock call of it
// (the kernel says so), then hands it over; thread 0 also takes a mutex of its own ("quiet")
// and a semaphore of its own ("spare", posted first) three times a round, which never wait.
//
//   locks ROUNDS [ok | exit:N | abort | nolock | handoff]
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <semaphore.h>
#include <unistd.h>
#include <sys/syscall.h>
#ifdef WB_NVTX
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtSync.h>
#define PUSH(name) nvtxRangePushA(name)
#define POP() nvtxRangePop()
#else
#define PUSH(name) ((void)0)
#define POP() ((void)0)
#endif

static std::mutex gpu;
static std::mutex barrier_mutex;
static std::condition_variable barrier_cv;
static int arrived = 0, generation = 0, cond_waits = 0, barrier_calls = 0;
static std::string order;  // which worker took the gpu mutex, in order (written under it)
static int rounds = 10;
static bool crash = false;
static long tids[2];
static int gpu_locks[2];

static void spin_us(int us) {
    auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (std::chrono::steady_clock::now() < until) {}
}

static void barrier() {
    std::unique_lock<std::mutex> lock(barrier_mutex);
    barrier_calls++;
    int mine = generation;
    if (++arrived == 2) {
        arrived = 0;
        generation++;
        barrier_cv.notify_all();
        return;
    }
    while (generation == mine) {
        cond_waits++;
        barrier_cv.wait(lock);
    }
}

static void worker(int id) {
    tids[id] = syscall(SYS_gettid);
    for (int r = 0; r < rounds; r++) {
        PUSH("round");
        {
            std::lock_guard<std::mutex> hold(gpu);
            PUSH("work");
            order.push_back(char('0' + id));
            gpu_locks[id]++;
            if (crash && id == 1 && r == rounds / 2) {
                std::printf("crash_after=%zu\n", order.size());
                std::fflush(stdout);
                std::abort();  // dies holding the gpu mutex, inside two ranges
            }
            spin_us(200);
            POP();
        }
        spin_us(100 * (id + 1));
        barrier();
        POP();
    }
}

static std::mutex quiet;
static std::atomic<int> stage{0}, finished{0};
static std::atomic<long> taker_tid{0};
static int contended = 0, quiet_locks = 0, sem_blocked = 0;
static sem_t go, spare;

static bool asleep(long tid) {
    std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string line;
    std::getline(stat, line);
    size_t end = line.rfind(')');  // the state follows the command name
    return end != std::string::npos && end + 2 < line.size() && line[end + 2] == 'S';
}

static void holder() {
    tids[0] = syscall(SYS_gettid);
    for (int r = 0; r < rounds; r++) {
        while (finished.load() < r) {}
        auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!asleep(taker_tid.load()) && std::chrono::steady_clock::now() < give_up) {}
        if (asleep(taker_tid.load())) sem_blocked++;  // thread 1 sleeps in sem_wait(go)
        sem_post(&go);
        gpu.lock();
        gpu_locks[0]++;
        stage.store(2 * r + 1);
        while (stage.load() != 2 * r + 2) {}
        give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!asleep(taker_tid.load()) && std::chrono::steady_clock::now() < give_up) {}
        if (asleep(taker_tid.load())) contended++;  // thread 1 sleeps in its lock call: it waits for this hold
        spin_us(300);
        gpu.unlock();
        for (int k = 0; k < 3; k++) {
            std::lock_guard<std::mutex> mine(quiet);
            quiet_locks++;
            sem_post(&spare);
            sem_wait(&spare);  // posted just before: had at once
        }
    }
}

static void taker() {
    tids[1] = syscall(SYS_gettid);
    taker_tid.store(tids[1]);
    for (int r = 0; r < rounds; r++) {
        sem_wait(&go);
        while (stage.load() != 2 * r + 1) {}
        stage.store(2 * r + 2);
        gpu.lock();
        gpu_locks[1]++;
        gpu.unlock();
        finished.store(r + 1);
    }
}

static int run_handoff() {
    sem_init(&go, 0, 0);
    sem_init(&spare, 0, 0);
    std::thread b(taker);
    while (!taker_tid.load()) {}
    std::thread a(holder);
    a.join();
    b.join();
    std::printf("gpu_mutex=%p quiet_mutex=%p\n", (void *)gpu.native_handle(), (void *)quiet.native_handle());
    std::printf("tid0=%ld tid1=%ld gpu_locks0=%d gpu_locks1=%d\n", tids[0], tids[1], gpu_locks[0], gpu_locks[1]);
    std::printf("contended=%d quiet_locks=%d rounds=%d\n", contended, quiet_locks, rounds);
    std::printf("go_sem=%p spare_sem=%p sem_blocked=%d\n", (void *)&go, (void *)&spare, sem_blocked);
    return 0;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? std::atoi(argv[1]) : 10;
    const char *mode = argc > 2 ? argv[2] : "ok";
    if (std::strcmp(mode, "nolock") == 0) {
        std::printf("nothing locked\n");
        return 0;
    }
    if (std::strcmp(mode, "handoff") == 0) return run_handoff();
    crash = std::strcmp(mode, "abort") == 0;
#ifdef WB_NVTX
    nvtxResourceAttributes_t named = {};
    named.version = NVTX_VERSION;
    named.size = NVTX_RESOURCE_ATTRIB_STRUCT_SIZE;
    named.identifierType = NVTX_RESOURCE_TYPE_SYNC_PTHREAD_MUTEX;
    named.identifier.pValue = gpu.native_handle();
    named.messageType = NVTX_MESSAGE_TYPE_ASCII;
    named.message.ascii = "gpu0 mutex";
    nvtxDomainResourceCreate(nullptr, &named);
#endif
    std::thread a(worker, 0), b(worker, 1);
    a.join();
    b.join();
    std::printf("gpu_mutex=%p barrier_mutex=%p\n", (void *)gpu.native_handle(), (void *)barrier_mutex.native_handle());
    std::printf("tid0=%ld tid1=%ld gpu_locks0=%d gpu_locks1=%d\n", tids[0], tids[1], gpu_locks[0], gpu_locks[1]);
    std::printf("barrier_calls=%d cond_waits=%d rounds=%d\n", barrier_calls, cond_waits, rounds);
    std::printf("order=%s\n", order.c_str());
#ifdef WB_NVTX
    std::printf("nvtx=1\n");
#endif
    if (std::strncmp(mode, "exit:", 5) == 0) return std::atoi(mode + 5);
    return 0;
}
