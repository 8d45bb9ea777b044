// A launch-bound CUDA loop of ours for `benchmarks/record_gpu.py`: what the recording costs
// each launch, without an interpreter's start-up (a run is well under a second), so that every
// knob of the shims can be timed alone, many runs each.
//
//   launch_loop STEPS [KERNELS] [GAP_US] [LOCKS]
//
// A step is a memset, KERNELS launches of a tiny kernel on the default stream, GAP_US of host
// work (a busy wait) before each launch, LOCKS lock-and-unlock pairs of one std::mutex spread
// over the launches, and a device synchronisation: the shape of a small training step (a
// Python one has ~50 us of host work a launch), with the GPU mostly idle. Prints the step's
// mean wall time over all STEPS, and over each fifth of them.
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

__global__ void tiny(float *x) { x[threadIdx.x] += 1.0f; }

#define CHECK(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e)); return 1; } } while (0)

using Clock = std::chrono::steady_clock;

static void busy(double us) {
    auto until = Clock::now() + std::chrono::duration<double, std::micro>(us);
    while (Clock::now() < until) {}
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? std::atoi(argv[1]) : 2000;
    int kernels = argc > 2 ? std::atoi(argv[2]) : 25;
    double gap = argc > 3 ? std::atof(argv[3]) : 10.0;
    int locks = argc > 4 ? std::atoi(argv[4]) : 0;
    if (steps < 5 || kernels < 1) {
        std::fprintf(stderr, "launch_loop STEPS>=5 [KERNELS>=1] [GAP_US] [LOCKS]\n");
        return 2;
    }
    float *x = nullptr;
    CHECK(cudaMalloc(&x, 4096));
    std::mutex m;
    volatile int shared = 0;
    long launched = 0, memsets = 0;
    auto step = [&]() -> int {
        CHECK(cudaMemsetAsync(x, 0, 4096, 0));
        memsets++;
        for (int k = 0; k < kernels; k++) {
            busy(gap);
            for (int l = k; l < locks; l += kernels) {
                std::lock_guard<std::mutex> held(m);
                shared = shared + 1;
            }
            tiny<<<1, 128>>>(x);
            launched++;
        }
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        return 0;
    };
    for (int i = 0; i < 50; i++)  // warm-up: the module, the first launches
        if (step()) return 1;
    const int blocks = 5;
    double block_us[blocks];
    auto began = Clock::now();
    for (int b = 0; b < blocks; b++) {
        auto from = Clock::now();
        int n = steps / blocks + (b < steps % blocks);
        for (int i = 0; i < n; i++)
            if (step()) return 1;
        block_us[b] = std::chrono::duration<double, std::micro>(Clock::now() - from).count() / n;
    }
    double total = std::chrono::duration<double, std::micro>(Clock::now() - began).count();
    std::printf("steps=%d kernels=%ld memsets=%ld launches_per_step=%d gap_us=%.1f locks_per_step=%d step_us=%.3f",
                steps, launched, memsets, kernels, gap, locks, total / steps);
    std::printf(" block_us=");
    for (int b = 0; b < blocks; b++) std::printf("%s%.3f", b ? "," : "", block_us[b]);
    std::printf("\n");
    return 0;
}
