// Affine point additions in batches that share one field inversion (Montgomery's trick), for
// both groups: the rounds that halve MSM buckets (msm.cu) and batch additions (batch_add.cu).
//
// One round takes runs of affine points (run b holds in_counts[b] = in_ends[b] - in_ends[b-1]
// points) and writes runs of ceil(count / 2) points: output j of a run is input 2j plus input
// 2j + 1, or input 2j alone when it is the last of an odd run. An affine sum costs
// lambda = (y2 - y1) / (x2 - x1), x3 = lambda^2 - x1 - x2, y3 = lambda (x1 - x3) - y1: three
// products and one division. Thread t takes k consecutive outputs and divides by all their
// denominators at once: prefix products d_1 d_2 ... d_j (one product each, kept in scratch),
// one inversion of the whole product, then walking back, 1/d_j = inv * prefix_{j-1} and
// inv *= d_j (two products each). Six products an addition, against ten for the mixed XYZZ
// addition of curve.cuh, plus the thread's inversion shared by its k additions.
//
// The inversion is a binary extended Euclid (fe_inv_batch below), in one of two forms that
// the launch picks (workbench/gpu/affine_rounds.py, INVERSION): fp_inv_binary, one full-width
// step at a time, which takes the time of about 240 products on the H200, a third of Fermat's
// a^(p-2) (381 squarings and 229 products, about 710), so that a round pays only with k of 32
// or more and the host runs rounds only while they are large; or fp_inv_batched (the
// default), the same steps 30 at a time on 64-bit approximations, 5.7 times the rate
// (about 41 products' time).
//
// Why not one inversion per block, shared by all its threads: a warp's inversion is serial
// work of one warp (SIMT: the lanes of one warp sharing it gain nothing), about 0.23 ms of one
// scheduler's issue for fp_inv_binary at the measured product rate, during which the block's
// other warps wait at the barrier; a round of a block at k = 8 computes for less than that.
// A cheaper inversion per thread avoids the wait altogether.
//
// The special sums that the generic formula divides by zero on are decided per pair: either
// side at infinity (the other is the sum), P + P (lambda = 3 x^2 / 2 y: the denominator 2y
// joins the batch), P + (-P) (infinity). Their denominators are replaced by 1, so the batch's
// product never holds a zero. A point of order 2 would have y = 0; neither group of prime
// order r has one.
//
// Scratch is two arrays of k x threads, entry (j, t) at j * threads + t so that the threads
// of a warp touch consecutive words: the prefix products (field elements) and each output's
// first input index with the top bit set when it has a second. Like the other kernels, the
// round is a grid-stride loop with no shared memory or barriers: any grid is correct, and
// the CPU build runs it with one thread.
#pragma once

#include "curve.cuh"

typedef unsigned long long ba_u64;

#define BA_SIGN_BIT 0x80000000u

namespace ba_detail {

// 2^1152 mod p: Montgomery-multiplying the plain inverse of x R by it gives x^-1 R.
FP_FN constexpr unsigned int r3_limb(int i)
{
    return i == 0 ? 0xd94ca1e0u : i == 1 ? 0xed48ac6bu : i == 2 ? 0x03a7adf8u
         : i == 3 ? 0x315f831eu : i == 4 ? 0x615e29ddu : i == 5 ? 0x9a53352au
         : i == 6 ? 0x921e1761u : i == 7 ? 0x34c04e5eu : i == 8 ? 0x65724728u
         : i == 9 ? 0x2512d435u : i == 10 ? 0x91755d4du : 0x0aa63460u;
}

FP_FN fp_t select(unsigned int mask, const fp_t& a, const fp_t& b)  // mask all ones: a, else b
{
    fp_t r;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) r.l[j] = (a.l[j] & mask) | (b.l[j] & ~mask);
    return r;
}

// a - b on 12 limbs as plain integers; the mask is all ones when a < b (the result wrapped).
FP_FN fp_t sub_wrap(const fp_t& a, const fp_t& b, unsigned int& borrow_mask)
{
    using namespace fp_cc;
    fp_t d;
    d.l[0] = sub_cc(a.l[0], b.l[0]);
#pragma unroll
    for (int j = 1; j < FP_LIMBS; ++j) d.l[j] = subc_cc(a.l[j], b.l[j]);
    borrow_mask = subc(0u, 0u);
    return d;
}

FP_FN unsigned int shr1_pair(unsigned int lo, unsigned int hi)
{
    return (lo >> 1) | (hi << 31);
}

// x / 2 mod p for x < p: (x + p) / 2 when x is odd; x + p < 2^382 needs no thirteenth limb.
FP_FN fp_t halve_mod(const fp_t& x)
{
    using namespace fp_cc;
    const unsigned int odd = 0u - (x.l[0] & 1u);
    fp_t s;
    s.l[0] = add_cc(x.l[0], fp_modulus_limb(0) & odd);
#pragma unroll
    for (int j = 1; j < FP_LIMBS - 1; ++j) s.l[j] = addc_cc(x.l[j], fp_modulus_limb(j) & odd);
    s.l[FP_LIMBS - 1] = addc(x.l[FP_LIMBS - 1], fp_modulus_limb(FP_LIMBS - 1) & odd);
    fp_t r;
#pragma unroll
    for (int j = 0; j < FP_LIMBS - 1; ++j) r.l[j] = shr1_pair(s.l[j], s.l[j + 1]);
    r.l[FP_LIMBS - 1] = s.l[FP_LIMBS - 1] >> 1;
    return r;
}

}  // namespace ba_detail

// x^-1 for x in Montgomery form (0 for 0), by the binary extended Euclid on (u, v) = (x, p),
// keeping x1 x = u and x2 x = v (mod p). Each step, when u is
// odd, subtracts the smaller of u, v from the larger (swapping so that u takes the
// difference) and then halves u: u v at least halves, so from u v < p^2 < 2^762, 762 steps
// end at u = 0, v = gcd = 1, x2 = x^-1. The steps are branch-free (selects), so the lanes of
// a warp never diverge. x^-1 here is the plain inverse of x R; one product by R^3 gives the
// Montgomery form of the inverse of x.
FP_CALL fp_t fp_inv_binary(const fp_t& x)
{
    using namespace ba_detail;
    fp_t u = x, v, x1 = fp_zero(), x2 = fp_zero();
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) v.l[j] = fp_modulus_limb(j);
    x1.l[0] = 1;
#pragma unroll 1
    for (int step = 0; step < 762; ++step) {
        const unsigned int odd = 0u - (u.l[0] & 1u);
        unsigned int u_below;
        const fp_t u_minus_v = sub_wrap(u, v, u_below);
        unsigned int ignored;
        const fp_t v_minus_u = sub_wrap(v, u, ignored);
        const unsigned int swap = odd & u_below;
        const fp_t x1_minus_x2 = fp_sub(x1, x2);
        const fp_t x2_minus_x1 = fp_sub(x2, x1);
        // u odd: u <- |u - v| (even), and v <- the old u when it was the smaller.
        const fp_t new_u = select(odd, select(u_below, v_minus_u, u_minus_v), u);
        const fp_t new_x1 = select(odd, select(u_below, x2_minus_x1, x1_minus_x2), x1);
        v = select(swap, u, v);
        x2 = select(swap, x1, x2);
#pragma unroll
        for (int j = 0; j < FP_LIMBS - 1; ++j) u.l[j] = shr1_pair(new_u.l[j], new_u.l[j + 1]);
        u.l[FP_LIMBS - 1] = new_u.l[FP_LIMBS - 1] >> 1;
        x1 = halve_mod(new_x1);
    }
    fp_t r3;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) r3.l[j] = r3_limb(j);
    return fp_mul(x2, r3);
}

// x^-1 for x in Montgomery form (0 for 0), by the same binary GCD run 30 steps at a time on
// 64-bit approximations of (u, v) (the low 30 bits, exact, and the top 34 bits below the
// longer one's length), the 30 steps' effect kept as a 2 x 2 matrix of signed factors
// (|f| + |g| <= 2^30) and applied to the full values once: (u, v) <- (f0 u + g0 v, f1 u + g1 v)
// / 2^30. When an approximate comparison picked the wrong side, a value comes out negative
// and is negated with its factors. The coefficients (x1, x2 of fp_inv_binary) get the same
// matrix, the division by 2^30 done mod p as a one-word Montgomery step. The exact algorithm
// ends within 2 * 381 - 1 = 761 steps; of ~30k inputs run through a Python model of this one
// when it was written (powers of two, p minus powers of two, values of few bits, random), the
// longest needed 26 batches (2^380 and its like; the tests run them), and 27 batches, 810
// steps, leave a margin for extra steps after a wrong approximate comparison. Batches after u
// reaches 0 change nothing (v = 1 stays, x2 too). About 52k PTX instructions (27 batches of
// ~1900: 30 steps of 27 on the approximations, four 12-limb combinations, two Montgomery
// steps), against 319k for fp_inv_binary's 762 steps of 419 (nvcc 13.0, sm_90). On the H200
// 4.25e8/s against 7.46e7/s: 41 products' time against 235.
namespace ba_detail {

typedef long long ba_i64;
#define BA_BATCH_STEPS 30
#define BA_BATCHES 27
#define BA_LOW30 0x3fffffffu

FP_FN fp_t modulus()
{
    fp_t p;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) p.l[j] = fp_modulus_limb(j);
    return p;
}

FP_FN unsigned int clz32(unsigned int x)  // x != 0
{
#if defined(__CUDA_ARCH__)
    return __clz(x);
#else
    return __builtin_clz(x);
#endif
}

// f x + g y as 13 limbs of two's complement; |f| + |g| <= 2^30 keeps each limb's sum in 63 bits.
FP_FN void lin_comb(unsigned int t[FP_LIMBS + 1], int f, const fp_t& x, int g, const fp_t& y)
{
    ba_i64 carry = 0;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) {
        const ba_i64 s = (ba_i64)f * (ba_i64)x.l[j] + (ba_i64)g * (ba_i64)y.l[j] + carry;
        t[j] = (unsigned int)s;
        carry = s >> 32;
    }
    t[FP_LIMBS] = (unsigned int)carry;
}

// t / 2^30 (t a multiple of 2^30, |t / 2^30| < 2^384): the low 12 limbs; the sign mask out.
FP_FN fp_t shift30(const unsigned int t[FP_LIMBS + 1], unsigned int& sign)
{
    fp_t r;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) r.l[j] = (t[j] >> 30) | (t[j + 1] << 2);
    sign = 0u - (t[FP_LIMBS] >> 31);
    return r;
}

// |r| from its two's complement and sign mask (r = (r ^ mask) - mask).
FP_FN fp_t abs_by(const fp_t& r, unsigned int sign)
{
    using namespace fp_cc;
    fp_t a;
    a.l[0] = add_cc(r.l[0] ^ sign, sign & 1u);
#pragma unroll
    for (int j = 1; j < FP_LIMBS - 1; ++j) a.l[j] = addc_cc(r.l[j] ^ sign, 0u);
    a.l[FP_LIMBS - 1] = addc(r.l[FP_LIMBS - 1] ^ sign, 0u);
    return a;
}

// (f x + g y) / 2^30 mod p for x, y < p: m p added to clear the low 30 bits, the quotient in
// (-p, 2p), then p added or subtracted once.
FP_FN fp_t lin_comb_mod(int f, const fp_t& x, int g, const fp_t& y)
{
    using namespace fp_cc;
    unsigned int t[FP_LIMBS + 1];
    lin_comb(t, f, x, g, y);
    fp_add_mp(t, (t[0] * FP_NINV) & BA_LOW30, t[FP_LIMBS]);  // clears the low 30 bits only
    unsigned int negative;
    const fp_t r = shift30(t, negative);
    fp_t plus, minus;  // r + p (r negative), r - p (r >= p)
    plus.l[0] = add_cc(r.l[0], fp_modulus_limb(0));
#pragma unroll
    for (int j = 1; j < FP_LIMBS - 1; ++j) plus.l[j] = addc_cc(r.l[j], fp_modulus_limb(j));
    plus.l[FP_LIMBS - 1] = addc(r.l[FP_LIMBS - 1], fp_modulus_limb(FP_LIMBS - 1));
    unsigned int below;
    minus = sub_wrap(r, modulus(), below);
    return select(negative, plus, select(below, r, minus));
}

// Bits [s, s + 34) of x, for 30 <= s <= 350 (w = s / 32 chosen by selects: a run-time index
// into the limbs would put them in local memory).
FP_FN ba_u64 top34(const fp_t& x, unsigned int s)
{
    const unsigned int w = s >> 5, r = s & 31u;
    unsigned int x0 = 0, x1 = 0, x2 = 0;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) {
        x0 = (unsigned int)j == w ? x.l[j] : x0;
        x1 = (unsigned int)j == w + 1 ? x.l[j] : x1;
        x2 = (unsigned int)j == w + 2 ? x.l[j] : x2;
    }
    const ba_u64 low = (((ba_u64)x1 << 32) | x0) >> r;
    const ba_u64 high = r ? (ba_u64)x2 << (64 - r) : 0;
    return (low | high) & ((1ull << 34) - 1);
}

}  // namespace ba_detail

FP_CALL fp_t fp_inv_batched(const fp_t& x)
{
    using namespace ba_detail;
    fp_t u = x, v = modulus(), x1 = fp_zero(), x2 = fp_zero();
    x1.l[0] = 1;
#pragma unroll 1
    for (int batch = 0; batch < BA_BATCHES; ++batch) {
        // The length of the longer of u, v, at least 64; the approximations' top bits from there.
        unsigned int top = 0, word = 0;
#pragma unroll
        for (int j = 0; j < FP_LIMBS; ++j) {
            const unsigned int c = u.l[j] | v.l[j];
            top = c ? (unsigned int)j : top;
            word = c ? c : word;
        }
        unsigned int len = word ? 32 * top + 32 - clz32(word) : 0;
        len = len < 64 ? 64 : len;
        ba_u64 a = (u.l[0] & BA_LOW30) | (top34(u, len - 34) << 30);
        ba_u64 b = (v.l[0] & BA_LOW30) | (top34(v, len - 34) << 30);
        unsigned int f0 = 1, g0 = 0, f1 = 0, g1 = 1;  // two's complement
#pragma unroll 6
        for (int step = 0; step < BA_BATCH_STEPS; ++step) {
            const ba_u64 odd = 0ull - (a & 1ull);
            const ba_u64 swap = odd & (0ull - (ba_u64)(a < b));
            const ba_u64 t = (a ^ b) & swap;
            a ^= t; b ^= t;
            const unsigned int sw = (unsigned int)swap, od = (unsigned int)odd;
            const unsigned int tf = (f0 ^ f1) & sw, tg = (g0 ^ g1) & sw;
            f0 ^= tf; f1 ^= tf; g0 ^= tg; g1 ^= tg;
            a -= b & odd; f0 -= f1 & od; g0 -= g1 & od;
            a >>= 1; f1 <<= 1; g1 <<= 1;
        }
        unsigned int t[FP_LIMBS + 1], su, sv;
        lin_comb(t, (int)f0, u, (int)g0, v);
        const fp_t nu = shift30(t, su);
        lin_comb(t, (int)f1, u, (int)g1, v);
        const fp_t nv = shift30(t, sv);
        u = abs_by(nu, su);
        v = abs_by(nv, sv);
        f0 = (f0 ^ su) - su; g0 = (g0 ^ su) - su;
        f1 = (f1 ^ sv) - sv; g1 = (g1 ^ sv) - sv;
        const fp_t n1 = lin_comb_mod((int)f0, x1, (int)g0, x2);
        x2 = lin_comb_mod((int)f1, x1, (int)g1, x2);
        x1 = n1;
    }
    fp_t r3;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) r3.l[j] = r3_limb(j);
    return fp_mul(x2, r3);
}

// The inversion the batches use (fp_inv_binary when `binary` is set, to time the two side by
// side; the flag is the same for the whole grid, so no warp diverges), per coordinate field:
// Fp2's through the norm, 1 / (a0 + a1 u) = (a0 - a1 u) / (a0^2 + a1^2).
FP_FN fp_t fp_inv_batch(const fp_t& a, unsigned int binary)
{
    return binary ? fp_inv_binary(a) : fp_inv_batched(a);
}
FP_FN fp_t fe_inv_batch(const fp_t& a, unsigned int binary) { return fp_inv_batch(a, binary); }

template <class F>
FP_FN bool fe_equal(const F& a, const F& b) { return fe_is_zero(fe_sub(a, b)); }

// The products and squarings of the rounds' two passes and of their inversions' Fp2 norm, by
// one of three build options (workbench/gpu/affine_rounds.py, PRODUCTS). The default is
// fp_mul_rolled inlined (its twelve CIOS rounds in a loop: one round's code a product; Fp2's
// products stay fp2_mul's calls): on the H200 the rounds of an MSM 2^24 took 118.8 ms against
// 151.8 with every product unrolled and inlined (BA_PRODUCTS_INLINE: six ~590-instruction
// copies in the back pass, 162 KB of SASS in the G1 kernel's body against 53 KB, whose warps
// waited on instruction fetch for 40-60 % of their cycles), 125.4 with BA_PRODUCTS_CALLED
// (calls of one copy of fp_mul, operands and result by value so that they stay in registers,
// Fp2's products over it too; kernels/NOTES_msm.md row 5). FP_SQR_DEDICATED (fp.cuh) picks
// the squaring under each.
#if defined(BA_PRODUCTS_CALLED)
FP_CALL fp_t ba_mul_call(fp_t a, fp_t b) { return fp_mul(a, b); }
FP_FN fp_t ba_mul(const fp_t& a, const fp_t& b) { return ba_mul_call(a, b); }
#if defined(FP_SQR_DEDICATED)
FP_CALL fp_t ba_sqr_call(fp_t a) { return fp_sqr_dedicated(a); }
FP_FN fp_t ba_sqr(const fp_t& a) { return ba_sqr_call(a); }
#else
FP_FN fp_t ba_sqr(const fp_t& a) { return ba_mul_call(a, a); }
#endif
#elif defined(BA_PRODUCTS_INLINE)
FP_FN fp_t ba_mul(const fp_t& a, const fp_t& b) { return fp_mul(a, b); }
FP_FN fp_t ba_sqr(const fp_t& a) { return fp_sqr(a); }
#else
FP_FN fp_t ba_mul(const fp_t& a, const fp_t& b) { return fp_mul_rolled(a, b); }
#if defined(FP_SQR_DEDICATED)
FP_FN fp_t ba_sqr(const fp_t& a) { return fp_sqr_dedicated(a); }
#else
FP_FN fp_t ba_sqr(const fp_t& a) { return fp_mul_rolled(a, a); }
#endif
#endif
#if defined(BA_PRODUCTS_CALLED)
// fp2_mul and fp2_sqr each inline three fp_mul (61 and 41 KB of SASS); these are the same
// formulas (fp2.cuh) over the one called copy.
FP_CALL fp2_t ba_mul2_call(fp2_t a, fp2_t b)
{
    const fp_t t0 = ba_mul(a.c0, b.c0);
    const fp_t t1 = ba_mul(a.c1, b.c1);
    const fp_t t2 = ba_mul(fp_add(a.c0, a.c1), fp_add(b.c0, b.c1));
    return fp2_make(fp_sub(t0, t1), fp_sub(fp_sub(t2, t0), t1));
}
FP_CALL fp2_t ba_sqr2_call(fp2_t a)
{
    const fp_t t = ba_mul(a.c0, a.c1);
    return fp2_make(ba_mul(fp_add(a.c0, a.c1), fp_sub(a.c0, a.c1)), fp_dbl(t));
}
FP_FN fp2_t ba_mul(const fp2_t& a, const fp2_t& b) { return ba_mul2_call(a, b); }
FP_FN fp2_t ba_sqr(const fp2_t& a) { return ba_sqr2_call(a); }
#else
FP_FN fp2_t ba_mul(const fp2_t& a, const fp2_t& b) { return fp2_mul(a, b); }
FP_FN fp2_t ba_sqr(const fp2_t& a) { return fp2_sqr(a); }
#endif

FP_FN fp2_t fe_inv_batch(const fp2_t& a, unsigned int binary)
{
    const fp_t t = fp_inv_batch(fp_add(ba_sqr(a.c0), ba_sqr(a.c1)), binary);
    return fp2_make(ba_mul(a.c0, t), fp_neg(ba_mul(a.c1, t)));
}

// Input i of a round: points[i], or for the first round of an MSM the table point an entry
// names (index | sign << 31), negated when the sign is set.
template <class F>
FP_FN ec_affine<F> ba_input(const uint4* points, const unsigned int* entries, unsigned int has_entries,
                            ba_u64 i)
{
    if (!has_entries) return ec_affine_load<F>(points, i);
    const unsigned int e = entries[i];
    ec_affine<F> p = ec_affine_load<F>(points, e & ~BA_SIGN_BIT);
    return (e & BA_SIGN_BIT) ? ec_affine_neg(p) : p;
}

// How one output comes out of its inputs p and q (q absent for a run's odd last point).
enum ba_kind { BA_SUM = 0, BA_FIRST = 1, BA_SECOND = 2, BA_INFINITY = 3, BA_DOUBLE = 4 };

template <class F>
FP_FN int ba_classify(const ec_affine<F>& p, const ec_affine<F>& q, bool has_q)
{
    if (!has_q || ec_affine_is_infinity(q)) return BA_FIRST;
    if (ec_affine_is_infinity(p)) return BA_SECOND;
    if (fe_equal(p.x, q.x)) return fe_equal(p.y, q.y) ? BA_DOUBLE : BA_INFINITY;
    return BA_SUM;
}

template <class F>
FP_FN F ba_denominator(const ec_affine<F>& p, const ec_affine<F>& q, int kind)
{
    if (kind == BA_SUM) return fe_sub(q.x, p.x);
    if (kind == BA_DOUBLE) return fe_dbl(p.y);
    return fe_one<F>();
}

// The denominator of the pair (i0, i1) of an affine array, reading the y coordinates only
// where the x coordinates leave the case open (equal x, or a point that may be infinity): a
// third less memory traffic than loading both points, for the same decision as ba_classify.
template <class F>
FP_FN F ba_pair_denominator(const uint4* points, ba_u64 i0, ba_u64 i1)
{
    const F px = fe_load<F>(points, 2 * i0), qx = fe_load<F>(points, 2 * i1);
    const F dx = fe_sub(qx, px);
    if (!fe_is_zero(px) && !fe_is_zero(qx) && !fe_is_zero(dx)) return dx;  // the usual case
    const ec_affine<F> p = ec_affine_load<F>(points, i0), q = ec_affine_load<F>(points, i1);
    return ba_denominator(p, q, ba_classify(p, q, true));
}

// The same for output q of a round's first pass (its inputs read through the entries, if any).
template <class F>
FP_FN F ba_first_denominator(const uint4* points, const unsigned int* entries, unsigned int has_entries,
                             ba_u64 first, bool has_q)
{
    if (!has_q) return fe_one<F>();
    if (!has_entries) return ba_pair_denominator<F>(points, first, first + 1);
    const unsigned int e0 = entries[first], e1 = entries[first + 1];
    const F px = fe_load<F>(points, 2 * (ba_u64)(e0 & ~BA_SIGN_BIT));
    const F qx = fe_load<F>(points, 2 * (ba_u64)(e1 & ~BA_SIGN_BIT));
    const F dx = fe_sub(qx, px);
    if (!fe_is_zero(px) && !fe_is_zero(qx) && !fe_is_zero(dx)) return dx;
    const ec_affine<F> p = ba_input<F>(points, entries, has_entries, first);
    const ec_affine<F> q = ba_input<F>(points, entries, has_entries, first + 1);
    return ba_denominator(p, q, ba_classify(p, q, true));
}

// p + r of the kind ba_classify gave, den_inv the inverse of its denominator.
template <class F>
FP_FN ec_affine<F> ba_pair_sum(const ec_affine<F>& p, const ec_affine<F>& r, int kind, const F& den_inv)
{
    ec_affine<F> s;
    if (kind == BA_FIRST) {
        s = p;
    } else if (kind == BA_SECOND) {
        s = r;
    } else if (kind == BA_INFINITY) {
        s.x = fe_zero<F>(); s.y = s.x;
    } else {
        F num;
        if (kind == BA_SUM) {
            num = fe_sub(r.y, p.y);
        } else {
            const F x2 = ba_sqr(p.x);
            num = fe_add(fe_dbl(x2), x2);
        }
        const F lambda = ba_mul(num, den_inv);
        s.x = fe_sub(fe_sub(ba_sqr(lambda), p.x), r.x);
        s.y = fe_sub(ba_mul(lambda, fe_sub(p.x, s.x)), p.y);
    }
    return s;
}

// The run of output q: the first b with out_ends[b] > q, searched from b.
FP_FN ba_u64 ba_run_of(const unsigned int* out_ends, ba_u64 b, ba_u64 q)
{
    while (out_ends[b] <= q) ++b;
    return b;
}

template <class F>
EC_KERNEL_BODY void affine_round_body(const uint4* points, const unsigned int* entries,
                                      unsigned int has_entries, const unsigned int* in_ends,
                                      const unsigned int* out_ends, ba_u64 runs, uint4* out,
                                      uint4* prefix, unsigned int* picks, ba_u64 threads, unsigned int k,
                                      unsigned int binary)
{
    const ba_u64 total_out = out_ends[runs - 1];
    for (ba_u64 t = blockIdx.x * (ba_u64)blockDim.x + threadIdx.x; t < threads;
         t += (ba_u64)gridDim.x * blockDim.x) {
#pragma unroll 1
        for (ba_u64 q0 = t * k; q0 < total_out; q0 += threads * k) {
            const ba_u64 q1 = q0 + k < total_out ? q0 + k : total_out;
            ba_u64 lo = 0, hi = runs - 1;  // the run of output q0
            while (lo < hi) {
                const ba_u64 mid = (lo + hi) / 2;
                if (out_ends[mid] > q0) hi = mid; else lo = mid + 1;
            }
            ba_u64 b = lo;
            F acc = fe_one<F>();
#pragma unroll 1
            for (ba_u64 q = q0; q < q1; ++q) {
                b = ba_run_of(out_ends, b, q);
                const ba_u64 out_start = b ? out_ends[b - 1] : 0, in_start = b ? in_ends[b - 1] : 0;
                const ba_u64 first = in_start + 2 * (q - out_start);
                const bool has_q = first + 1 < in_ends[b];
                const ba_u64 slot = (q - q0) * threads + t;
                picks[slot] = (unsigned int)first | (has_q ? BA_SIGN_BIT : 0u);
                acc = ba_mul(acc, ba_first_denominator<F>(points, entries, has_entries, first, has_q));
                fe_store(prefix, slot, acc);
            }
            F inv = fe_inv_batch(acc, binary);
#pragma unroll 1
            for (ba_u64 q = q1; q-- > q0;) {
                const ba_u64 slot = (q - q0) * threads + t;
                const unsigned int pick = picks[slot];
                const bool has_q = (pick & BA_SIGN_BIT) != 0;
                const ba_u64 first = pick & ~BA_SIGN_BIT;
                const ec_affine<F> p = ba_input<F>(points, entries, has_entries, first);
                ec_affine<F> r = p;
                if (has_q) r = ba_input<F>(points, entries, has_entries, first + 1);
                const int kind = ba_classify(p, r, has_q);
                const F den = ba_denominator(p, r, kind);
                // 1 / den = inv * (the product of the denominators before it).
                const F den_inv = q == q0 ? inv : ba_mul(inv, fe_load<F>(prefix, slot - threads));
                inv = ba_mul(inv, den);
                const ec_affine<F> s = ba_pair_sum(p, r, kind, den_inv);
                ec_affine_store(out, q, s);
            }
        }
    }
}

// Sums of consecutive affine points into XYZZ partials: partial t of set s covers points
// [s * per_set_len + u * chunk, ...) of that set, u = t % per_set, so that no partial spans
// two sets (the host makes per_set a power of two for the pairwise passes after it).
template <class F>
EC_KERNEL_BODY void affine_chunk_sums_body(const uint4* points, uint4* partials, ba_u64 sets,
                                           ba_u64 per_set_len, ba_u64 per_set, unsigned int chunk)
{
    for (ba_u64 t = blockIdx.x * (ba_u64)blockDim.x + threadIdx.x; t < sets * per_set;
         t += (ba_u64)gridDim.x * blockDim.x) {
        const ba_u64 s = t / per_set, u = t % per_set;
        const ba_u64 begin = u * chunk < per_set_len ? u * chunk : per_set_len;
        const ba_u64 end = begin + chunk < per_set_len ? begin + chunk : per_set_len;
        ec_xyzz<F> acc = ec_infinity<F>();
#pragma unroll 1
        for (ba_u64 i = begin; i < end; ++i)
            acc = ec_add_affine_inline(acc, ec_affine_load<F>(points, s * per_set_len + i));
        ec_xyzz_store(partials, t, acc);
    }
}

#define BA_ROUND_KERNEL(suffix, F)                                                                 \
    extern "C" __global__ void __launch_bounds__(128) affine_round##suffix(                        \
        const uint4* points, const unsigned int* entries, unsigned int has_entries,                \
        const unsigned int* in_ends, const unsigned int* out_ends, ba_u64 runs, uint4* out,        \
        uint4* prefix, unsigned int* picks, ba_u64 threads, unsigned int k, unsigned int binary)    \
    {                                                                                              \
        affine_round_body<F>(points, entries, has_entries, in_ends, out_ends, runs, out, prefix,    \
                             picks, threads, k, binary);                                           \
    }

#define BA_CHUNK_KERNEL(suffix, F)                                                                 \
    extern "C" __global__ void __launch_bounds__(128) affine_chunk_sums##suffix(                   \
        const uint4* points, uint4* partials, ba_u64 sets, ba_u64 per_set_len, ba_u64 per_set,     \
        unsigned int chunk)                                                                        \
    {                                                                                              \
        affine_chunk_sums_body<F>(points, partials, sets, per_set_len, per_set, chunk);            \
    }
