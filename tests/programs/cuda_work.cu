// A CUDA program of ours for `workbench record` on a GPU machine: copies from pageable and
// pinned memory, kernels on two streams, a memset and synchronisations, counted as it goes
// and printed at the end, so the recording can be checked against what it launched.
//
//   cuda_work ITERATIONS
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void scale(float *x, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a + 1.0f;
}

#define CHECK(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e)); return 1; } } while (0)

int main(int argc, char **argv) {
    int iterations = argc > 1 ? std::atoi(argv[1]) : 50;
    const int n = 1 << 22;
    const size_t bytes = n * sizeof(float);
    float *device = nullptr, *pinned = nullptr;
    std::vector<float> pageable(n, 1.0f);
    CHECK(cudaMalloc(&device, bytes));
    CHECK(cudaMallocHost(&pinned, bytes));
    cudaStream_t streams[2];
    for (auto &s : streams) CHECK(cudaStreamCreate(&s));
    int kernels = 0, h2d_pageable = 0, h2d_pinned = 0, d2h = 0, memsets = 0;
    CHECK(cudaMemset(device, 0, bytes));
    memsets++;
    CHECK(cudaDeviceSynchronize());
    auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; i++) {
        if (i % 2 == 0) {
            CHECK(cudaMemcpy(device, pageable.data(), bytes, cudaMemcpyHostToDevice));
            h2d_pageable++;
        } else {
            CHECK(cudaMemcpyAsync(device, pinned, bytes, cudaMemcpyHostToDevice, streams[0]));
            h2d_pinned++;
        }
        for (int k = 0; k < 4; k++) {
            scale<<<(n + 255) / 256, 256, 0, streams[k % 2]>>>(device, n, 1.0001f);
            kernels++;
        }
        CHECK(cudaStreamSynchronize(streams[0]));
        CHECK(cudaStreamSynchronize(streams[1]));
    }
    CHECK(cudaMemcpy(pinned, device, bytes, cudaMemcpyDeviceToHost));
    d2h++;
    CHECK(cudaDeviceSynchronize());
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
    std::printf("kernels=%d h2d_pageable=%d h2d_pinned=%d d2h=%d memsets=%d loop_ms=%.3f\n", kernels,
                h2d_pageable, h2d_pinned, d2h, memsets, ms);
    return 0;
}
