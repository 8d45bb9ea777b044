// BLS12-381 G1 (y^2 = x^3 + 4 over Fp) point arithmetic on Montgomery-form coordinates.
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
// inlined field multiplications of ~600 instructions, and inlining them into every kernel
// made one module take minutes to compile for no measurable gain per operation.
#pragma once

#include "fp.cuh"

struct g1_affine_t {
    fp_t x, y;
};

struct g1_xyzz_t {
    fp_t x, y, zz, zzz;
};

FP_FN g1_xyzz_t g1_infinity()
{
    g1_xyzz_t r;
    r.x = fp_zero(); r.y = fp_zero(); r.zz = fp_zero(); r.zzz = fp_zero();
    return r;
}

FP_FN bool g1_is_infinity(const g1_xyzz_t& p)
{
    return fp_is_zero(p.zz);
}

FP_FN bool g1_affine_is_infinity(const g1_affine_t& p)
{
    return fp_is_zero(p.x) && fp_is_zero(p.y);
}

FP_FN g1_xyzz_t g1_from_affine(const g1_affine_t& p)
{
    if (g1_affine_is_infinity(p)) return g1_infinity();
    g1_xyzz_t r;
    r.x = p.x; r.y = p.y; r.zz = fp_one(); r.zzz = fp_one();
    return r;
}

FP_FN g1_affine_t g1_affine_neg(const g1_affine_t& p)
{
    g1_affine_t r;
    r.x = p.x;
    r.y = fp_neg(p.y);  // -0 = 0 keeps infinity as it is
    return r;
}

FP_FN g1_xyzz_t g1_neg(const g1_xyzz_t& p)
{
    g1_xyzz_t r = p;
    r.y = fp_neg(p.y);
    return r;
}

// 2P for an affine P ("mdbl-2008-s-1").
FP_CALL g1_xyzz_t g1_dbl_affine(const g1_affine_t& p)
{
    if (g1_affine_is_infinity(p)) return g1_infinity();
    const fp_t u = fp_dbl(p.y);
    const fp_t v = fp_sqr(u);
    const fp_t w = fp_mul(u, v);
    const fp_t s = fp_mul(p.x, v);
    const fp_t x2 = fp_sqr(p.x);
    const fp_t m = fp_add(fp_dbl(x2), x2);
    g1_xyzz_t r;
    r.x = fp_sub(fp_sub(fp_sqr(m), s), s);
    r.y = fp_sub(fp_mul(m, fp_sub(s, r.x)), fp_mul(w, p.y));
    r.zz = v;
    r.zzz = w;
    return r;
}

// 2P ("dbl-2008-s-1", a = 0).
FP_CALL g1_xyzz_t g1_dbl(const g1_xyzz_t& p)
{
    if (g1_is_infinity(p)) return p;
    const fp_t u = fp_dbl(p.y);
    const fp_t v = fp_sqr(u);
    const fp_t w = fp_mul(u, v);
    const fp_t s = fp_mul(p.x, v);
    const fp_t x2 = fp_sqr(p.x);
    const fp_t m = fp_add(fp_dbl(x2), x2);
    g1_xyzz_t r;
    r.x = fp_sub(fp_sub(fp_sqr(m), s), s);
    r.y = fp_sub(fp_mul(m, fp_sub(s, r.x)), fp_mul(w, p.y));
    r.zz = fp_mul(v, p.zz);
    r.zzz = fp_mul(w, p.zzz);
    return r;
}

// P + Q with Q affine ("madd-2008-s"). This one is also inlined where it is the inner loop
// (bucket accumulation, batch addition): there the call's spills of the accumulator to the
// stack cost more than the longer compile.
FP_FN g1_xyzz_t g1_add_affine_inline(const g1_xyzz_t& p, const g1_affine_t& q)
{
    if (g1_affine_is_infinity(q)) return p;
    if (g1_is_infinity(p)) return g1_from_affine(q);
    const fp_t u2 = fp_mul(q.x, p.zz);
    const fp_t s2 = fp_mul(q.y, p.zzz);
    const fp_t pd = fp_sub(u2, p.x);
    const fp_t rd = fp_sub(s2, p.y);
    if (fp_is_zero(pd)) {
        // Same x: Q = P (double it) or Q = -P (the sum is infinity).
        return fp_is_zero(rd) ? g1_dbl_affine(q) : g1_infinity();
    }
    const fp_t pp = fp_sqr(pd);
    const fp_t ppp = fp_mul(pd, pp);
    const fp_t qq = fp_mul(p.x, pp);
    g1_xyzz_t r;
    r.x = fp_sub(fp_sub(fp_sub(fp_sqr(rd), ppp), qq), qq);
    r.y = fp_sub(fp_mul(rd, fp_sub(qq, r.x)), fp_mul(p.y, ppp));
    r.zz = fp_mul(p.zz, pp);
    r.zzz = fp_mul(p.zzz, ppp);
    return r;
}

FP_CALL g1_xyzz_t g1_add_affine(const g1_xyzz_t& p, const g1_affine_t& q)
{
    return g1_add_affine_inline(p, q);
}

// P + Q ("add-2008-s").
FP_CALL g1_xyzz_t g1_add(const g1_xyzz_t& p, const g1_xyzz_t& q)
{
    if (g1_is_infinity(q)) return p;
    if (g1_is_infinity(p)) return q;
    const fp_t u1 = fp_mul(p.x, q.zz);
    const fp_t u2 = fp_mul(q.x, p.zz);
    const fp_t s1 = fp_mul(p.y, q.zzz);
    const fp_t s2 = fp_mul(q.y, p.zzz);
    const fp_t pd = fp_sub(u2, u1);
    const fp_t rd = fp_sub(s2, s1);
    if (fp_is_zero(pd)) return fp_is_zero(rd) ? g1_dbl(p) : g1_infinity();
    const fp_t pp = fp_sqr(pd);
    const fp_t ppp = fp_mul(pd, pp);
    const fp_t qq = fp_mul(u1, pp);
    g1_xyzz_t r;
    r.x = fp_sub(fp_sub(fp_sub(fp_sqr(rd), ppp), qq), qq);
    r.y = fp_sub(fp_mul(rd, fp_sub(qq, r.x)), fp_mul(s1, ppp));
    r.zz = fp_mul(fp_mul(p.zz, q.zz), pp);
    r.zzz = fp_mul(fp_mul(p.zzz, q.zzz), ppp);
    return r;
}

// (X / ZZ, Y / ZZZ) with one inversion: t = 1 / (ZZ * ZZZ) gives both denominators.
FP_CALL g1_affine_t g1_to_affine(const g1_xyzz_t& p)
{
    g1_affine_t r;
    if (g1_is_infinity(p)) {
        r.x = fp_zero(); r.y = fp_zero();
        return r;
    }
    const fp_t t = fp_inv(fp_mul(p.zz, p.zzz));
    r.x = fp_mul(p.x, fp_mul(t, p.zzz));
    r.y = fp_mul(p.y, fp_mul(t, p.zz));
    return r;
}

// Arrays of points as 16-byte words: 6 per affine point (x then y), 12 per XYZZ point.
FP_FN g1_affine_t g1_affine_load(const uint4* v, unsigned long long i)
{
    g1_affine_t p;
    p.x = fp_load(v, 2 * i);
    p.y = fp_load(v, 2 * i + 1);
    return p;
}

FP_FN void g1_affine_store(uint4* v, unsigned long long i, const g1_affine_t& p)
{
    fp_store(v, 2 * i, p.x);
    fp_store(v, 2 * i + 1, p.y);
}

FP_FN g1_xyzz_t g1_xyzz_load(const uint4* v, unsigned long long i)
{
    g1_xyzz_t p;
    p.x = fp_load(v, 4 * i);
    p.y = fp_load(v, 4 * i + 1);
    p.zz = fp_load(v, 4 * i + 2);
    p.zzz = fp_load(v, 4 * i + 3);
    return p;
}

FP_FN void g1_xyzz_store(uint4* v, unsigned long long i, const g1_xyzz_t& p)
{
    fp_store(v, 4 * i, p.x);
    fp_store(v, 4 * i + 1, p.y);
    fp_store(v, 4 * i + 2, p.zz);
    fp_store(v, 4 * i + 3, p.zzz);
}

// 2^k * P: bucket reduction scales partial sums by powers of two.
FP_FN g1_xyzz_t g1_dbl_n(g1_xyzz_t p, unsigned int k)
{
#pragma unroll 1
    for (unsigned int i = 0; i < k; ++i) p = g1_dbl(p);
    return p;
}
