// Arithmetic in the BLS12-381 scalar field Fr, r = 0x73eda753...ffffffff00000001 (255 bits).
//
// Layout: an element is 32 bytes, the little-endian 64-bit limbs of the shared (n, 4) uint64
// format, held here as eight little-endian 32-bit limbs (l[0] least significant). Values are
// in Montgomery form x * 2^256 mod r and fully reduced (< r) at every function boundary.
//
// Why 32-bit limbs: the GPU multiplies 32 x 32 bits natively (IMAD for the low half, IMAD.HI
// at half that rate for the high half); a 64-bit multiply is emulated by several of them.
// Multiplication is Montgomery's: a * b by Karatsuba over 128-bit halves (48 products), then
// a reduction step per 32-bit word with 6 products each (r's two low limbs, 1 and 2^32 - 1,
// need only adds), carries in PTX add.cc chains; FR_MUL_CIOS builds the interleaved form (112
// products) instead. The integer pipes are what bound an NTT (kernels/NOTES_ntt.md), so
// products are what the code economises.
//
// Bounds that the code relies on (checked by the tests, not at run time):
//   2r < 2^256, so a sum of two reduced values never carries out of 256 bits;
//   2^256 < 3r, so any 256-bit integer is reduced mod r by at most two subtractions of r;
//   with a < r and b < 2^256, a * b < 2^256 * r: the result is below a * b / 2^256 + r < 2r
//   before its last subtraction, and a CIOS accumulator stays below 2^32 * 2r < 2^288 (nine
//   limbs suffice).
//
// The carry-chain primitives have a host emulation (a carry flag in a static variable, set as
// the hardware sets it) so the same algorithm also compiles and runs on the CPU, which lets CI
// check it, each build option, without a GPU.
#pragma once

#ifndef __CUDACC_RTC__
#include <vector_types.h>
#endif

#if defined(__CUDACC__)
#define FR_FN __host__ __device__ __forceinline__
#else
#define FR_FN inline
#endif

struct fr_t {
    unsigned int l[8];
};

FR_FN constexpr unsigned int fr_modulus_limb(int i)
{
    return i == 0 ? 0x00000001u : i == 1 ? 0xffffffffu : i == 2 ? 0xfffe5bfeu
         : i == 3 ? 0x53bda402u : i == 4 ? 0x09a1d805u : i == 5 ? 0x3339d808u
         : i == 6 ? 0x299d7d48u : 0x73eda753u;
}

// 2^256 mod r: the Montgomery form of 1.
FR_FN constexpr unsigned int fr_one_limb(int i)
{
    return i == 0 ? 0xfffffffeu : i == 1 ? 0x00000001u : i == 2 ? 0x00034802u
         : i == 3 ? 0x5884b7fau : i == 4 ? 0xecbc4ff5u : i == 5 ? 0x998c4fefu
         : i == 6 ? 0xacc5056fu : 0x1824b159u;
}

// 2^512 mod r: multiplying a canonical value by it in Montgomery form yields x * 2^256.
FR_FN constexpr unsigned int fr_r2_limb(int i)
{
    return i == 0 ? 0xf3f29c6du : i == 1 ? 0xc999e990u : i == 2 ? 0x87925c23u
         : i == 3 ? 0x2b6cedcbu : i == 4 ? 0x7254398fu : i == 5 ? 0x05d31496u
         : i == 6 ? 0x9f59ff11u : 0x0748d9d9u;
}

// -r^-1 mod 2^32. r = 1 mod 2^32, so this is -1 and the reduction digit is simply -t[0].
#define FR_NINV 0xffffffffu

namespace fr_cc {

#if !defined(__CUDA_ARCH__)
static unsigned int host_carry;  // stands in for the condition-code carry flag
#endif

// Each function mirrors one PTX instruction; volatile keeps the chain in program order, and
// nothing the compiler emits between them touches the carry flag.
#if defined(__CUDA_ARCH__)
#define FR_ASM1(op, a, b) unsigned int r; asm volatile(op " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
FR_FN unsigned int add_cc(unsigned int a, unsigned int b) { FR_ASM1("add.cc.u32", a, b) }
FR_FN unsigned int addc_cc(unsigned int a, unsigned int b) { FR_ASM1("addc.cc.u32", a, b) }
FR_FN unsigned int addc(unsigned int a, unsigned int b) { FR_ASM1("addc.u32", a, b) }
FR_FN unsigned int sub_cc(unsigned int a, unsigned int b) { FR_ASM1("sub.cc.u32", a, b) }
FR_FN unsigned int subc_cc(unsigned int a, unsigned int b) { FR_ASM1("subc.cc.u32", a, b) }
FR_FN unsigned int subc(unsigned int a, unsigned int b) { FR_ASM1("subc.u32", a, b) }
#undef FR_ASM1
#else
typedef unsigned long long u64;
// The flag holds what the hardware holds: a carry after additions, and after subtractions
// its complement, "no borrow" (a - b is a + ~b + 1). So a chain that mixes the two, which
// PTX leaves to the hardware, gives here what it gives on the GPU.
inline unsigned int put(u64 s) { host_carry = (unsigned int)(s >> 32); return (unsigned int)s; }
inline unsigned int borrow(unsigned int a, u64 b) { host_carry = (u64)a >= b; return (unsigned int)((u64)a - b); }
inline unsigned int add_cc(unsigned int a, unsigned int b) { return put((u64)a + b); }
inline unsigned int addc_cc(unsigned int a, unsigned int b) { return put((u64)a + b + host_carry); }
inline unsigned int addc(unsigned int a, unsigned int b) { return (unsigned int)((u64)a + b + host_carry); }
inline unsigned int sub_cc(unsigned int a, unsigned int b) { return borrow(a, b); }
inline unsigned int subc_cc(unsigned int a, unsigned int b) { return borrow(a, (u64)b + 1u - host_carry); }
inline unsigned int subc(unsigned int a, unsigned int b) { return (unsigned int)((u64)a - b - (1u - host_carry)); }
#endif

}  // namespace fr_cc

FR_FN fr_t fr_zero()
{
    fr_t z;
#pragma unroll
    for (int j = 0; j < 8; ++j) z.l[j] = 0;
    return z;
}

FR_FN fr_t fr_one()
{
    fr_t o;
#pragma unroll
    for (int j = 0; j < 8; ++j) o.l[j] = fr_one_limb(j);
    return o;
}

// x < 2r  ->  x mod r.
FR_FN fr_t fr_reduce_once(const fr_t& x)
{
    using namespace fr_cc;
    fr_t d;
    d.l[0] = sub_cc(x.l[0], fr_modulus_limb(0));
#pragma unroll
    for (int j = 1; j < 8; ++j) d.l[j] = subc_cc(x.l[j], fr_modulus_limb(j));
    const unsigned int below = subc(0u, 0u);  // all ones when x < r
#pragma unroll
    for (int j = 0; j < 8; ++j) d.l[j] = below ? x.l[j] : d.l[j];
    return d;
}

// Any 256-bit integer -> its residue mod r (the policy for canonical inputs >= r).
FR_FN fr_t fr_reduce_canonical(const fr_t& x)
{
    return fr_reduce_once(fr_reduce_once(x));
}

FR_FN fr_t fr_add(const fr_t& a, const fr_t& b)
{
    using namespace fr_cc;
    fr_t s;
    s.l[0] = add_cc(a.l[0], b.l[0]);
#pragma unroll
    for (int j = 1; j < 7; ++j) s.l[j] = addc_cc(a.l[j], b.l[j]);
    s.l[7] = addc(a.l[7], b.l[7]);
    return fr_reduce_once(s);
}

FR_FN fr_t fr_sub(const fr_t& a, const fr_t& b)
{
    using namespace fr_cc;
    fr_t d;
    d.l[0] = sub_cc(a.l[0], b.l[0]);
#pragma unroll
    for (int j = 1; j < 8; ++j) d.l[j] = subc_cc(a.l[j], b.l[j]);
    const unsigned int wrapped = subc(0u, 0u);  // all ones when a < b: add r back
    d.l[0] = add_cc(d.l[0], fr_modulus_limb(0) & wrapped);
#pragma unroll
    for (int j = 1; j < 7; ++j) d.l[j] = addc_cc(d.l[j], fr_modulus_limb(j) & wrapped);
    d.l[7] = addc(d.l[7], fr_modulus_limb(7) & wrapped);
    return d;
}

// a - b + r, in [1, 2r) for a, b < r: a difference that only feeds fr_mul's second operand
// needs no conditional correction (16 integer instructions instead of 25).
FR_FN fr_t fr_sub_unreduced(const fr_t& a, const fr_t& b)
{
    using namespace fr_cc;
    fr_t d;
    d.l[0] = sub_cc(a.l[0], b.l[0]);
#pragma unroll
    for (int j = 1; j < 7; ++j) d.l[j] = subc_cc(a.l[j], b.l[j]);
    d.l[7] = subc(a.l[7], b.l[7]);
    d.l[0] = add_cc(d.l[0], fr_modulus_limb(0));
#pragma unroll
    for (int j = 1; j < 7; ++j) d.l[j] = addc_cc(d.l[j], fr_modulus_limb(j));
    d.l[7] = addc(d.l[7], fr_modulus_limb(7));
    return d;
}

FR_FN fr_t fr_neg(const fr_t& a)
{
    return fr_sub(fr_zero(), a);
}

FR_FN unsigned int fr_mulhi(unsigned int a, unsigned int b)
{
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return (unsigned int)(((unsigned long long)a * b) >> 32);
#endif
}

// The 64-bit product of two limbs, as a low half (IMAD, one multiply-pipe slot) and a high
// half (IMAD.HI, two slots). FR_MUL_WIDE forms it whole instead (one IMAD.WIDE.U32): fewer
// instructions, but measured no faster on the H200 (the wide form costs the pipe as much as
// the two halves), so it stays a build option for comparison.
FR_FN void fr_mul_wide(unsigned int a, unsigned int b, unsigned int& lo, unsigned int& hi)
{
#if defined(FR_MUL_WIDE)
    const unsigned long long p = (unsigned long long)a * b;
    lo = (unsigned int)p;
    hi = (unsigned int)(p >> 32);
#else
    lo = a * b;
    hi = fr_mulhi(a, b);
#endif
}

// t += a * bi over t[0..8] (t[0..8] = a * bi when first). Every product is formed first and
// the carries then run through plain add chains: so written, the compiler keeps products on
// the multiply pipe and carries on the integer pipe. With multiply-add-with-carry chains
// (mad.lo.cc/madc.hi.cc) it instead recomputed many sums with extra carry-in multiplies,
// about 10% more multiply-pipe work in the NTT kernel. hi[7] goes in with the low halves'
// last carry (no overflow: the whole sum < 2^288), so no limb needs zeroing first.
template <bool first>
FR_FN void fr_add_row(unsigned int t[9], const fr_t& a, unsigned int bi)
{
    using namespace fr_cc;
    unsigned int lo[8], hi[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) fr_mul_wide(a.l[j], bi, lo[j], hi[j]);
    if (first) {
#pragma unroll
        for (int j = 0; j < 8; ++j) t[j] = lo[j];
        t[8] = hi[7];
    } else {
        t[0] = add_cc(t[0], lo[0]);
#pragma unroll
        for (int j = 1; j < 8; ++j) t[j] = addc_cc(t[j], lo[j]);
        t[8] = addc(hi[7], 0u);
    }
    t[1] = add_cc(t[1], hi[0]);
#pragma unroll
    for (int j = 1; j < 7; ++j) t[j + 1] = addc_cc(t[j + 1], hi[j]);
    t[8] = addc(t[8], 0u);
}

// One Montgomery reduction step: t += m * r with m making t[0] zero, then t >>= 32, leaving
// t[8] zero. m = -t0 (r^-1 = 1 mod 2^32); r[0] = 1, so t0 + m * r[0] = t0 + m is 0 and a
// carry when t0 != 0; r[1] = 2^32 - 1, so m * r[1] has low word -m = t0 and high word m - 1
// (0 when m = 0). The flag after a subtraction means "no borrow", so each carry comes from
// its own kind of chain.
FR_FN void fr_reduce_step(unsigned int t[9])
{
    using namespace fr_cc;
    const unsigned int t0 = t[0];
    const unsigned int m = 0u - t0;
    (void)add_cc(t0, 0xffffffffu);  // the carry of t0 + m: t0 != 0
    t[1] = addc_cc(t[1], t0);
    unsigned int lo[8], hi[8];
#pragma unroll
    for (int j = 2; j < 8; ++j) fr_mul_wide(m, fr_modulus_limb(j), lo[j], hi[j]);
#pragma unroll
    for (int j = 2; j < 8; ++j) t[j] = addc_cc(t[j], lo[j]);
    t[8] = addc(t[8], hi[7]);
    (void)sub_cc(0u, t0);  // the borrow t0 != 0 again, for m - 1 (0 when m = 0)
    t[2] = add_cc(t[2], subc(m, 0u));
#pragma unroll
    for (int j = 2; j < 7; ++j) t[j + 1] = addc_cc(t[j + 1], hi[j]);
    t[8] = addc(t[8], 0u);
#pragma unroll
    for (int j = 0; j < 8; ++j) t[j] = t[j + 1];
    t[8] = 0;
}

#if !defined(FR_MUL_CIOS)
// p[0..7] = a[0..3] * b[0..3], row by row.
FR_FN void fr_mul4(const unsigned int a[4], const unsigned int b[4], unsigned int p[8])
{
    using namespace fr_cc;
    unsigned int lo[4], hi[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) fr_mul_wide(a[j], b[i], lo[j], hi[j]);
        if (i == 0) {
            p[0] = lo[0];
            p[1] = add_cc(lo[1], hi[0]);
            p[2] = addc_cc(lo[2], hi[1]);
            p[3] = addc_cc(lo[3], hi[2]);
            p[4] = addc(hi[3], 0u);
        } else {
            p[i] = add_cc(p[i], lo[0]);
            p[i + 1] = addc_cc(p[i + 1], lo[1]);
            p[i + 2] = addc_cc(p[i + 2], lo[2]);
            p[i + 3] = addc_cc(p[i + 3], lo[3]);
            p[i + 4] = addc(hi[3], 0u);
            p[i + 1] = add_cc(p[i + 1], hi[0]);
            p[i + 2] = addc_cc(p[i + 2], hi[1]);
            p[i + 3] = addc_cc(p[i + 3], hi[2]);
            p[i + 4] = addc(p[i + 4], 0u);
        }
    }
}
#endif

// A file that includes this one after defining FR_DEFAULT_FP64 (ntt.cu, fr_vector.cu) gets
// the FP64 product unless a build option names another: FR_MUL_INTEGER (the Karatsuba product
// below), FR_MUL_CIOS or FR_MUL_WIDE. The MSM's files keep the integer product: their Fr work
// is a few conversions, and their kernels' registers are the integer pipe's already.
#if defined(FR_DEFAULT_FP64) && !defined(FR_MUL_INTEGER) && !defined(FR_MUL_CIOS) && !defined(FR_MUL_WIDE)
#define FR_MUL_FP64
#endif
#if defined(FR_MUL_FP64)
#include "fr_fp64.cuh"
#endif

// a * b * 2^-256 mod r, for a < r and b < r, or a < r and b < 2^256 (an unreduced operand
// such as fr_sub_unreduced's goes second): then a * b < 2^256 * r, and the result is below
// a * b / 2^256 + r < 2r before the last subtraction.
//
// The 512-bit a * b comes from three 128 x 128-bit products (Karatsuba: 48 products instead
// of 64), then the low half's Montgomery reduction (48, leaving at most r) plus the high half:
// 96 products, against 112 for CIOS (FR_MUL_CIOS: 8 rounds of a row a * b_i, 8 products, and
// a reduction step, 6), for some 40 more integer-pipe additions. Measured on the H200: 1.4%
// more products per second and 2.6% more butterflies (kernels/NOTES_ntt.md), less than the
// products saved, because the integer adds and the multiplies now load their pipes alike.
FR_FN fr_t fr_mul(const fr_t& a, const fr_t& b)
{
#if defined(FR_MUL_FP64)
    return fr_mul_fp64(a, b);  // the same function on the FP64 pipe (kernels/fr_fp64.cuh)
#else
    unsigned int t[9];
#if !defined(FR_MUL_CIOS)
    using namespace fr_cc;
    unsigned int p0[8], p2[8], sa[4], sb[4], p1[9];
    fr_mul4(a.l, b.l, p0);
    fr_mul4(a.l + 4, b.l + 4, p2);
    sa[0] = add_cc(a.l[0], a.l[4]);
#pragma unroll
    for (int j = 1; j < 4; ++j) sa[j] = addc_cc(a.l[j], a.l[j + 4]);
    const unsigned int ca = addc(0u, 0u);
    sb[0] = add_cc(b.l[0], b.l[4]);
#pragma unroll
    for (int j = 1; j < 4; ++j) sb[j] = addc_cc(b.l[j], b.l[j + 4]);
    const unsigned int cb = addc(0u, 0u);
    fr_mul4(sa, sb, p1);
    // (sa + ca 2^128)(sb + cb 2^128) = sa sb + (ca sb + cb sa) 2^128 + ca cb 2^256 < 2^258
    const unsigned int ma = 0u - ca, mb = 0u - cb;
    p1[4] = add_cc(p1[4], sb[0] & ma);
#pragma unroll
    for (int j = 1; j < 4; ++j) p1[j + 4] = addc_cc(p1[j + 4], sb[j] & ma);
    p1[8] = addc(ca & cb, 0u);
    p1[4] = add_cc(p1[4], sa[0] & mb);
#pragma unroll
    for (int j = 1; j < 4; ++j) p1[j + 4] = addc_cc(p1[j + 4], sa[j] & mb);
    p1[8] = addc(p1[8], 0u);
    // middle = p1 - p0 - p2 = a0 b1 + a1 b0, below 2^257
    p1[0] = sub_cc(p1[0], p0[0]);
#pragma unroll
    for (int j = 1; j < 8; ++j) p1[j] = subc_cc(p1[j], p0[j]);
    p1[8] = subc(p1[8], 0u);
    p1[0] = sub_cc(p1[0], p2[0]);
#pragma unroll
    for (int j = 1; j < 8; ++j) p1[j] = subc_cc(p1[j], p2[j]);
    p1[8] = subc(p1[8], 0u);
    // a * b = p0 + middle 2^128 + p2 2^256: the low half into t, the high half into p2
#pragma unroll
    for (int j = 0; j < 4; ++j) t[j] = p0[j];
    t[4] = add_cc(p0[4], p1[0]);
#pragma unroll
    for (int j = 5; j < 8; ++j) t[j] = addc_cc(p0[j], p1[j - 4]);
#pragma unroll
    for (int j = 0; j < 5; ++j) p2[j] = addc_cc(p2[j], p1[j + 4]);
    p2[5] = addc_cc(p2[5], 0u);
    p2[6] = addc_cc(p2[6], 0u);
    p2[7] = addc(p2[7], 0u);
    t[8] = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) fr_reduce_step(t);
    // (low half + M r) / 2^256 <= r, plus the high half: below 2r, so no carry out
    t[0] = add_cc(t[0], p2[0]);
#pragma unroll
    for (int j = 1; j < 7; ++j) t[j] = addc_cc(t[j], p2[j]);
    t[7] = addc(t[7], p2[7]);
#else
    fr_add_row<true>(t, a, b.l[0]);
    fr_reduce_step(t);
#pragma unroll
    for (int i = 1; i < 8; ++i) {
        fr_add_row<false>(t, a, b.l[i]);
        fr_reduce_step(t);
    }
#endif
    fr_t s;
#pragma unroll
    for (int j = 0; j < 8; ++j) s.l[j] = t[j];
    return fr_reduce_once(s);
#endif
}

FR_FN fr_t fr_sqr(const fr_t& a)
{
    return fr_mul(a, a);
}

// Canonical integer (any 256-bit value, reduced mod r first) -> Montgomery form.
FR_FN fr_t fr_to_mont(const fr_t& x)
{
    fr_t r2;
#pragma unroll
    for (int j = 0; j < 8; ++j) r2.l[j] = fr_r2_limb(j);
    return fr_mul(fr_reduce_canonical(x), r2);
}

// Montgomery form -> canonical integer in [0, r).
FR_FN fr_t fr_from_mont(const fr_t& x)
{
    fr_t one = fr_zero();
    one.l[0] = 1;
    return fr_mul(x, one);
}

// Element i of a vector in the (n, 4) uint64 format, seen as pairs of 16-byte words.
FR_FN fr_t fr_load(const uint4* v, unsigned long long i)
{
    const uint4 a = v[2 * i], b = v[2 * i + 1];
    fr_t x;
    x.l[0] = a.x; x.l[1] = a.y; x.l[2] = a.z; x.l[3] = a.w;
    x.l[4] = b.x; x.l[5] = b.y; x.l[6] = b.z; x.l[7] = b.w;
    return x;
}

FR_FN void fr_store(uint4* v, unsigned long long i, const fr_t& x)
{
    v[2 * i] = make_uint4(x.l[0], x.l[1], x.l[2], x.l[3]);
    v[2 * i + 1] = make_uint4(x.l[4], x.l[5], x.l[6], x.l[7]);
}

#if defined(__CUDACC__)
// Read-only path for tables that no kernel writes while they are read.
__device__ __forceinline__ fr_t fr_load_ro(const uint4* v, unsigned long long i)
{
    const uint4 a = __ldg(v + 2 * i), b = __ldg(v + 2 * i + 1);
    fr_t x;
    x.l[0] = a.x; x.l[1] = a.y; x.l[2] = a.z; x.l[3] = a.w;
    x.l[4] = b.x; x.l[5] = b.y; x.l[6] = b.z; x.l[7] = b.w;
    return x;
}
#else
// Host builds (the CPU tests run fr_vector.cu's kernels this way) have no read-only cache path.
inline fr_t fr_load_ro(const uint4* v, unsigned long long i) { return fr_load(v, i); }
#endif
