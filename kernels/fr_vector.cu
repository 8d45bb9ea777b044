// Element-wise kernels over Fr vectors in the shared (n, 4) uint64 Montgomery format.
//
// Every kernel is a grid-stride loop, so any grid covers any n; out may be the same array
// as any input (each element is read before it is written, by the same thread).
//
// Canonical-input policy (fr_to_mont): every 256-bit value is accepted and reduced mod r,
// including values >= 2^255; nothing is rejected. Montgomery inputs to the other kernels
// must already be reduced (< r), as the format requires.
// The FP64 product by default (kernels/fr_fp64.cuh): on the H200 an NTT of 2^24 took 4.83 ms
// with it against 5.45 with the integer one, h 29.6 against 34.7 (kernels/NOTES_ntt.md row 6).
#define FR_DEFAULT_FP64
#include "fr.cuh"

#define FR_GRID_STRIDE(i, n) \
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; \
         i < (n); i += (unsigned long long)gridDim.x * blockDim.x)

extern "C" __global__ void fr_add_kernel(uint4* out, const uint4* a, const uint4* b,
                                         unsigned long long n)
{
    FR_GRID_STRIDE(i, n) fr_store(out, i, fr_add(fr_load(a, i), fr_load(b, i)));
}

extern "C" __global__ void fr_sub_kernel(uint4* out, const uint4* a, const uint4* b,
                                         unsigned long long n)
{
    FR_GRID_STRIDE(i, n) fr_store(out, i, fr_sub(fr_load(a, i), fr_load(b, i)));
}

extern "C" __global__ void fr_mul_kernel(uint4* out, const uint4* a, const uint4* b,
                                         unsigned long long n)
{
    FR_GRID_STRIDE(i, n) fr_store(out, i, fr_mul(fr_load(a, i), fr_load(b, i)));
}

// out = a * b - c: the pointwise step of the quotient on the coset.
extern "C" __global__ void fr_mul_sub_kernel(uint4* out, const uint4* a, const uint4* b,
                                             const uint4* c, unsigned long long n)
{
    FR_GRID_STRIDE(i, n)
        fr_store(out, i, fr_sub(fr_mul(fr_load(a, i), fr_load(b, i)), fr_load(c, i)));
}

// out = a * s for one element s (a device pointer, so a constant never needs a recompile).
extern "C" __global__ void fr_scale_kernel(uint4* out, const uint4* a, const uint4* s,
                                           unsigned long long n)
{
    const fr_t k = fr_load_ro(s, 0);
    FR_GRID_STRIDE(i, n) fr_store(out, i, fr_mul(fr_load(a, i), k));
}

extern "C" __global__ void fr_to_mont_kernel(uint4* out, const uint4* a, unsigned long long n)
{
    FR_GRID_STRIDE(i, n) fr_store(out, i, fr_to_mont(fr_load(a, i)));
}

extern "C" __global__ void fr_from_mont_kernel(uint4* out, const uint4* a, unsigned long long n)
{
    FR_GRID_STRIDE(i, n) fr_store(out, i, fr_from_mont(fr_load(a, i)));
}

// out[i] = first * base^i for i < n, where squares[b] = base^(2^b) for b < nbits and
// n <= 2^nbits. Each thread walks a run of consecutive powers, so the cost is one
// multiplication per element plus one power per run.
#define FR_POWERS_RUN 64

extern "C" __global__ void fr_powers_kernel(uint4* out, const uint4* squares, unsigned int nbits,
                                            const uint4* first, unsigned long long n)
{
    const unsigned long long runs = (n + FR_POWERS_RUN - 1) / FR_POWERS_RUN;
    FR_GRID_STRIDE(run, runs) {
        const unsigned long long start = run * FR_POWERS_RUN;
        fr_t acc = fr_load_ro(first, 0);
        for (unsigned int b = 0; b < nbits; ++b)
            if ((start >> b) & 1ull) acc = fr_mul(acc, fr_load_ro(squares, b));
        const fr_t base = fr_load_ro(squares, 0);
        const unsigned long long stop = start + FR_POWERS_RUN < n ? start + FR_POWERS_RUN : n;
        for (unsigned long long i = start; i < stop; ++i) {
            fr_store(out, i, acc);
            acc = fr_mul(acc, base);
        }
    }
}
