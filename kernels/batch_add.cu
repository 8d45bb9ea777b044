// Sum of the G1 or G2 points whose bit is set in a bitmap. With many selected points, their
// indices are compacted by the host and halved in affine rounds (batch_affine.cuh's
// affine_round), then affine_chunk_sums and xyzz_sum_groups finish; with few, the kernels
// below work straight from the bitmap. The hybrid method at the end of this file (a switch,
// affine_rounds.BATCH_ADD) halves slices of the bitmap twice inside each thread instead.
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

// The hybrid method (workbench/gpu/msm.py, batch_add_sets, when affine_rounds.BATCH_ADD is
// "hybrid"; not the default until timed): no compaction and no host read-back. A slice is
// `words` 64-bit words of one set's bitmap; thread t halves the selected points of its slices
// t, t + threads, ... in two affine rounds inside the thread (round 0 pairs consecutive
// selected points straight from the table, round 1 the thread's own sums, each round's
// divisions sharing one inversion), so that a slice of 256 bits half set runs rounds of k = 64
// and 32, where the per-thread inversion still pays; the at most 16 * words points a slice
// leaves go to `left` (point j of slice g at j * total + g, total = sets * slices, so that the
// threads of a warp touch consecutive entries) with their count, and batch_slice_sums adds
// them up in XYZZ: the mixed addition's code stays out of the rounds' hot loop. Rounds down
// to one point inside a thread (batch_add_local, removed) measured slower than compaction on
// the H200: their late rounds paid an inversion for a handful of additions (NOTES_msm.md 3b).
#define BATCH_HYBRID_ROUNDS 2

template <class F>
EC_KERNEL_BODY void batch_add_slices_body(const uint4* points, const unsigned char* bitmap, uint4* left,
                                          unsigned int* counts, uint4* slots, uint4* prefix,
                                          unsigned int* picks, batch_u64 n, batch_u64 slices, batch_u64 total,
                                          batch_u64 threads, unsigned int words, unsigned int binary)
{
    BATCH_GRID_STRIDE(t, threads) {
#pragma unroll 1
        for (batch_u64 g = t; g < total; g += threads) {
            const batch_u64 begin = (g % slices) * 64ull * words;
            const batch_u64 end = begin + 64ull * words < n ? begin + 64ull * words : n;
            const batch_u64 base = (g / slices) * n + begin;  // the slice's first point in the table
            unsigned int count = 0, pending = 0;
#pragma unroll 1
            for (batch_u64 first = begin; first < end; first += 64) {
                batch_u64 bits = batch_word(bitmap, first, n);
#pragma unroll 1
                while (bits) {
                    const unsigned int at = (unsigned int)(first - begin) + batch_ctz(bits);
                    bits &= bits - 1;
                    if (count & 1) picks[(count / 2) * threads + t] = pending | (at << 16);
                    else pending = at;
                    ++count;
                }
            }
            // Round 0 reads the table and writes the thread's slots, round 1 reads the slots and
            // writes `left`; one copy of each pass serves both.
            unsigned int round = 0;
#pragma unroll 1
            for (; round < BATCH_HYBRID_ROUNDS && count > 1; ++round) {
                const bool from_table = round == 0;
                const uint4* src = from_table ? points : slots;
                uint4* dst = from_table ? slots : left;
                const batch_u64 dst_stride = from_table ? threads : total, dst_at = from_table ? t : g;
                const unsigned int half = count / 2;
                F acc = fe_one<F>();
#pragma unroll 1
                for (unsigned int q = 0; q < half; ++q) {
                    const unsigned int pick = from_table ? picks[q * threads + t] : 0u;
                    const batch_u64 i0 = from_table ? base + (pick & 0xffffu) : 2 * q * threads + t;
                    const batch_u64 i1 = from_table ? base + (pick >> 16) : i0 + threads;
                    acc = ba_mul(acc, ba_pair_denominator<F>(src, i0, i1));
                    fe_store(prefix, q * threads + t, acc);
                }
                F inv = fe_inv_batch(acc, binary);
#pragma unroll 1
                for (unsigned int q = half; q-- > 0;) {
                    const unsigned int pick = from_table ? picks[q * threads + t] : 0u;
                    const batch_u64 i0 = from_table ? base + (pick & 0xffffu) : 2 * q * threads + t;
                    const batch_u64 i1 = from_table ? base + (pick >> 16) : i0 + threads;
                    const ec_affine<F> p = ec_affine_load<F>(src, i0), r = ec_affine_load<F>(src, i1);
                    const int kind = ba_classify(p, r, true);
                    const F den = ba_denominator(p, r, kind);
                    // 1 / den = inv * (the product of the denominators before it).
                    const F den_inv = q == 0 ? inv : ba_mul(inv, fe_load<F>(prefix, (q - 1) * threads + t));
                    inv = ba_mul(inv, den);
                    ec_affine_store(dst, q * dst_stride + dst_at, ba_pair_sum(p, r, kind, den_inv));
                }
                if (count & 1) {
                    const ec_affine<F> last = from_table ? ec_affine_load<F>(points, base + pending)
                                                         : ec_affine_load<F>(slots, (count - 1) * threads + t);
                    ec_affine_store(dst, half * dst_stride + dst_at, last);
                }
                count = half + (count & 1);
            }
            if (round < BATCH_HYBRID_ROUNDS && count == 1)  // the rounds stopped early: move the point
                ec_affine_store(left, g, round == 0 ? ec_affine_load<F>(points, base + pending)
                                                    : ec_affine_load<F>(slots, t));
            counts[g] = count;
        }
    }
}

// Partial u of set q (per_set a power of two, at least the slices of a set) sums the points
// slice q * slices + u left; partials past the set's slices are infinity.
template <class F>
EC_KERNEL_BODY void batch_slice_sums_body(const uint4* left, const unsigned int* counts, uint4* partials,
                                          batch_u64 slices, batch_u64 total, batch_u64 per_set, batch_u64 sets)
{
    BATCH_GRID_STRIDE(i, sets * per_set) {
        const batch_u64 q = i / per_set, u = i % per_set;
        ec_xyzz<F> acc = ec_infinity<F>();
        if (u < slices) {
            const batch_u64 g = q * slices + u;
#pragma unroll 1
            for (unsigned int j = 0; j < counts[g]; ++j)
                acc = ec_add_affine_inline(acc, ec_affine_load<F>(left, j * total + g));
        }
        ec_xyzz_store(partials, i, acc);
    }
}

#define BATCH_HYBRID_KERNELS(suffix, F)                                                           \
    extern "C" __global__ void __launch_bounds__(128) batch_add_slices##suffix(                   \
        const uint4* points, const unsigned char* bitmap, uint4* left, unsigned int* counts,      \
        uint4* slots, uint4* prefix, unsigned int* picks, batch_u64 n, batch_u64 slices,          \
        batch_u64 total, batch_u64 threads, unsigned int words, unsigned int binary)              \
    {                                                                                             \
        batch_add_slices_body<F>(points, bitmap, left, counts, slots, prefix, picks, n, slices,   \
                                 total, threads, words, binary);                                  \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(128) batch_slice_sums##suffix(                   \
        const uint4* left, const unsigned int* counts, uint4* partials, batch_u64 slices,         \
        batch_u64 total, batch_u64 per_set, batch_u64 sets)                                       \
    {                                                                                             \
        batch_slice_sums_body<F>(left, counts, partials, slices, total, per_set, sets);           \
    }

BATCH_HYBRID_KERNELS(, fp_t)
BATCH_HYBRID_KERNELS(_g2, fp2_t)
