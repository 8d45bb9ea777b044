// The quadratic extension Fp2 = Fp[u] / (u^2 + 1) of BLS12-381, the field of G2's coordinates.
//
// An element c0 + c1 u is two fp_t in Montgomery form, c0 first: the order of the 96-byte
// coordinates in the host's G2 "xy little-endian" encoding (x.c0, x.c1, y.c0, y.c1), so an
// array of Fp2 elements is an array of Fp elements twice as long.
//
// Multiplication and squaring are calls rather than inlined: each holds three inlined Fp
// multiplications, and a G2 point addition makes about ten of them. Their Fp products are
// fp.cuh's fp_mul_curve (unrolled, or rolled with EC_PRODUCTS_ROLLED).
#pragma once

#include "fp.cuh"

struct fp2_t {
    fp_t c0, c1;
};

FP_FN fp2_t fp2_make(const fp_t& c0, const fp_t& c1)
{
    fp2_t r;
    r.c0 = c0; r.c1 = c1;
    return r;
}

FP_FN fp2_t fp2_zero() { return fp2_make(fp_zero(), fp_zero()); }
FP_FN fp2_t fp2_one() { return fp2_make(fp_one(), fp_zero()); }
FP_FN bool fp2_is_zero(const fp2_t& a) { return fp_is_zero(a.c0) && fp_is_zero(a.c1); }
FP_FN fp2_t fp2_add(const fp2_t& a, const fp2_t& b) { return fp2_make(fp_add(a.c0, b.c0), fp_add(a.c1, b.c1)); }
FP_FN fp2_t fp2_sub(const fp2_t& a, const fp2_t& b) { return fp2_make(fp_sub(a.c0, b.c0), fp_sub(a.c1, b.c1)); }
FP_FN fp2_t fp2_dbl(const fp2_t& a) { return fp2_make(fp_dbl(a.c0), fp_dbl(a.c1)); }
FP_FN fp2_t fp2_neg(const fp2_t& a) { return fp2_make(fp_neg(a.c0), fp_neg(a.c1)); }

// (a0 + a1 u)(b0 + b1 u) = a0 b0 - a1 b1 + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) u: three
// multiplications instead of four.
FP_CALL fp2_t fp2_mul(const fp2_t& a, const fp2_t& b)
{
    const fp_t t0 = fp_mul_curve(a.c0, b.c0);
    const fp_t t1 = fp_mul_curve(a.c1, b.c1);
    const fp_t t2 = fp_mul_curve(fp_add(a.c0, a.c1), fp_add(b.c0, b.c1));
    return fp2_make(fp_sub(t0, t1), fp_sub(fp_sub(t2, t0), t1));
}

// (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u.
FP_CALL fp2_t fp2_sqr(const fp2_t& a)
{
    const fp_t t = fp_mul_curve(a.c0, a.c1);
    return fp2_make(fp_mul_curve(fp_add(a.c0, a.c1), fp_sub(a.c0, a.c1)), fp_dbl(t));
}

// 1 / (a0 + a1 u) = (a0 - a1 u) / (a0^2 + a1^2); 0 for 0, as fp_inv.
FP_CALL fp2_t fp2_inv(const fp2_t& a)
{
    const fp_t t = fp_inv(fp_add(fp_sqr_curve(a.c0), fp_sqr_curve(a.c1)));
    return fp2_make(fp_mul_curve(a.c0, t), fp_neg(fp_mul_curve(a.c1, t)));
}

FP_FN fp2_t fp2_load(const uint4* v, unsigned long long i)
{
    return fp2_make(fp_load(v, 2 * i), fp_load(v, 2 * i + 1));
}

FP_FN void fp2_store(uint4* v, unsigned long long i, const fp2_t& x)
{
    fp_store(v, 2 * i, x.c0);
    fp_store(v, 2 * i + 1, x.c1);
}
