// Arithmetic in the BLS12-381 base field Fp,
// p = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
// (381 bits).
//
// Layout: an element is 48 bytes, twelve little-endian 32-bit limbs (l[0] least significant),
// the same bytes as the little-endian 48-byte coordinates of the "xy little-endian" point
// encoding. On the device, values are in Montgomery form x * 2^384 mod p and fully reduced
// (< p) at every function boundary, so equality and zero tests compare limbs. Zero is zero in
// either form, which keeps the all-zero encoding of the point at infinity valid after
// conversion.
//
// Why 32-bit limbs: the GPU multiplies 32 x 32 bits natively (IMAD with .hi and carry-chained
// forms); 64-bit products are emulated by several of them. Multiplication is CIOS Montgomery,
// written as PTX mad.lo/madc.hi .cc chains: 2 * 12 * 12 products for a * b and as many for
// the reduction, about 600 integer instructions per multiplication.
//
// Bounds that the code relies on (checked by the tests, not at run time):
//   p < 2^381, so 2p < 2^384: a sum of two reduced values never carries out of 12 limbs;
//   with a, b < p the CIOS accumulator stays below 2^33 * p < 2^416: thirteen limbs suffice,
//   and it is below 2p after each round, so one conditional subtraction finishes.
//
// The carry-chain primitives have a host emulation (a carry flag in a static variable), so
// the same algorithm compiles and runs on the CPU and CI can check it without a GPU.
#pragma once

#if defined(__CUDACC__)
#define FP_FN __host__ __device__ __forceinline__
#define FP_CALL __host__ __device__ __noinline__
#else
#define FP_FN inline
#define FP_CALL inline
#endif

#define FP_LIMBS 12

struct fp_t {
    unsigned int l[FP_LIMBS];
};

FP_FN constexpr unsigned int fp_modulus_limb(int i)
{
    return i == 0 ? 0xffffaaabu : i == 1 ? 0xb9feffffu : i == 2 ? 0xb153ffffu
         : i == 3 ? 0x1eabfffeu : i == 4 ? 0xf6b0f624u : i == 5 ? 0x6730d2a0u
         : i == 6 ? 0xf38512bfu : i == 7 ? 0x64774b84u : i == 8 ? 0x434bacd7u
         : i == 9 ? 0x4b1ba7b6u : i == 10 ? 0x397fe69au : 0x1a0111eau;
}

// 2^384 mod p: the Montgomery form of 1.
FP_FN constexpr unsigned int fp_one_limb(int i)
{
    return i == 0 ? 0x0002fffdu : i == 1 ? 0x76090000u : i == 2 ? 0xc40c0002u
         : i == 3 ? 0xebf4000bu : i == 4 ? 0x53c758bau : i == 5 ? 0x5f489857u
         : i == 6 ? 0x70525745u : i == 7 ? 0x77ce5853u : i == 8 ? 0xa256ec6du
         : i == 9 ? 0x5c071a97u : i == 10 ? 0xfa80e493u : 0x15f65ec3u;
}

// 2^768 mod p: Montgomery-multiplying a canonical value by it yields x * 2^384 mod p.
FP_FN constexpr unsigned int fp_r2_limb(int i)
{
    return i == 0 ? 0x1c341746u : i == 1 ? 0xf4df1f34u : i == 2 ? 0x09d104f1u
         : i == 3 ? 0x0a76e6a6u : i == 4 ? 0x4c95b6d5u : i == 5 ? 0x8de5476cu
         : i == 6 ? 0x939d83c0u : i == 7 ? 0x67eb88a9u : i == 8 ? 0xb519952du
         : i == 9 ? 0x9a793e85u : i == 10 ? 0x92cae3aau : 0x11988fe5u;
}

// -p^-1 mod 2^32.
#define FP_NINV 0xfffcfffdu

namespace fp_cc {

#if !defined(__CUDA_ARCH__)
static unsigned int host_carry;  // stands in for the condition-code carry flag
#endif

// Each function mirrors one PTX instruction; volatile keeps the chain in program order, and
// nothing the compiler emits between them touches the carry flag.
#if defined(__CUDA_ARCH__)
#define FP_ASM1(op, a, b) unsigned int r; asm volatile(op " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
#define FP_ASM2(op, a, b, c) unsigned int r; asm volatile(op " %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
FP_FN unsigned int add_cc(unsigned int a, unsigned int b) { FP_ASM1("add.cc.u32", a, b) }
FP_FN unsigned int addc_cc(unsigned int a, unsigned int b) { FP_ASM1("addc.cc.u32", a, b) }
FP_FN unsigned int addc(unsigned int a, unsigned int b) { FP_ASM1("addc.u32", a, b) }
FP_FN unsigned int sub_cc(unsigned int a, unsigned int b) { FP_ASM1("sub.cc.u32", a, b) }
FP_FN unsigned int subc_cc(unsigned int a, unsigned int b) { FP_ASM1("subc.cc.u32", a, b) }
FP_FN unsigned int subc(unsigned int a, unsigned int b) { FP_ASM1("subc.u32", a, b) }
FP_FN unsigned int mad_lo_cc(unsigned int a, unsigned int b, unsigned int c) { FP_ASM2("mad.lo.cc.u32", a, b, c) }
FP_FN unsigned int madc_lo_cc(unsigned int a, unsigned int b, unsigned int c) { FP_ASM2("madc.lo.cc.u32", a, b, c) }
FP_FN unsigned int mad_hi_cc(unsigned int a, unsigned int b, unsigned int c) { FP_ASM2("mad.hi.cc.u32", a, b, c) }
FP_FN unsigned int madc_hi_cc(unsigned int a, unsigned int b, unsigned int c) { FP_ASM2("madc.hi.cc.u32", a, b, c) }
FP_FN unsigned int madc_hi(unsigned int a, unsigned int b, unsigned int c) { FP_ASM2("madc.hi.u32", a, b, c) }
#undef FP_ASM1
#undef FP_ASM2
#else
typedef unsigned long long u64;
inline unsigned int put(u64 s) { host_carry = (unsigned int)(s >> 32); return (unsigned int)s; }
inline unsigned int borrow(unsigned int a, u64 b) { host_carry = (u64)a < b; return (unsigned int)((u64)a - b); }
inline u64 lo(unsigned int a, unsigned int b) { return (unsigned int)((u64)a * b); }
inline u64 hi(unsigned int a, unsigned int b) { return ((u64)a * b) >> 32; }
inline unsigned int add_cc(unsigned int a, unsigned int b) { return put((u64)a + b); }
inline unsigned int addc_cc(unsigned int a, unsigned int b) { return put((u64)a + b + host_carry); }
inline unsigned int addc(unsigned int a, unsigned int b) { return (unsigned int)((u64)a + b + host_carry); }
inline unsigned int sub_cc(unsigned int a, unsigned int b) { return borrow(a, b); }
inline unsigned int subc_cc(unsigned int a, unsigned int b) { return borrow(a, (u64)b + host_carry); }
inline unsigned int subc(unsigned int a, unsigned int b) { return (unsigned int)((u64)a - b - host_carry); }
inline unsigned int mad_lo_cc(unsigned int a, unsigned int b, unsigned int c) { return put(lo(a, b) + c); }
inline unsigned int madc_lo_cc(unsigned int a, unsigned int b, unsigned int c) { return put(lo(a, b) + c + host_carry); }
inline unsigned int mad_hi_cc(unsigned int a, unsigned int b, unsigned int c) { return put(hi(a, b) + c); }
inline unsigned int madc_hi_cc(unsigned int a, unsigned int b, unsigned int c) { return put(hi(a, b) + c + host_carry); }
inline unsigned int madc_hi(unsigned int a, unsigned int b, unsigned int c) { return (unsigned int)(hi(a, b) + c + host_carry); }
#endif

}  // namespace fp_cc

FP_FN fp_t fp_zero()
{
    fp_t z;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) z.l[j] = 0;
    return z;
}

FP_FN fp_t fp_one()
{
    fp_t o;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) o.l[j] = fp_one_limb(j);
    return o;
}

FP_FN bool fp_is_zero(const fp_t& a)
{
    unsigned int acc = 0;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) acc |= a.l[j];
    return acc == 0;
}

FP_FN bool fp_equal(const fp_t& a, const fp_t& b)
{
    unsigned int acc = 0;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) acc |= a.l[j] ^ b.l[j];
    return acc == 0;
}

// x < 2p  ->  x mod p.
FP_FN fp_t fp_reduce_once(const fp_t& x)
{
    using namespace fp_cc;
    fp_t d;
    d.l[0] = sub_cc(x.l[0], fp_modulus_limb(0));
#pragma unroll
    for (int j = 1; j < FP_LIMBS; ++j) d.l[j] = subc_cc(x.l[j], fp_modulus_limb(j));
    const unsigned int below = subc(0u, 0u);  // all ones when x < p
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) d.l[j] = below ? x.l[j] : d.l[j];
    return d;
}

FP_FN fp_t fp_add(const fp_t& a, const fp_t& b)
{
    using namespace fp_cc;
    fp_t s;
    s.l[0] = add_cc(a.l[0], b.l[0]);
#pragma unroll
    for (int j = 1; j < FP_LIMBS - 1; ++j) s.l[j] = addc_cc(a.l[j], b.l[j]);
    s.l[FP_LIMBS - 1] = addc(a.l[FP_LIMBS - 1], b.l[FP_LIMBS - 1]);
    return fp_reduce_once(s);
}

FP_FN fp_t fp_sub(const fp_t& a, const fp_t& b)
{
    using namespace fp_cc;
    fp_t d;
    d.l[0] = sub_cc(a.l[0], b.l[0]);
#pragma unroll
    for (int j = 1; j < FP_LIMBS; ++j) d.l[j] = subc_cc(a.l[j], b.l[j]);
    const unsigned int wrapped = subc(0u, 0u);  // all ones when a < b: add p back
    d.l[0] = add_cc(d.l[0], fp_modulus_limb(0) & wrapped);
#pragma unroll
    for (int j = 1; j < FP_LIMBS - 1; ++j) d.l[j] = addc_cc(d.l[j], fp_modulus_limb(j) & wrapped);
    d.l[FP_LIMBS - 1] = addc(d.l[FP_LIMBS - 1], fp_modulus_limb(FP_LIMBS - 1) & wrapped);
    return d;
}

FP_FN fp_t fp_neg(const fp_t& a)
{
    return fp_sub(fp_zero(), a);
}

FP_FN fp_t fp_dbl(const fp_t& a)
{
    return fp_add(a, a);
}

// The reduction half of a CIOS round: t += m * p, the low limbs' carry added to `top` in
// t[FP_LIMBS] (the round's own top limb, or 0 when it has none); with m = t[0] * -1/p mod 2^32
// t[0] becomes zero, ready for the caller's shift.
FP_FN void fp_add_mp(unsigned int t[FP_LIMBS + 1], unsigned int m, unsigned int top)
{
    using namespace fp_cc;
    t[0] = mad_lo_cc(m, fp_modulus_limb(0), t[0]);  // zero by the choice of m; keeps the carry
#pragma unroll
    for (int j = 1; j < FP_LIMBS; ++j) t[j] = madc_lo_cc(m, fp_modulus_limb(j), t[j]);
    t[FP_LIMBS] = addc(top, 0u);
    t[1] = mad_hi_cc(m, fp_modulus_limb(0), t[1]);
#pragma unroll
    for (int j = 1; j < FP_LIMBS - 1; ++j) t[j + 1] = madc_hi_cc(m, fp_modulus_limb(j), t[j + 1]);
    t[FP_LIMBS] = madc_hi(m, fp_modulus_limb(FP_LIMBS - 1), t[FP_LIMBS]);
}

// One CIOS round: t += a * bi, then t += m * p with m making t[0] zero, then t >>= 32.
template <bool first>
FP_FN void fp_mul_round(unsigned int t[FP_LIMBS + 1], const fp_t& a, unsigned int bi)
{
    using namespace fp_cc;
    if (first) {
#pragma unroll
        for (int j = 0; j < FP_LIMBS; ++j) t[j] = a.l[j] * bi;
        t[FP_LIMBS] = 0;
    } else {
        t[0] = mad_lo_cc(a.l[0], bi, t[0]);
#pragma unroll
        for (int j = 1; j < FP_LIMBS; ++j) t[j] = madc_lo_cc(a.l[j], bi, t[j]);
        t[FP_LIMBS] = addc(0u, 0u);  // the previous round's shift left the top limb empty
    }
    t[1] = mad_hi_cc(a.l[0], bi, t[1]);
#pragma unroll
    for (int j = 1; j < FP_LIMBS - 1; ++j) t[j + 1] = madc_hi_cc(a.l[j], bi, t[j + 1]);
    t[FP_LIMBS] = madc_hi(a.l[FP_LIMBS - 1], bi, t[FP_LIMBS]);

    fp_add_mp(t, t[0] * FP_NINV, t[FP_LIMBS]);

#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) t[j] = t[j + 1];
}

// a * b * 2^-384 mod p, for a, b < p.
FP_FN fp_t fp_mul(const fp_t& a, const fp_t& b)
{
    unsigned int t[FP_LIMBS + 1];
    fp_mul_round<true>(t, a, b.l[0]);
#pragma unroll
    for (int i = 1; i < FP_LIMBS; ++i) fp_mul_round<false>(t, a, b.l[i]);
    fp_t s;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) s.l[j] = t[j];
    return fp_reduce_once(s);
}

// The same product with its twelve CIOS rounds in a loop instead of unrolled: one round's
// code (~50 instructions) instead of twelve, for hot loops that wait on instruction fetch
// (kernels/NOTES_msm.md: the affine rounds inline six ~590-instruction products). b's limbs
// move down one a round (11 moves), since a limb picked by a run-time index would go to
// local memory.
FP_FN fp_t fp_mul_rolled(const fp_t& a, const fp_t& b)
{
    unsigned int t[FP_LIMBS + 1];
    fp_t bb = b;
    fp_mul_round<true>(t, a, bb.l[0]);
#pragma unroll 1
    for (int i = 1; i < FP_LIMBS; ++i) {
#pragma unroll
        for (int j = 0; j < FP_LIMBS - 1; ++j) bb.l[j] = bb.l[j + 1];
        fp_mul_round<false>(t, a, bb.l[0]);
    }
    fp_t s;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) s.l[j] = t[j];
    return fp_reduce_once(s);
}

// a^2 * 2^-384 mod p for a < 2^382 (so any a < 2p): the 66 cross products a_i a_j (i < j)
// once, doubled, plus the 12 squares a_i^2 (78 limb products against fp_mul's 144), into 24
// limbs T; then the low half reduced alone by 12 Montgomery rounds, u = (T_lo + m p) / 2^384
// <= p, and the high half added: T_hi < 2^380 (a^2 < 2^764), so u + T_hi < 2p and one
// conditional subtraction finishes. About 444 multiply instructions against fp_mul's 576.
FP_FN fp_t fp_sqr_dedicated(const fp_t& a)
{
    using namespace fp_cc;
    unsigned int t[2 * FP_LIMBS];
#pragma unroll
    for (int j = 0; j < 2 * FP_LIMBS; ++j) t[j] = 0;
    // Row i adds a_i (a_{i+1} .. a_11) at limb 2i + 1; the rows before it fit below limb i + 12.
#pragma unroll
    for (int i = 0; i < FP_LIMBS - 1; ++i) {
        t[2 * i + 1] = mad_lo_cc(a.l[i], a.l[i + 1], t[2 * i + 1]);
#pragma unroll
        for (int j = i + 2; j < FP_LIMBS; ++j) t[i + j] = madc_lo_cc(a.l[i], a.l[j], t[i + j]);
        t[i + FP_LIMBS] = addc(0u, 0u);
        if (i + 1 == FP_LIMBS - 1) {
            t[2 * i + 2] = mad_hi_cc(a.l[i], a.l[i + 1], t[2 * i + 2]);
        } else {
            t[2 * i + 2] = mad_hi_cc(a.l[i], a.l[i + 1], t[2 * i + 2]);
#pragma unroll
            for (int j = i + 2; j < FP_LIMBS - 1; ++j) t[i + j + 1] = madc_hi_cc(a.l[i], a.l[j], t[i + j + 1]);
            t[i + FP_LIMBS] = madc_hi(a.l[i], a.l[FP_LIMBS - 1], t[i + FP_LIMBS]);
        }
    }
    t[0] = add_cc(t[0], t[0]);
#pragma unroll
    for (int j = 1; j < 2 * FP_LIMBS - 1; ++j) t[j] = addc_cc(t[j], t[j]);
    t[2 * FP_LIMBS - 1] = addc(t[2 * FP_LIMBS - 1], t[2 * FP_LIMBS - 1]);
    t[0] = mad_lo_cc(a.l[0], a.l[0], t[0]);
    t[1] = madc_hi_cc(a.l[0], a.l[0], t[1]);
#pragma unroll
    for (int i = 1; i < FP_LIMBS - 1; ++i) {
        t[2 * i] = madc_lo_cc(a.l[i], a.l[i], t[2 * i]);
        t[2 * i + 1] = madc_hi_cc(a.l[i], a.l[i], t[2 * i + 1]);
    }
    t[2 * FP_LIMBS - 2] = madc_lo_cc(a.l[FP_LIMBS - 1], a.l[FP_LIMBS - 1], t[2 * FP_LIMBS - 2]);
    t[2 * FP_LIMBS - 1] = madc_hi(a.l[FP_LIMBS - 1], a.l[FP_LIMBS - 1], t[2 * FP_LIMBS - 1]);

    unsigned int r[FP_LIMBS + 1];
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) r[j] = t[j];
#pragma unroll
    for (int i = 0; i < FP_LIMBS; ++i) {
        fp_add_mp(r, r[0] * FP_NINV, 0u);
#pragma unroll
        for (int j = 0; j < FP_LIMBS; ++j) r[j] = r[j + 1];
    }
    fp_t s;
    s.l[0] = add_cc(r[0], t[FP_LIMBS]);
#pragma unroll
    for (int j = 1; j < FP_LIMBS - 1; ++j) s.l[j] = addc_cc(r[j], t[FP_LIMBS + j]);
    s.l[FP_LIMBS - 1] = addc(r[FP_LIMBS - 1], t[2 * FP_LIMBS - 1]);
    return fp_reduce_once(s);
}

// FP_SQR_DEDICATED: squarings by fp_sqr_dedicated, a build option of the affine rounds
// (workbench/gpu/affine_rounds.py SQUARE). Off by default: 1.28 times the product's rate on
// the H200, but in the rounds its second copy of hot code cost more than it saved.
FP_FN fp_t fp_sqr(const fp_t& a)
{
#if defined(FP_SQR_DEDICATED)
    return fp_sqr_dedicated(a);
#else
    return fp_mul(a, a);
#endif
}

// The products of the curve code (curve.cuh's fe_mul and fe_sqr over Fp, fp2.cuh's Fp2
// arithmetic): fp_mul unrolled, or with EC_PRODUCTS_ROLLED fp_mul_rolled, a build option of
// msm.cu and batch_add.cu (workbench/gpu/affine_rounds.py XYZZ_PRODUCTS). The XYZZ kernels
// inline the mixed addition's ten products into their loops (about 200 KB of SASS a kernel
// body unrolled, ec_dbl 178 KB, fp2_mul 61 KB), the shape whose warps waited on instruction
// fetch in the affine rounds until their products were rolled (kernels/NOTES_msm.md, row 5).
// The squaring keeps FP_SQR_DEDICATED's choice.
FP_FN fp_t fp_mul_curve(const fp_t& a, const fp_t& b)
{
#if defined(EC_PRODUCTS_ROLLED)
    return fp_mul_rolled(a, b);
#else
    return fp_mul(a, b);
#endif
}

FP_FN fp_t fp_sqr_curve(const fp_t& a)
{
#if defined(EC_PRODUCTS_ROLLED) && !defined(FP_SQR_DEDICATED)
    return fp_mul_rolled(a, a);
#else
    return fp_sqr(a);
#endif
}

// Canonical integer (< p) -> Montgomery form.
FP_FN fp_t fp_to_mont(const fp_t& x)
{
    fp_t r2;
#pragma unroll
    for (int j = 0; j < FP_LIMBS; ++j) r2.l[j] = fp_r2_limb(j);
    return fp_mul(x, r2);
}

// Montgomery form -> canonical integer in [0, p).
FP_FN fp_t fp_from_mont(const fp_t& x)
{
    fp_t one = fp_zero();
    one.l[0] = 1;
    return fp_mul(x, one);
}

// a^(p-2) = a^-1 for a != 0 (and 0 for a == 0), by square-and-multiply over the bits of p - 2.
// Only conversions to affine use it, once per output point, so the 381 squarings and 229
// multiplications are not worth a windowed exponent.
FP_CALL fp_t fp_inv(const fp_t& a)
{
    fp_t r = fp_one();
#pragma unroll 1
    for (int i = FP_LIMBS - 1; i >= 0; --i) {
        // p - 2 differs from p only in limb 0 (p[0] = 0xffffaaab, no borrow).
        const unsigned int word = i == 0 ? fp_modulus_limb(0) - 2u : fp_modulus_limb(i);
#pragma unroll 1
        for (int bit = 31; bit >= 0; --bit) {
            r = fp_sqr(r);
            if ((word >> bit) & 1u) r = fp_mul(r, a);
        }
    }
    return r;
}

// Element i of an array of 48-byte elements, seen as three 16-byte words each.
FP_FN fp_t fp_load(const uint4* v, unsigned long long i)
{
    fp_t x;
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        const uint4 w = v[3 * i + k];
        x.l[4 * k] = w.x; x.l[4 * k + 1] = w.y; x.l[4 * k + 2] = w.z; x.l[4 * k + 3] = w.w;
    }
    return x;
}

FP_FN void fp_store(uint4* v, unsigned long long i, const fp_t& x)
{
#pragma unroll
    for (int k = 0; k < 3; ++k)
        v[3 * i + k] = make_uint4(x.l[4 * k], x.l[4 * k + 1], x.l[4 * k + 2], x.l[4 * k + 3]);
}
