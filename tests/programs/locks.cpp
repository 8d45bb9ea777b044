// A program of ours for `workbench record`: two worker threads take turns on one std::mutex
// (named "gpu0 mutex" through NVTX when built with the NVTX headers), meet at a barrier made
// of a std::mutex and a std::condition_variable every round, and mark each round and each
// hold with NVTX ranges. It prints what it did, so a test can check the recording against it.
//
//   locks ROUNDS [ok | exit:N | abort | nolock]
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
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

int main(int argc, char **argv) {
    rounds = argc > 1 ? std::atoi(argv[1]) : 10;
    const char *mode = argc > 2 ? argv[2] : "ok";
    if (std::strcmp(mode, "nolock") == 0) {
        std::printf("nothing locked\n");
        return 0;
    }
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
