// Sum of the G1 or G2 points whose bit is set in a bitmap. With many selected points, their
// indices are compacted by the host and halved in affine rounds (batch_affine.cuh's
// affine_round), then affine_chunk_sums and xyzz_sum_groups finish; with few, the kernels
// below work straight from the bitmap. (A method without compaction, every thread halving
// its own slices of the bitmap, measured slower on the H200 and was removed:
// kernels/NOTES_msm.md, rows 3-3b.)
//
// The bitmap path (bit i % 8 of byte i / 8, the packed
// "scalar == 1" selections that prep_msm builds), as a parallel tree reduction:
//   batch_add_chunks: thread t adds the selected points among [t * chunk, (t + 1) * chunk)
//     into an XYZZ partial (mixed additions, the bulk of the work);
//   xyzz_sum_groups, repeated by the host until one point is left: thread t adds `group`
//     consecutive partials.
// A thread walks the set bits of its slice 64 at a time (count trailing zeros), not every
// index: testing each bit would leave the threads of a warp whose bit is clear idle while
// the others add, half the lanes at a density of one half. A fixed slice per thread keeps
// the work per thread within a binomial spread and needs no compaction pass. As in msm.cu,
// every kernel is a grid-stride loop without shared memory, so any grid is correct and the
// CI tests can run it on the CPU.
#include "g1.cuh"
#include "g2.cuh"
#include "batch_affine.cuh"

typedef unsigned long long batch_u64;

#define BATCH_GRID_STRIDE(i, n) \
    for (batch_u64 i = blockIdx.x * (batch_u64)blockDim.x + threadIdx.x; i < (n); \
         i += (batch_u64)gridDim.x * blockDim.x)

FP_FN int batch_ctz(batch_u64 x)
{
#if defined(__CUDA_ARCH__)
    return __ffsll((long long)x) - 1;
#else
    return __builtin_ctzll(x);
#endif
}

// Bits [first, first + 64) of the bitmap, first a multiple of 64, those at or past n clear.
FP_FN batch_u64 batch_word(const unsigned char* bitmap, batch_u64 first, batch_u64 n)
{
    const batch_u64 bytes = (n + 7) / 8;
    batch_u64 bits = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        const batch_u64 at = first / 8 + k;
        if (at < bytes) bits |= (batch_u64)bitmap[at] << (8 * k);
    }
    if (n - first < 64) bits &= (1ull << (n - first)) - 1;
    return bits;
}

// chunk is a multiple of 64.
template <class F>
EC_KERNEL_BODY void batch_add_chunks_body(const uint4* points, const unsigned char* bitmap,
                                          uint4* partials, batch_u64 n, batch_u64 chunks,
                                          unsigned int chunk)
{
    BATCH_GRID_STRIDE(t, chunks) {
        const batch_u64 begin = t * chunk;
        const batch_u64 end = begin + chunk < n ? begin + chunk : n;
        ec_xyzz<F> acc = ec_infinity<F>();
#pragma unroll 1
        for (batch_u64 first = begin; first < end; first += 64) {
            batch_u64 bits = batch_word(bitmap, first, n);
#pragma unroll 1
            while (bits) {
                const int j = batch_ctz(bits);
                bits &= bits - 1;
                acc = ec_add_affine_inline(acc, ec_affine_load<F>(points, first + j));
            }
        }
        ec_xyzz_store(partials, t, acc);
    }
}

template <class F>
EC_KERNEL_BODY void xyzz_sum_groups_body(const uint4* in, uint4* out, batch_u64 n_in, batch_u64 n_out,
                                         unsigned int group)
{
    BATCH_GRID_STRIDE(t, n_out) {
        const batch_u64 begin = t * group;
        const batch_u64 end = begin + group < n_in ? begin + group : n_in;
        ec_xyzz<F> acc = ec_infinity<F>();
#pragma unroll 1
        for (batch_u64 i = begin; i < end; ++i) acc = ec_add(acc, ec_xyzz_load<F>(in, i));
        ec_xyzz_store(out, t, acc);
    }
}

// The kernels of each group: G1 under the plain names, G2 with the suffix _g2.
#define BATCH_KERNELS(suffix, F)                                                                  \
    extern "C" __global__ void __launch_bounds__(128) batch_add_chunks##suffix(                   \
        const uint4* points, const unsigned char* bitmap, uint4* partials, batch_u64 n,           \
        batch_u64 chunks, unsigned int chunk)                                                     \
    {                                                                                             \
        batch_add_chunks_body<F>(points, bitmap, partials, n, chunks, chunk);                     \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(128) xyzz_sum_groups##suffix(                    \
        const uint4* in, uint4* out, batch_u64 n_in, batch_u64 n_out, unsigned int group)         \
    {                                                                                             \
        xyzz_sum_groups_body<F>(in, out, n_in, n_out, group);                                     \
    }

BATCH_KERNELS(, fp_t)
BATCH_KERNELS(_g2, fp2_t)

// The affine rounds of batch_affine.cuh: the selected points, compacted on the host side into
// one run per set, are halved while the rounds are large, and affine_chunk_sums adds up what
// is left (workbench/gpu/msm.py, batch_add).
BA_ROUND_KERNEL(, fp_t)
BA_ROUND_KERNEL(_g2, fp2_t)
BA_CHUNK_KERNEL(, fp_t)
BA_CHUNK_KERNEL(_g2, fp2_t)
