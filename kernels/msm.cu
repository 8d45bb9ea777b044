// Pippenger multi-scalar multiplication over BLS12-381 G1 and G2, plus the point-format kernels
// the host side needs (to and from Montgomery form; fixed-base multiplication is in fixed_base.cu).
//
// Pipeline for sum_i s_i * P_i with c-bit windows (workbench/gpu/msm.py drives it):
//   1. msm_sort.cuh: each scalar (Montgomery Fr, converted there) is recoded into
//      W = ceil(256/c) signed digits in (-2^(c-1), 2^(c-1)]; a nonzero digit d of window w is
//      bucket w * (B + 1) + |d| with B = 2^(c-1). Signed digits halve the buckets (P and -P
//      share one, the sign travels with the entry). Bucket |d| = 0 of each window stays
//      empty; keeping it makes the bucket index equal the digit's weight. The entries
//      (point index | sign << 31) are sorted by bucket by a counting sort, which also gives
//      each bucket's count and inclusive end.
//   2. affine_round (batch_affine.cuh), repeated while the host's rule says it pays: each
//      bucket's points are added in pairs in affine coordinates, a thread's batch of k sums
//      sharing one inversion, which halves every bucket; the first round reads the table
//      through the entries, the later ones the previous round's output, and after the last
//      the entries simply count 0, 1, ... over that output.
//   3. msm_accumulate: thread t adds the affine points of sorted entries [t K, t K + K) into
//      XYZZ sums, whatever buckets they fall in, so every thread does the same K additions
//      (cutting per bucket instead left ~30% of each warp idle: bucket sizes vary). A bucket
//      wholly inside a slice is stored as it is; the pieces at a slice's two ends go aside.
//   4. msm_bucket_sum: one thread per bucket adds its pieces, at most K_max / K + 1 of them.
//      K = max(k0, ceil(sqrt(largest bucket))) bounds that serial chain to about sqrt(n)
//      when one bucket holds every point (all scalars equal, say).
//   5. msm_reduce_step, repeated while rows are long, then a suffix scan (msm_suffix_step,
//      msm_scan_terms, msm_sum_groups): per window, sum_j j * S_j over the buckets (see the
//      kernels).
//   6. host: the W window sums are combined as sum_w 2^(c w) * T_w. That chain of 255
//      doublings is inherently serial; one GPU thread runs it slower than the host does.
//
// With precomputed window multiples of the bases (msm_window_table below, msm_sort.cuh's
// *_fixed sort), step 1 puts every window's digits into one set of 2^(c-1) + 1 buckets, the
// entries naming rows 2^(c w) * P_i of the table, so steps 2-4 run over deeper buckets, step 5
// runs once, and step 6 has one window sum to combine.
//
// At 2^24 (c = 20, 13 windows, mean 32 entries a bucket) the rounds take the buckets down to one
// or two points each, so step 3 adds a few million points instead of 218 million.
//
// Every kernel is a grid-stride loop with no shared memory, barriers or warp intrinsics, so
// any grid is correct, and the whole pipeline also runs on the CPU with a grid of one thread
// (the CI tests compile this file with a host compiler and run it that way).
#include "fr.cuh"
#include "g1.cuh"
#include "g2.cuh"
#include "batch_affine.cuh"
#include "msm_sort.cuh"

// Entries per thread: at least k0 (the host picks about twice the mean bucket load) and at
// least ceil(sqrt(largest)), which keeps the sum of a bucket's pieces short.
FP_FN msm_u64 msm_slice_size(unsigned int largest, unsigned int k0)
{
    unsigned int r = 0;
#pragma unroll
    for (int b = 15; b >= 0; --b) {
        const unsigned int t = r | (1u << b);
        if (t * t <= largest) r = t;
    }
    if (r * r < largest) ++r;
    return r > k0 ? r : k0;
}

// Where a run of one bucket inside slice t goes: a run at the slice's start to heads[t] (it
// may continue a bucket from earlier slices), else a run at its end to tails[t] (it may go
// on into later ones), else the run is the whole bucket.
template <class F>
FP_FN void msm_store_run(uint4* heads, uint4* tails, uint4* sums, msm_u64 t, msm_u64 bucket,
                         bool at_start, bool at_end, const ec_xyzz<F>& acc)
{
    if (at_start) ec_xyzz_store(heads, t, acc);
    else if (at_end) ec_xyzz_store(tails, t, acc);
    else ec_xyzz_store(sums, bucket, acc);
}

// max_slices is the host's upper bound on the slice count (entries / k0), so the launch
// needs no read-back; largest is the largest bucket count, on the device.
template <class F>
EC_KERNEL_BODY void msm_accumulate_body(const uint4* points, const unsigned int* entries,
                                        const unsigned int* bucket_ends, const unsigned int* largest,
                                        uint4* heads, uint4* tails, uint4* sums, msm_u64 buckets,
                                        msm_u64 max_slices, unsigned int k0)
{
    const msm_u64 total = bucket_ends[buckets - 1];
    const msm_u64 size = msm_slice_size(*largest, k0);
    MSM_GRID_STRIDE(t, max_slices) {
        const msm_u64 begin = t * size;
        if (begin >= total) break;
        const msm_u64 end = begin + size < total ? begin + size : total;
        msm_u64 lo = 0, hi = buckets - 1;  // the bucket of entry `begin`: first end past it
        while (lo < hi) {
            const msm_u64 mid = (lo + hi) / 2;
            if (bucket_ends[mid] > begin) hi = mid; else lo = mid + 1;
        }
        msm_u64 bucket = lo, bucket_end = bucket_ends[lo], run = begin;
        ec_xyzz<F> acc = ec_infinity<F>();
#pragma unroll 1
        for (msm_u64 e = begin; e < end; ++e) {
            if (e == bucket_end) {
                msm_store_run(heads, tails, sums, t, bucket, run == begin, false, acc);
                acc = ec_infinity<F>();
                run = e;
                do bucket_end = bucket_ends[++bucket]; while (bucket_end <= e);  // skip empty ones
            }
            const unsigned int entry = entries[e];
            ec_affine<F> p = ec_affine_load<F>(points, entry & ~MSM_SIGN_BIT);
            if (entry & MSM_SIGN_BIT) p = ec_affine_neg(p);
            acc = ec_add_affine_inline(acc, p);
        }
        msm_store_run(heads, tails, sums, t, bucket, run == begin, true, acc);
    }
}

// The buckets msm_accumulate did not store whole: the sum of their pieces (see
// msm_store_run), or infinity for an empty bucket.
template <class F>
EC_KERNEL_BODY void msm_bucket_sum_body(const uint4* heads, const uint4* tails, const unsigned int* counts,
                                        const unsigned int* bucket_ends, const unsigned int* largest,
                                        uint4* sums, msm_u64 buckets, unsigned int k0)
{
    const msm_u64 total = bucket_ends[buckets - 1];
    const msm_u64 size = msm_slice_size(*largest, k0);
    MSM_GRID_STRIDE(b, buckets) {
        const unsigned int count = counts[b];
        if (count == 0) {
            ec_xyzz_store(sums, b, ec_infinity<F>());
            continue;
        }
        const msm_u64 end = bucket_ends[b], start = end - count;
        const msm_u64 first = start / size, last = (end - 1) / size;
        const bool at_start = start == first * size;
        const msm_u64 first_end = (first + 1) * size < total ? (first + 1) * size : total;
        if (first == last && !at_start && end != first_end) continue;  // stored whole
        ec_xyzz<F> acc = at_start ? ec_xyzz_load<F>(heads, first) : ec_xyzz_load<F>(tails, first);
#pragma unroll 1
        for (msm_u64 t = first + 1; t <= last; ++t) acc = ec_add(acc, ec_xyzz_load<F>(heads, t));
        ec_xyzz_store(sums, b, acc);
    }
}

// One level of the weighted sum WS(X) = sum_i i * X_i, per window (rows of m_in points).
// Cutting X into segments of L = 2^seg_log2, i = s L + j:
//   WS(X) = sum_s Aw_s + L * WS(U),  Aw_s = sum_j j * X_{sL+j},  U_s = sum_j X_{sL+j},
// and Aw_s is a running sum inside the segment (2L additions, no multiplications). The scale
// is kept pending rather than applied to every A: the input invariant is
// total = sum A + 2^pending * WS(X), so a level emits
//   A'_s = sum_j A_{sL+j} + 2^pending * Aw_s   and   X'_s = 2^pending * U_s,
// and the next level's pending scale is this level's seg_log2. Each output then doubles
// 2 * pending times (at most 8) instead of the cumulative scale (up to c - 1 = 19 at the last
// levels, in the scaled form this replaced: kernels/NOTES_msm.md, row 4a), and these levels
// run few threads, so each serial doubling costs its full latency. When a row is one point
// long, WS of it is zero and the row's A is the window's sum.
// The running sums' addition: inlined for G1 (no call spills in the hot loop); a call for G2,
// whose inlined form spills (ptxas for sm_90: 2.7 KB of spill stores a thread, against none
// for G1's).
template <class F>
FP_FN ec_xyzz<F> msm_running_add(const ec_xyzz<F>& p, const ec_xyzz<F>& q) { return ec_add_inline(p, q); }
template <>
FP_FN ec_xyzz<fp2_t> msm_running_add(const ec_xyzz<fp2_t>& p, const ec_xyzz<fp2_t>& q) { return ec_add(p, q); }

template <class F>
EC_KERNEL_BODY void msm_reduce_step_body(const uint4* x_in, const uint4* a_in, unsigned int has_a,
                                         uint4* u_out, uint4* a_out, msm_u64 windows, msm_u64 m_in,
                                         msm_u64 m_out, unsigned int seg_log2, unsigned int pending_log2)
{
    const msm_u64 seg = 1ull << seg_log2;
    MSM_GRID_STRIDE(idx, windows * m_out) {
        const msm_u64 w = idx / m_out, s = idx % m_out;
        const msm_u64 row = w * m_in, first = s * seg;
        ec_xyzz<F> running = ec_infinity<F>(), weighted = running, plain = running;
        // One loop for all seg inputs (the weighted sum skips j = 0), so that the two inlined
        // additions appear once in the code.
#pragma unroll 1
        for (msm_u64 j = seg; j-- > 0;) {
            if (first + j < m_in) {
                running = msm_running_add(running, ec_xyzz_load<F>(x_in, row + first + j));
                if (has_a) plain = ec_add(plain, ec_xyzz_load<F>(a_in, row + first + j));
            }
            if (j >= 1) weighted = msm_running_add(weighted, running);
        }
        ec_xyzz_store(u_out, w * m_out + s, ec_dbl_n(running, pending_log2));  // running is dead after
        ec_xyzz_store(a_out, w * m_out + s, ec_add(plain, ec_dbl_n(weighted, pending_log2)));
    }
}

// The last levels as a scan (REDUCE = "scan"): once a row of X is short (m points), per
// window WS(X) = sum_{j >= 1} S_j with S_j = sum_{i >= j} X_i, the suffix sums, which a
// Hillis-Steele scan gives in log2(m) steps of one addition each (msm_suffix_step), with no
// doubling; then T_j = A_j + 2^pending S_j (S_0 left out; msm_scan_terms) and a tree of group
// sums (msm_sum_groups) give total = sum_j T_j. The levels' serial chain (3 L additions and
// the doublings a level) is what these few-thread passes cost, so depth is their time: at
// m = 2049 about 12 + pending + 3 * 6 operations against 6 levels of about 16.
template <class F>
EC_KERNEL_BODY void msm_suffix_step_body(const uint4* in, uint4* out, msm_u64 windows, msm_u64 m, msm_u64 off)
{
    MSM_GRID_STRIDE(idx, windows * m) {
        ec_xyzz<F> s = ec_xyzz_load<F>(in, idx);
        if (idx % m + off < m) s = ec_add(s, ec_xyzz_load<F>(in, idx + off));
        ec_xyzz_store(out, idx, s);
    }
}

template <class F>
EC_KERNEL_BODY void msm_scan_terms_body(const uint4* suffix, const uint4* a_in, unsigned int has_a, uint4* out,
                                        msm_u64 windows, msm_u64 m, unsigned int pending_log2)
{
    MSM_GRID_STRIDE(idx, windows * m) {
        ec_xyzz<F> t = ec_infinity<F>();
        if (idx % m) t = ec_dbl_n(ec_xyzz_load<F>(suffix, idx), pending_log2);
        if (has_a) t = ec_add(t, ec_xyzz_load<F>(a_in, idx));
        ec_xyzz_store(out, idx, t);
    }
}

// out[w m_out + q] = the sum of row w's points [q group, (q + 1) group) of in.
template <class F>
EC_KERNEL_BODY void msm_sum_groups_body(const uint4* in, uint4* out, msm_u64 windows, msm_u64 m_in,
                                        msm_u64 m_out, unsigned int group)
{
    MSM_GRID_STRIDE(idx, windows * m_out) {
        const msm_u64 w = idx / m_out, first = (idx % m_out) * group;
        ec_xyzz<F> acc = ec_infinity<F>();
#pragma unroll 1
        for (msm_u64 k = first; k < first + group && k < m_in; ++k)
            acc = ec_add(acc, ec_xyzz_load<F>(in, w * m_in + k));
        ec_xyzz_store(out, idx, acc);
    }
}

// The kernels of each group: G1 under the plain names, G2 with the suffix _g2.
#define MSM_KERNELS(suffix, F)                                                                     \
    extern "C" __global__ void __launch_bounds__(128) msm_accumulate##suffix(                      \
        const uint4* points, const unsigned int* entries, const unsigned int* bucket_ends,         \
        const unsigned int* largest, uint4* heads, uint4* tails, uint4* sums, msm_u64 buckets,     \
        msm_u64 max_slices, unsigned int k0)                                                       \
    {                                                                                              \
        msm_accumulate_body<F>(points, entries, bucket_ends, largest, heads, tails, sums, buckets, \
                               max_slices, k0);                                                    \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(128) msm_bucket_sum##suffix(                      \
        const uint4* heads, const uint4* tails, const unsigned int* counts,                        \
        const unsigned int* bucket_ends, const unsigned int* largest, uint4* sums,                 \
        msm_u64 buckets, unsigned int k0)                                                          \
    {                                                                                              \
        msm_bucket_sum_body<F>(heads, tails, counts, bucket_ends, largest, sums, buckets, k0);     \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(128) msm_reduce_step##suffix(                     \
        const uint4* x_in, const uint4* a_in, unsigned int has_a, uint4* u_out, uint4* a_out,      \
        msm_u64 windows, msm_u64 m_in, msm_u64 m_out, unsigned int seg_log2,                       \
        unsigned int pending_log2)                                                                 \
    {                                                                                              \
        msm_reduce_step_body<F>(x_in, a_in, has_a, u_out, a_out, windows, m_in, m_out, seg_log2,   \
                                pending_log2);                                                     \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(128) msm_suffix_step##suffix(                     \
        const uint4* in, uint4* out, msm_u64 windows, msm_u64 m, msm_u64 off)                      \
    {                                                                                              \
        msm_suffix_step_body<F>(in, out, windows, m, off);                                         \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(128) msm_scan_terms##suffix(                      \
        const uint4* suffix_sums, const uint4* a_in, unsigned int has_a, uint4* out,               \
        msm_u64 windows, msm_u64 m, unsigned int pending_log2)                                     \
    {                                                                                              \
        msm_scan_terms_body<F>(suffix_sums, a_in, has_a, out, windows, m, pending_log2);           \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(128) msm_sum_groups##suffix(                      \
        const uint4* in, uint4* out, msm_u64 windows, msm_u64 m_in, msm_u64 m_out,                 \
        unsigned int group)                                                                        \
    {                                                                                              \
        msm_sum_groups_body<F>(in, out, windows, m_in, m_out, group);                              \
    }

MSM_KERNELS(, fp_t)
MSM_KERNELS(_g2, fp2_t)

// Affine halving rounds over the sorted buckets (batch_affine.cuh), run between msm_scatter
// and msm_accumulate while they are large: the first reads the table through the entries,
// the later ones the previous round's output.
BA_ROUND_KERNEL(, fp_t)
BA_ROUND_KERNEL(_g2, fp2_t)

// Window multiples of fixed bases for the precomputed MSM (workbench/gpu/msm_tables.py): row
// w n + i of out is 2^(c w) * P_i for w < windows, affine in Montgomery form (infinity stays
// all zeros). One thread a point: c XYZZ doublings a window, each window's point converted to
// affine with fp_inv_batched (about 41 products' time, against ~710 for ec_to_affine's Fermat
// inversion). At c = 22 (12 windows) a point costs 242 doublings and 11 conversions, about
// 2,700 products; it is paid once per set of bases. G1 only for now: a G2 instance of the body
// would add about 6 s to this module's compile (ptxas, sm_90) for MSMs the pipeline does not
// run over tables.
template <class F>
FP_FN ec_affine<F> msm_table_affine(const ec_xyzz<F>& p)
{
    ec_affine<F> r;
    if (ec_is_infinity(p)) {
        r.x = fe_zero<F>(); r.y = r.x;
        return r;
    }
    const F t = fe_inv_batch(fe_mul(p.zz, p.zzz), 0u);  // 1 / (ZZ ZZZ)
    r.x = fe_mul(p.x, fe_mul(t, p.zzz));
    r.y = fe_mul(p.y, fe_mul(t, p.zz));
    return r;
}

template <class F>
EC_KERNEL_BODY void msm_window_table_body(const uint4* points, uint4* out, msm_u64 n, unsigned int c,
                                          unsigned int windows)
{
    MSM_GRID_STRIDE(i, n) {
        const ec_affine<F> p = ec_affine_load<F>(points, i);
        ec_affine_store(out, i, p);
        ec_xyzz<F> acc = ec_from_affine(p);
#pragma unroll 1
        for (unsigned int w = 1; w < windows; ++w) {
            acc = ec_dbl_n(acc, c);
            ec_affine_store(out, w * n + i, msm_table_affine(acc));
        }
    }
}

extern "C" __global__ void __launch_bounds__(128)
msm_window_table(const uint4* points, uint4* out, msm_u64 n, unsigned int c, unsigned int windows)
{
    msm_window_table_body<fp_t>(points, out, n, c, windows);
}


// Canonical Fp elements -> Montgomery form, in place: a G1 point is 2 of them, a G2 point 4.
extern "C" __global__ void fp_array_to_mont(uint4* elements, msm_u64 n)
{
    MSM_GRID_STRIDE(i, n) fp_store(elements, i, fp_to_mont(fp_load(elements, i)));
}

extern "C" __global__ void fp_array_from_mont(uint4* out, const uint4* elements, msm_u64 n)
{
    MSM_GRID_STRIDE(i, n) fp_store(out, i, fp_from_mont(fp_load(elements, i)));
}
