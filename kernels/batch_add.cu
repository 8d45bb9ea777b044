// Sum of the G1 or G2 points whose bit is set in a bitmap, by one of two methods
// (workbench/gpu/affine_rounds.py, BATCH_ADD): batch_add_local at the end of this file, every
// thread halving its own slices of the bitmap in affine rounds; or, with many selected points,
// their indices compacted by the host and halved in affine rounds (batch_affine.cuh's
// affine_round), then affine_chunk_sums and xyzz_sum_groups finish; with few, the kernels
// below work straight from the bitmap.
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

// The bitmap path with affine rounds inside each thread (workbench/gpu/msm.py,
// batch_add_sets, when affine_rounds.BATCH_ADD is "local"): a slice is `words` 64-bit words of
// one set's bitmap, and thread u of a set's per_set threads sums the selected points of its
// slices u, u + per_set, ... alone, so no compaction pass, no host read-back and one launch;
// a fixed number of threads bounds the scratch. A slice's points are halved in rounds down to
// one: round 0 pairs consecutive selected points of the table (a first walk over the bits
// writes each pair's offsets in the slice, 16 bits each, to the picks), the later rounds the
// thread's own sums, in scratch slots that alternate between two buffers (slot q of a thread
// at q * threads + t: the lanes of a warp touch consecutive words). Each round's divisions
// share one inversion (Montgomery's trick, as in affine_round_body). With 2^16 threads over
// 2^24 bits half set, a slice's rounds have k = 64, 32, ..., 1 pairs.
//
// Every round runs the same two loops, with the inputs' addresses picked per round, so the
// kernel's hot code is one copy of each pass. On the H200, 2^24 bits half set: a first version
// with a loop copy per kind of round and an XYZZ tail took 15.3 ms, this one 12.9, against
// 10.0 for the compaction path (ncu: its warps wait on instruction fetch for 60 % of their
// cycles, and a slice's late rounds pay an inversion for a few additions), so it is not the
// default (kernels/NOTES_msm.md, rows 3-3b). The slice's point
// joins the thread's XYZZ partial (kept in memory between slices) by a mixed addition only
// when the thread has several slices.
template <class F>
FP_FN void batch_local_inputs(const uint4* points, const uint4* src, const unsigned int* picks, bool first,
                              batch_u64 base, unsigned int q, batch_u64 threads, batch_u64 t,
                              const uint4*& from, batch_u64& i0, batch_u64& i1)
{
    if (first) {
        const unsigned int pick = picks[q * threads + t];
        from = points;
        i0 = base + (pick & 0xffffu);
        i1 = base + (pick >> 16);
    } else {
        from = src;
        i0 = 2 * q * threads + t;
        i1 = i0 + threads;
    }
}

template <class F>
EC_KERNEL_BODY void batch_add_local_body(const uint4* points, const unsigned char* bitmap, uint4* partials,
                                         uint4* slots_a, uint4* slots_b, uint4* prefix, unsigned int* picks,
                                         batch_u64 n, batch_u64 slices, batch_u64 per_set, batch_u64 threads,
                                         unsigned int words, unsigned int binary)
{
    BATCH_GRID_STRIDE(t, threads) {
        const batch_u64 set_base = (t / per_set) * n;  // the set's first point in the table
        if (t % per_set >= slices) ec_xyzz_store(partials, t, ec_infinity<F>());
#pragma unroll 1
        for (batch_u64 slice = t % per_set; slice < slices; slice += per_set) {
            const batch_u64 begin = slice * 64ull * words;
            const batch_u64 end = begin + 64ull * words < n ? begin + 64ull * words : n;
            const batch_u64 base = set_base + begin;
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
            bool first = true;
            const uint4* src = points;
            uint4* dst = slots_a;
#pragma unroll 1
            while (count > 1) {
                const unsigned int half = count / 2;
                F acc = fe_one<F>();
#pragma unroll 1
                for (unsigned int q = 0; q < half; ++q) {
                    const uint4* from;
                    batch_u64 i0, i1;
                    batch_local_inputs<F>(points, src, picks, first, base, q, threads, t, from, i0, i1);
                    acc = fe_mul(acc, ba_pair_denominator<F>(from, i0, i1));
                    fe_store(prefix, q * threads + t, acc);
                }
                F inv = fe_inv_batch(acc, binary);
#pragma unroll 1
                for (unsigned int q = half; q-- > 0;) {
                    const uint4* from;
                    batch_u64 i0, i1;
                    batch_local_inputs<F>(points, src, picks, first, base, q, threads, t, from, i0, i1);
                    const ec_affine<F> p = ec_affine_load<F>(from, i0), r = ec_affine_load<F>(from, i1);
                    const int kind = ba_classify(p, r, true);
                    const F den = ba_denominator(p, r, kind);
                    // 1 / den = inv * (the product of the denominators before it).
                    const F den_inv = q == 0 ? inv : fe_mul(inv, fe_load<F>(prefix, (q - 1) * threads + t));
                    inv = fe_mul(inv, den);
                    ec_affine_store(dst, q * threads + t, ba_pair_sum(p, r, kind, den_inv));
                }
                if (count & 1) {
                    const ec_affine<F> last = first ? ec_affine_load<F>(points, base + pending)
                                                    : ec_affine_load<F>(src, (count - 1) * threads + t);
                    ec_affine_store(dst, half * threads + t, last);
                }
                count = half + (count & 1);
                first = false;
                src = dst;
                dst = dst == slots_a ? slots_b : slots_a;
            }
            ec_affine<F> sum;
            if (count == 0) {
                sum.x = fe_zero<F>(); sum.y = sum.x;
            } else {
                sum = first ? ec_affine_load<F>(points, base + pending) : ec_affine_load<F>(src, t);
            }
            ec_xyzz_store(partials, t, slice < per_set ? ec_from_affine(sum)
                                                       : ec_add_affine(ec_xyzz_load<F>(partials, t), sum));
        }
    }
}

#define BATCH_LOCAL_KERNEL(suffix, F)                                                             \
    extern "C" __global__ void __launch_bounds__(128) batch_add_local##suffix(                    \
        const uint4* points, const unsigned char* bitmap, uint4* partials, uint4* slots_a,        \
        uint4* slots_b, uint4* prefix, unsigned int* picks, batch_u64 n, batch_u64 slices,        \
        batch_u64 per_set, batch_u64 threads, unsigned int words, unsigned int binary)            \
    {                                                                                             \
        batch_add_local_body<F>(points, bitmap, partials, slots_a, slots_b, prefix, picks, n,      \
                                slices, per_set, threads, words, binary);                         \
    }

BATCH_LOCAL_KERNEL(, fp_t)
BATCH_LOCAL_KERNEL(_g2, fp2_t)
