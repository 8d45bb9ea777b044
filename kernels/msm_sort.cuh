// The MSM's first step, shared by msm.cu and the tests' threaded CPU build: each scalar
// recoded into signed c-bit digits, and the (point index | sign << 31) entries sorted by
// bucket, by one of two counting sorts:
//   - msm_count + msm_scatter: one global atomic an entry to count its bucket, a prefix sum
//     on the host side, and one more to claim its slot (at 2^24, 218M entries, 20 ms);
//   - msm_sort_count + msm_sort_stage + msm_sort_buckets: block-local counting in shared
//     memory, no global atomics (below).
// Order inside a bucket varies from run to run; the sum does not.
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

// The block-local counting sort (workbench/gpu/msm.py's SORT = "local"). A bucket g = w * (B + 1) + |d| is split
// into a coarse bin g >> fine_log2 and a fine index g & (2^fine_log2 - 1), the host choosing
// fine_log2 so that at most MSM_SORT_BINS coarse bins exist:
//   1. msm_sort_count: row r of the histogram (scalars [r per_row, (r + 1) per_row)) counts
//      its entries per coarse bin in shared memory and writes hist[bin * rows + r].
//   2. host: an inclusive prefix sum over hist in that order; starts = scan - hist.
//   3. msm_sort_stage: each row scatters (entry, fine index) pairs to its slots of each
//      coarse bin, claimed with shared atomics from its start.
//   4. msm_sort_buckets: one block a coarse bin counts its fine indices in shared memory,
//      scans them into the bins' counts and inclusive ends (so no global prefix sum over the
//      buckets is needed) and scatters the entries to their final slots.
// No global atomics: at 2^24 (218M entries) the atomic count and scatter took 20 ms. The
// loops use blockDim and gridDim only, so with one thread (the CPU build) they still cover
// every row and bin; the shared arrays are then plain arrays.
#define MSM_SORT_BINS 4096
#define MSM_SORT_FINE 2048
#define MSM_SORT_THREADS 256

extern "C" __global__ void __launch_bounds__(MSM_SORT_THREADS)
msm_sort_count(const uint4* scalars, unsigned int* hist, msm_u64 n, unsigned int c, unsigned int windows,
               unsigned int fine_log2, unsigned int bins, msm_u64 rows, msm_u64 per_row)
{
    __shared__ unsigned int local[MSM_SORT_BINS];
    const unsigned int stride = (1u << (c - 1)) + 1u;
    for (msm_u64 row = blockIdx.x; row < rows; row += gridDim.x) {
        for (unsigned int j = threadIdx.x; j < bins; j += blockDim.x) local[j] = 0;
        __syncthreads();
        const msm_u64 begin = row * per_row, end = begin + per_row < n ? begin + per_row : n;
        for (msm_u64 i = begin + threadIdx.x; i < end; i += blockDim.x)
            msm_for_each_digit(msm_scalar(scalars, i), c, windows, [&](unsigned int w, unsigned int d, bool) {
                atomicAdd(local + ((w * stride + d) >> fine_log2), 1u);
            });
        __syncthreads();
        for (unsigned int j = threadIdx.x; j < bins; j += blockDim.x) hist[(msm_u64)j * rows + row] = local[j];
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(MSM_SORT_THREADS)
msm_sort_stage(const uint4* scalars, const long long* indices, unsigned int has_indices,
               const unsigned int* starts, uint2* staged, msm_u64 n, unsigned int c, unsigned int windows,
               unsigned int fine_log2, unsigned int bins, msm_u64 rows, msm_u64 per_row)
{
    __shared__ unsigned int cursor[MSM_SORT_BINS];
    const unsigned int stride = (1u << (c - 1)) + 1u, fine_mask = (1u << fine_log2) - 1u;
    for (msm_u64 row = blockIdx.x; row < rows; row += gridDim.x) {
        for (unsigned int j = threadIdx.x; j < bins; j += blockDim.x) cursor[j] = starts[(msm_u64)j * rows + row];
        __syncthreads();
        const msm_u64 begin = row * per_row, end = begin + per_row < n ? begin + per_row : n;
        for (msm_u64 i = begin + threadIdx.x; i < end; i += blockDim.x) {
            const unsigned int point = has_indices ? (unsigned int)indices[i] : (unsigned int)i;
            msm_for_each_digit(msm_scalar(scalars, i), c, windows,
                               [&](unsigned int w, unsigned int d, bool negative) {
                                   const unsigned int g = w * stride + d;
                                   const unsigned int slot = atomicAdd(cursor + (g >> fine_log2), 1u);
                                   staged[slot] = make_uint2(point | (negative ? MSM_SIGN_BIT : 0u),
                                                             g & fine_mask);
                               });
        }
        __syncthreads();
    }
}

// scan: the inclusive prefix sum of hist (bin-major), so coarse bin b holds staged entries
// [scan[b rows - 1], scan[b rows + rows - 1]).
extern "C" __global__ void __launch_bounds__(MSM_SORT_THREADS)
msm_sort_buckets(const uint2* staged, const unsigned int* scan, unsigned int* entries, unsigned int* counts,
                 unsigned int* ends, msm_u64 buckets, unsigned int fine_log2, unsigned int bins, msm_u64 rows)
{
    __shared__ unsigned int fine[MSM_SORT_FINE];
    __shared__ unsigned int partial[MSM_SORT_THREADS];
    const unsigned int size = 1u << fine_log2, t = threadIdx.x;
    const unsigned int per = (size + blockDim.x - 1) / blockDim.x;
    const unsigned int lo = t * per < size ? t * per : size, hi = lo + per < size ? lo + per : size;
    for (msm_u64 bin = blockIdx.x; bin < bins; bin += gridDim.x) {
        const msm_u64 begin = bin ? scan[bin * rows - 1] : 0, end = scan[bin * rows + rows - 1];
        for (unsigned int j = t; j < size; j += blockDim.x) fine[j] = 0;
        __syncthreads();
        for (msm_u64 e = begin + t; e < end; e += blockDim.x) atomicAdd(fine + staged[e].y, 1u);
        __syncthreads();
        // Exclusive scan of fine[]: each thread sums its run [lo, hi), a scan of those sums
        // over the block (Hillis-Steele), then the thread's run again.
        unsigned int sum = 0;
        for (unsigned int j = lo; j < hi; ++j) sum += fine[j];
        partial[t] = sum;
        __syncthreads();
        for (unsigned int off = 1; off < blockDim.x; off <<= 1) {
            const unsigned int v = t >= off ? partial[t - off] : 0u;
            __syncthreads();
            partial[t] += v;
            __syncthreads();
        }
        unsigned int run = partial[t] - sum;
        for (unsigned int j = lo; j < hi; ++j) {
            const unsigned int count = fine[j];
            const msm_u64 g = (bin << fine_log2) + j;
            if (g < buckets) {
                counts[g] = count;
                ends[g] = (unsigned int)(begin + run + count);
            }
            fine[j] = run;
            run += count;
        }
        __syncthreads();
        for (msm_u64 e = begin + t; e < end; e += blockDim.x) {
            const uint2 s = staged[e];
            entries[begin + atomicAdd(fine + s.y, 1u)] = s.x;
        }
        __syncthreads();
    }
}
