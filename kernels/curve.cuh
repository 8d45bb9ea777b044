// Point arithmetic on short Weierstrass curves y^2 = x^3 + b with a = 0, written once for
// both BLS12-381 groups: G1 over Fp (g1.cuh) and G2 over Fp2 (g2.cuh), on Montgomery-form
// coordinates. The formulas never use b, so one template serves both; the field is chosen
// by overloads of fe_* below.
//
// Inputs are affine (x, y); the point at infinity is (0, 0), which is not on the curve, so
// the all-zero encoding is unambiguous (as in the host's "xy little-endian" format).
//
// Accumulators are XYZZ: (X, Y, ZZ, ZZZ) stands for (X / ZZ, Y / ZZZ) with ZZ^3 = ZZZ^2, and
// ZZ = 0 is infinity. Why XYZZ rather than Jacobian: adding an affine point (the inner loop
// of bucket accumulation) costs 8 multiplications and 2 squarings instead of 7 + 4 with
// more additions, and doubling needs no a-coefficient term (a = 0 here anyway). The formulas
// are the standard ones for this representation (mixed addition "madd-2008-s", addition
// "add-2008-s", doubling "dbl-2008-s-1"); each handles infinity on either side, P + P
// (falls through to doubling) and P + (-P) (gives infinity) explicitly, since the generic
// formulas divide by zero there.
//
// The point operations are real calls (FP_CALL) rather than inlined: each holds 10 to 14
// inlined field multiplications of ~600 instructions unrolled (Fp2's are calls of three), and
// inlining them into every kernel made one module take minutes to compile for no
// measurable gain per operation.
#pragma once

#include "fp.cuh"
#include "fp2.cuh"

// A kernel's body written once for both groups: a device function template that the
// extern "C" kernels of each group call (in host builds for the CPU tests, a plain function).
#if defined(__CUDACC__)
#define EC_KERNEL_BODY __device__ __forceinline__
#else
#define EC_KERNEL_BODY inline
#endif

// The field operations the curve code needs, overloaded on the coordinate field. The
// products are fp.cuh's fp_mul_curve / fp_sqr_curve (unrolled by default, rolled in the
// EC_PRODUCTS_ROLLED build) and Fp2's over them.
template <class F> FP_FN F fe_zero();
template <> FP_FN fp_t fe_zero<fp_t>() { return fp_zero(); }
template <> FP_FN fp2_t fe_zero<fp2_t>() { return fp2_zero(); }
template <class F> FP_FN F fe_one();
template <> FP_FN fp_t fe_one<fp_t>() { return fp_one(); }
template <> FP_FN fp2_t fe_one<fp2_t>() { return fp2_one(); }
template <class F> FP_FN F fe_load(const uint4* v, unsigned long long i);
template <> FP_FN fp_t fe_load<fp_t>(const uint4* v, unsigned long long i) { return fp_load(v, i); }
template <> FP_FN fp2_t fe_load<fp2_t>(const uint4* v, unsigned long long i) { return fp2_load(v, i); }
FP_FN void fe_store(uint4* v, unsigned long long i, const fp_t& x) { fp_store(v, i, x); }
FP_FN void fe_store(uint4* v, unsigned long long i, const fp2_t& x) { fp2_store(v, i, x); }
FP_FN bool fe_is_zero(const fp_t& a) { return fp_is_zero(a); }
FP_FN bool fe_is_zero(const fp2_t& a) { return fp2_is_zero(a); }
FP_FN fp_t fe_add(const fp_t& a, const fp_t& b) { return fp_add(a, b); }
FP_FN fp2_t fe_add(const fp2_t& a, const fp2_t& b) { return fp2_add(a, b); }
FP_FN fp_t fe_sub(const fp_t& a, const fp_t& b) { return fp_sub(a, b); }
FP_FN fp2_t fe_sub(const fp2_t& a, const fp2_t& b) { return fp2_sub(a, b); }
FP_FN fp_t fe_dbl(const fp_t& a) { return fp_dbl(a); }
FP_FN fp2_t fe_dbl(const fp2_t& a) { return fp2_dbl(a); }
FP_FN fp_t fe_neg(const fp_t& a) { return fp_neg(a); }
FP_FN fp2_t fe_neg(const fp2_t& a) { return fp2_neg(a); }
FP_FN fp_t fe_mul(const fp_t& a, const fp_t& b) { return fp_mul_curve(a, b); }
FP_FN fp2_t fe_mul(const fp2_t& a, const fp2_t& b) { return fp2_mul(a, b); }
FP_FN fp_t fe_sqr(const fp_t& a) { return fp_sqr_curve(a); }
FP_FN fp2_t fe_sqr(const fp2_t& a) { return fp2_sqr(a); }
FP_FN fp_t fe_inv(const fp_t& a) { return fp_inv(a); }
FP_FN fp2_t fe_inv(const fp2_t& a) { return fp2_inv(a); }

template <class F>
struct ec_affine {
    F x, y;
};

template <class F>
struct ec_xyzz {
    F x, y, zz, zzz;
};

template <class F>
FP_FN ec_xyzz<F> ec_infinity()
{
    ec_xyzz<F> r;
    r.x = fe_zero<F>(); r.y = r.x; r.zz = r.x; r.zzz = r.x;
    return r;
}

template <class F>
FP_FN bool ec_is_infinity(const ec_xyzz<F>& p)
{
    return fe_is_zero(p.zz);
}

template <class F>
FP_FN bool ec_affine_is_infinity(const ec_affine<F>& p)
{
    return fe_is_zero(p.x) && fe_is_zero(p.y);
}

template <class F>
FP_FN ec_xyzz<F> ec_from_affine(const ec_affine<F>& p)
{
    if (ec_affine_is_infinity(p)) return ec_infinity<F>();
    ec_xyzz<F> r;
    r.x = p.x; r.y = p.y; r.zz = fe_one<F>(); r.zzz = fe_one<F>();
    return r;
}

template <class F>
FP_FN ec_affine<F> ec_affine_neg(const ec_affine<F>& p)
{
    ec_affine<F> r;
    r.x = p.x;
    r.y = fe_neg(p.y);  // -0 = 0 keeps infinity as it is
    return r;
}

template <class F>
FP_FN ec_xyzz<F> ec_neg(const ec_xyzz<F>& p)
{
    ec_xyzz<F> r = p;
    r.y = fe_neg(p.y);
    return r;
}

// 2P ("dbl-2008-s-1", a = 0).
template <class F>
FP_CALL ec_xyzz<F> ec_dbl(const ec_xyzz<F>& p)
{
    if (ec_is_infinity(p)) return p;
    const F u = fe_dbl(p.y);
    const F v = fe_sqr(u);
    const F w = fe_mul(u, v);
    const F s = fe_mul(p.x, v);
    const F x2 = fe_sqr(p.x);
    const F m = fe_add(fe_dbl(x2), x2);
    ec_xyzz<F> r;
    r.x = fe_sub(fe_sub(fe_sqr(m), s), s);
    r.y = fe_sub(fe_mul(m, fe_sub(s, r.x)), fe_mul(w, p.y));
    r.zz = fe_mul(v, p.zz);
    r.zzz = fe_mul(w, p.zzz);
    return r;
}

// 2P for an affine P: only the P + P case of a mixed addition needs it, too rarely for the
// two multiplications by ZZ = ZZZ = 1 that a formula of its own would save.
template <class F>
FP_CALL ec_xyzz<F> ec_dbl_affine(const ec_affine<F>& p)
{
    return ec_dbl(ec_from_affine(p));
}

// P + Q with Q affine ("madd-2008-s"). This one is also inlined where it is the inner loop
// (bucket accumulation, batch addition): there the call's spills of the accumulator to the
// stack cost more than the longer compile.
template <class F>
FP_FN ec_xyzz<F> ec_add_affine_inline(const ec_xyzz<F>& p, const ec_affine<F>& q)
{
    if (ec_affine_is_infinity(q)) return p;
    if (ec_is_infinity(p)) return ec_from_affine(q);
    const F u2 = fe_mul(q.x, p.zz);
    const F s2 = fe_mul(q.y, p.zzz);
    const F pd = fe_sub(u2, p.x);
    const F rd = fe_sub(s2, p.y);
    if (fe_is_zero(pd)) {
        // Same x: Q = P (double it) or Q = -P (the sum is infinity).
        return fe_is_zero(rd) ? ec_dbl_affine(q) : ec_infinity<F>();
    }
    const F pp = fe_sqr(pd);
    const F ppp = fe_mul(pd, pp);
    const F qq = fe_mul(p.x, pp);
    ec_xyzz<F> r;
    r.x = fe_sub(fe_sub(fe_sub(fe_sqr(rd), ppp), qq), qq);
    r.y = fe_sub(fe_mul(rd, fe_sub(qq, r.x)), fe_mul(p.y, ppp));
    r.zz = fe_mul(p.zz, pp);
    r.zzz = fe_mul(p.zzz, ppp);
    return r;
}

template <class F>
FP_CALL ec_xyzz<F> ec_add_affine(const ec_xyzz<F>& p, const ec_affine<F>& q)
{
    return ec_add_affine_inline(p, q);
}

// P + Q ("add-2008-s"). Inlined where it is a kernel's inner loop (the bucket reduction's
// running sums), as ec_add_affine_inline is.
template <class F>
FP_FN ec_xyzz<F> ec_add_inline(const ec_xyzz<F>& p, const ec_xyzz<F>& q)
{
    if (ec_is_infinity(q)) return p;
    if (ec_is_infinity(p)) return q;
    const F u1 = fe_mul(p.x, q.zz);
    const F u2 = fe_mul(q.x, p.zz);
    const F s1 = fe_mul(p.y, q.zzz);
    const F s2 = fe_mul(q.y, p.zzz);
    const F pd = fe_sub(u2, u1);
    const F rd = fe_sub(s2, s1);
    if (fe_is_zero(pd)) return fe_is_zero(rd) ? ec_dbl(p) : ec_infinity<F>();
    const F pp = fe_sqr(pd);
    const F ppp = fe_mul(pd, pp);
    const F qq = fe_mul(u1, pp);
    ec_xyzz<F> r;
    r.x = fe_sub(fe_sub(fe_sub(fe_sqr(rd), ppp), qq), qq);
    r.y = fe_sub(fe_mul(rd, fe_sub(qq, r.x)), fe_mul(s1, ppp));
    r.zz = fe_mul(fe_mul(p.zz, q.zz), pp);
    r.zzz = fe_mul(fe_mul(p.zzz, q.zzz), ppp);
    return r;
}

template <class F>
FP_CALL ec_xyzz<F> ec_add(const ec_xyzz<F>& p, const ec_xyzz<F>& q)
{
    return ec_add_inline(p, q);
}

// (X / ZZ, Y / ZZZ) with one inversion: t = 1 / (ZZ * ZZZ) gives both denominators.
template <class F>
FP_CALL ec_affine<F> ec_to_affine(const ec_xyzz<F>& p)
{
    ec_affine<F> r;
    if (ec_is_infinity(p)) {
        r.x = fe_zero<F>(); r.y = fe_zero<F>();
        return r;
    }
    const F t = fe_inv(fe_mul(p.zz, p.zzz));
    r.x = fe_mul(p.x, fe_mul(t, p.zzz));
    r.y = fe_mul(p.y, fe_mul(t, p.zz));
    return r;
}

// Arrays of points: affine point i is field elements 2i, 2i + 1 (x then y), XYZZ point i is
// elements 4i .. 4i + 3.
template <class F>
FP_FN ec_affine<F> ec_affine_load(const uint4* v, unsigned long long i)
{
    ec_affine<F> p;
    p.x = fe_load<F>(v, 2 * i);
    p.y = fe_load<F>(v, 2 * i + 1);
    return p;
}

template <class F>
FP_FN void ec_affine_store(uint4* v, unsigned long long i, const ec_affine<F>& p)
{
    fe_store(v, 2 * i, p.x);
    fe_store(v, 2 * i + 1, p.y);
}

template <class F>
FP_FN ec_xyzz<F> ec_xyzz_load(const uint4* v, unsigned long long i)
{
    ec_xyzz<F> p;
    p.x = fe_load<F>(v, 4 * i);
    p.y = fe_load<F>(v, 4 * i + 1);
    p.zz = fe_load<F>(v, 4 * i + 2);
    p.zzz = fe_load<F>(v, 4 * i + 3);
    return p;
}

template <class F>
FP_FN void ec_xyzz_store(uint4* v, unsigned long long i, const ec_xyzz<F>& p)
{
    fe_store(v, 4 * i, p.x);
    fe_store(v, 4 * i + 1, p.y);
    fe_store(v, 4 * i + 2, p.zz);
    fe_store(v, 4 * i + 3, p.zzz);
}

// 2^k * P: bucket reduction scales partial sums by powers of two.
template <class F>
FP_FN ec_xyzz<F> ec_dbl_n(ec_xyzz<F> p, unsigned int k)
{
#pragma unroll 1
    for (unsigned int i = 0; i < k; ++i) p = ec_dbl(p);
    return p;
}
