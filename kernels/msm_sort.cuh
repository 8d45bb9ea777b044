// The MSM's first step: each scalar recoded into signed c-bit digits, and the (point index |
// sign << 31) entries sorted by bucket by a counting sort, msm_count + msm_scatter: one global
// atomic an entry to count its bucket, a prefix sum on the host side, and one more to claim
// its slot (at 2^24, 218M entries, 20 ms). A block-local counting sort in shared memory, with
// no global atomics, measured slower at every size on the H200 and was removed
// (kernels/NOTES_msm.md, row 4). Order inside a bucket varies from run to run; the sum does not.
#pragma once

#include "fr.cuh"

typedef unsigned long long msm_u64;

#define MSM_GRID_STRIDE(i, n) \
    for (msm_u64 i = blockIdx.x * (msm_u64)blockDim.x + threadIdx.x; i < (n); \
         i += (msm_u64)gridDim.x * blockDim.x)

#define MSM_SIGN_BIT 0x80000000u

// Limb k of a scalar without indexing its array at run time (which would move it to local
// memory).
FR_FN unsigned int msm_limb(const fr_t& s, unsigned int k)
{
    unsigned int v = 0;
#pragma unroll
    for (unsigned int j = 0; j < 8; ++j) v = j == k ? s.l[j] : v;
    return v;
}

// Bits [lo, lo + c) of a 256-bit scalar, c <= 31.
FR_FN unsigned int msm_bits(const fr_t& s, unsigned int lo, unsigned int c)
{
    const unsigned int k = lo >> 5;
    const msm_u64 pair = msm_limb(s, k) | ((msm_u64)msm_limb(s, k + 1) << 32);
    return (unsigned int)(pair >> (lo & 31)) & ((1u << c) - 1u);
}

// Calls f(window, magnitude, negative) for each nonzero signed digit of canonical s < 2^255.
// W * c >= 256 keeps the top window's digit (its raw bits plus the carry) at most B, so it
// is never recoded and no carry is lost.
template <class F>
FR_FN void msm_for_each_digit(const fr_t& s, unsigned int c, unsigned int windows, F f)
{
    const unsigned int half = 1u << (c - 1);
    unsigned int carry = 0;
#pragma unroll 1
    for (unsigned int w = 0; w < windows; ++w) {
        unsigned int d = msm_bits(s, w * c, c) + carry;
        bool negative = false;
        carry = 0;
        if (d > half && w + 1 < windows) {
            d = (1u << c) - d;
            negative = true;
            carry = 1;
        }
        if (d != 0) f(w, d, negative);
    }
}

FR_FN fr_t msm_scalar(const uint4* scalars, msm_u64 i)
{
    return fr_from_mont(fr_load(scalars, i));
}

extern "C" __global__ void msm_count(const uint4* scalars, unsigned int* counts, msm_u64 n,
                                     unsigned int c, unsigned int windows)
{
    const unsigned int stride = (1u << (c - 1)) + 1u;
    MSM_GRID_STRIDE(i, n) {
        msm_for_each_digit(msm_scalar(scalars, i), c, windows,
                           [&](unsigned int w, unsigned int d, bool) {
                               atomicAdd(counts + (msm_u64)w * stride + d, 1u);
                           });
    }
}

// indices (int64) maps scalar i to its point when has_indices; otherwise point i.
extern "C" __global__ void msm_scatter(const uint4* scalars, const long long* indices,
                                       unsigned int has_indices, unsigned int* cursor,
                                       unsigned int* entries, msm_u64 n, unsigned int c,
                                       unsigned int windows)
{
    const unsigned int stride = (1u << (c - 1)) + 1u;
    MSM_GRID_STRIDE(i, n) {
        const unsigned int point = has_indices ? (unsigned int)indices[i] : (unsigned int)i;
        msm_for_each_digit(msm_scalar(scalars, i), c, windows,
                           [&](unsigned int w, unsigned int d, bool negative) {
                               const unsigned int slot =
                                   atomicAdd(cursor + (msm_u64)w * stride + d, 1u);
                               entries[slot] = point | (negative ? MSM_SIGN_BIT : 0u);
                           });
    }
}

// The same sort over precomputed window multiples of the bases (workbench/gpu/msm_tables.py):
// table row w * table_n + i holds 2^(c w) * P_i, so s_i P_i = sum_w d_w * row(w table_n + i)
// and every window's digits go into one set of buckets, bucket |d| (0 stays empty), the
// entry naming the table row. W * table_n < 2^31 (the host checks), below the sign bit.
extern "C" __global__ void msm_count_fixed(const uint4* scalars, unsigned int* counts, msm_u64 n,
                                           unsigned int c, unsigned int windows)
{
    MSM_GRID_STRIDE(i, n) {
        msm_for_each_digit(msm_scalar(scalars, i), c, windows,
                           [&](unsigned int, unsigned int d, bool) { atomicAdd(counts + d, 1u); });
    }
}

extern "C" __global__ void msm_scatter_fixed(const uint4* scalars, const long long* indices,
                                             unsigned int has_indices, unsigned int* cursor,
                                             unsigned int* entries, msm_u64 n, unsigned int c,
                                             unsigned int windows, msm_u64 table_n)
{
    MSM_GRID_STRIDE(i, n) {
        const msm_u64 point = has_indices ? (msm_u64)indices[i] : i;
        msm_for_each_digit(msm_scalar(scalars, i), c, windows,
                           [&](unsigned int w, unsigned int d, bool negative) {
                               const unsigned int slot = atomicAdd(cursor + d, 1u);
                               entries[slot] = (unsigned int)(w * table_n + point) |
                                               (negative ? MSM_SIGN_BIT : 0u);
                           });
    }
}
