// The Montgomery product of fr.cuh on the FP64 pipe (build option FR_MUL_FP64): the limb
// products run as DFMA, which issue at the rate of IMAD and are otherwise idle in the NTT
// kernels, whose integer multiply pipe bounds them (kernels/NOTES_ntt.md).
//
// Same function as the integer product, bit for bit: a * b * 2^-256 mod r, fully reduced, for
// a < r and b < 2^256 (fr.cuh's contract). Five limbs of 52 bits, each a double holding an
// integer exactly. Montgomery's reduction runs by 2^260 on A = a and B = 16 b (B < 2^260
// still fits five limbs), so A B 2^-260 = a b 2^-256 and the 32-bit words of a and b go in
// and come out as they are.
//
// One limb product, a, b < 2^52 (mul52): with rounding toward zero,
//   h = fma(a, b, 2^104) = 2^104 + H 2^52, H = floor(a b / 2^52) <= 2^52 - 2: the doubles in
//       [2^104, 2^105) are spaced 2^52 apart and 2^104 + a b < 2^105, so truncation is the
//       floor, and bits(h) = bits(2^104) + H;
//   s = (2^104 + 2^52) - h = (1 - H) 2^52: exact (both lie in that binade);
//   l = fma(a, b, s) = L + 2^52, L = a b - H 2^52 in [0, 2^52): an integer in [2^52, 2^53),
//       exact in any rounding mode, and bits(l) = bits(2^52) + L.
// Three FP64 instructions, no conversion: the bit patterns are summed as 64-bit integers, and
// each column's sum of exponent fields (a known count of bits(2^104) and bits(2^52)) is
// subtracted by starting the column at minus that count, mod 2^64.
//
// Columns (product scanning with the reduction interleaved): column k collects the low parts
// of the products whose limb indices sum to k and the high parts of those summing to k - 1,
// of a_i b_j and of m_i r_j, plus the carry of column k - 1. At most 18 terms, each below
// 2^52, so a column's true value stays below 19 * 2^52 < 2^57: the 64-bit integer sum of the
// bit patterns, wrapped mod 2^64, minus the exponent fields, is exactly that value, and a
// carry (a column over 2^52) is below 19.
//
// Reduction digits: r = 1 - 2^32 mod 2^52, so -r^-1 = -(1 + 2^32) mod 2^52 and the digit of
// column k is m_k = -c (1 + 2^32) mod 2^52, shifts and adds, no product. The low part of
// m_k r_0 only cancels column k's low 52 bits, so it is never formed: column k starts with a
// bias of 2^52 - 1 instead, which turns its carry into ceil(c / 2^52), the carry of c plus
// that low part (c + L = 2^52 ceil(c / 2^52), L in [0, 2^52)); the digit is then taken as
// ~c (1 + 2^32), the same value from the biased column.
//
// Bound on the result: A < r and B < 2^260 give T = (A B + M r) / 2^260 < r + r = 2r with
// M < 2^260, so one conditional subtraction (fr_reduce_once) finishes, as in the integer
// product; 2r < 2^256, so T fits the eight words and its top column is below 2^48.
//
// The host build (CPU tests) uses std::fma, exact as IEEE 754 requires; rounding toward
// zero is taken from the nearest rounding and the exact residual, so no rounding mode is set.
#pragma once

#if !defined(__CUDA_ARCH__) && !defined(__CUDACC_RTC__)
#include <cmath>
#include <cstring>
#endif

namespace fr_f64 {

typedef unsigned long long u64;

constexpr u64 BITS_2P52 = 0x4330000000000000ull;   // bits(2^52)
constexpr u64 BITS_2P104 = 0x4670000000000000ull;  // bits(2^104)
constexpr u64 MASK52 = (1ull << 52) - 1;

FR_FN double as_double(u64 x)
{
#if defined(__CUDA_ARCH__)
    return __longlong_as_double((long long)x);
#else
    double d;
    memcpy(&d, &x, sizeof d);
    return d;
#endif
}

FR_FN u64 bits(double d)
{
#if defined(__CUDA_ARCH__)
    return (u64)__double_as_longlong(d);
#else
    u64 x;
    memcpy(&x, &d, sizeof x);
    return x;
#endif
}

// a * b + c rounded toward zero, for the positive operands of mul52.
FR_FN double fma_rz(double a, double b, double c)
{
#if defined(__CUDA_ARCH__)
    return __fma_rz(a, b, c);
#else
    // c and the nearest result rn lie in one binade, so c - rn is exact, and so is the
    // residual a b + c - rn (an integer below 2^52): rn was rounded up iff it is negative.
    const double rn = std::fma(a, b, c);
    return std::fma(a, b, c - rn) < 0.0 ? std::nextafter(rn, 0.0) : rn;
#endif
}

FR_FN double fma_exact(double a, double b, double c)
{
#if defined(__CUDA_ARCH__)
    return fma(a, b, c);
#else
    return std::fma(a, b, c);
#endif
}

FR_FN unsigned int shr(unsigned int lo, unsigned int hi, unsigned int s)
{
#if defined(__CUDA_ARCH__)
    return __funnelshift_r(lo, hi, s);
#else
    return (unsigned int)((((u64)hi << 32) | lo) >> s);
#endif
}

// The integer x < 2^52 given as 20 high and 32 low bits, as a double: bits(2^52 + x) minus 2^52
// (exact).
FR_FN double limb(unsigned int lo, unsigned int hi20)
{
    return as_double(((u64)(hi20 | 0x43300000u) << 32) | lo) - 4503599627370496.0;
}

// The same from the low 20 bits of hi: the mask and the exponent in one logic instruction
// ((hi & 0xfffff) | k, k = 0x43300000 in a register; left to itself the compiler spends two).
FR_FN double limb_masked(unsigned int lo, unsigned int hi)
{
#if defined(__CUDA_ARCH__)
    unsigned int h;
    asm("lop3.b32 %0, %1, 0xfffff, %2, 0xea;" : "=r"(h) : "r"(hi), "r"(0x43300000u));
    return as_double(((u64)h << 32) | lo) - 4503599627370496.0;
#else
    return limb(lo, hi & 0xfffffu);
#endif
}

FR_FN unsigned int word(const fr_t& x, int q) { return q < 8 ? x.l[q] : 0u; }

// Bits o .. o+51 of x (o a compile-time constant, -4 <= o): the limbs of x (o = 52 i) and of
// 16 x (o = 52 i - 4; 16 x < 2^260 for any x < 2^256).
template <int o>
FR_FN double limb_at(const fr_t& x)
{
    if constexpr (o < 0) {
        return limb_masked(x.l[0] << -o, shr(x.l[0], x.l[1], 32 + o));
    } else {
        constexpr int q = o / 32, s = o % 32;
        const unsigned int lo = s ? shr(word(x, q), word(x, q + 1), s) : word(x, q);
        const unsigned int hi = s ? shr(word(x, q + 1), word(x, q + 2), s) : word(x, q + 1);
        return o + 52 >= 256 ? limb(lo, hi) : limb_masked(lo, hi);
    }
}

FR_FN void mul52(double a, double b, u64& hi, u64& lo)
{
    const double h = fma_rz(a, b, 0x1p104);
    const double s = 0x1.0000000000001p104 - h;  // 2^104 + 2^52 - h
    hi = bits(h);
    lo = bits(fma_exact(a, b, s));
}

FR_FN u64 mul52_hi(double a, double b)
{
    return bits(fma_rz(a, b, 0x1p104));
}

// r in base 2^52: r0 = 2^52 - 2^32 + 1, r1 < 2^46, r4 < 2^47.
FR_FN constexpr double r_limb(int j)
{
    return j == 0 ? 4503595332403201.0 : j == 1 ? 52776117727231.0 : j == 2 ? 2711223964777892.0
         : j == 3 ? 2203984808738944.0 : 127464551688605.0;
}

// The terms column k collects (see the header): low parts of a_i b_j (i + j = k) and of
// m_i r_j (j >= 1), high parts of both with i + j = k - 1.
FR_FN constexpr int pairs(int k) { return k < 0 || k > 8 ? 0 : k <= 4 ? k + 1 : 9 - k; }
FR_FN constexpr int r_lows(int k) { return k >= 1 && k <= 8 ? (k <= 4 ? k : 9 - k) : 0; }

// Column k's start: minus the exponent fields of its terms, plus the carry bias of the
// columns that take a reduction digit.
FR_FN constexpr u64 column_start(int k)
{
    return (u64)0 - (u64)(2 * pairs(k - 1)) * BITS_2P104 - (u64)(pairs(k) + r_lows(k)) * BITS_2P52
         + (k <= 4 ? MASK52 : 0ull);
}

// m = ~c (1 + 2^32) mod 2^52 from the biased column c: the word ~lo, and above it
// ~hi + ~lo = -hi - lo - 2, of which the limb keeps 20 bits.
FR_FN double digit(u64 c)
{
    const unsigned int lo = (unsigned int)c, hi = (unsigned int)(c >> 32);
    return limb_masked(~lo, 0u - hi - lo - 2u);
}

}  // namespace fr_f64

// a * b * 2^-256 mod r through the FP64 pipe; see the header. Result < 2r before the last
// subtraction, as fr_mul's.
FR_FN fr_t fr_mul_fp64(const fr_t& a, const fr_t& b)
{
    using namespace fr_f64;
    const double A[5] = {limb_at<0>(a), limb_at<52>(a), limb_at<104>(a), limb_at<156>(a),
                         limb_at<208>(a)};
    const double B[5] = {limb_at<-4>(b), limb_at<48>(b), limb_at<100>(b), limb_at<152>(b),
                         limb_at<204>(b)};
    u64 c[10];
#pragma unroll
    for (int k = 0; k < 10; ++k) c[k] = column_start(k);
#pragma unroll
    for (int i = 0; i < 5; ++i) {
#pragma unroll
        for (int j = 0; j < 5; ++j) {
            u64 hi, lo;
            mul52(A[i], B[j], hi, lo);
            c[i + j] += lo;
            c[i + j + 1] += hi;
        }
    }
#pragma unroll
    for (int k = 0; k < 5; ++k) {
        // column k is complete now but for the low part of m_k r_0 (the bias stands for it)
        const double m = digit(c[k]);
        c[k + 1] += (c[k] >> 52) + mul52_hi(m, r_limb(0));
#pragma unroll
        for (int j = 1; j < 5; ++j) {
            u64 hi, lo;
            mul52(m, r_limb(j), hi, lo);
            c[k + j] += lo;
            c[k + j + 1] += hi;
        }
    }
    // T = sum of c[5 + k] 2^(52 k): carries up, then the limbs packed into words.
#pragma unroll
    for (int k = 5; k < 9; ++k) {
        c[k + 1] += c[k] >> 52;
        c[k] &= MASK52;
    }
    fr_t t;
    const unsigned int l5 = (unsigned int)c[5], h5 = (unsigned int)(c[5] >> 32);
    const unsigned int l6 = (unsigned int)c[6], h6 = (unsigned int)(c[6] >> 32);
    const unsigned int l7 = (unsigned int)c[7], h7 = (unsigned int)(c[7] >> 32);
    const unsigned int l8 = (unsigned int)c[8], h8 = (unsigned int)(c[8] >> 32);
    const unsigned int l9 = (unsigned int)c[9], h9 = (unsigned int)(c[9] >> 32);
    t.l[0] = l5;
    t.l[1] = h5 | (l6 << 20);
    t.l[2] = shr(l6, h6, 12);
    t.l[3] = (h6 >> 12) | (l7 << 8);
    t.l[4] = shr(l7, h7, 24) | (l8 << 28);
    t.l[5] = shr(l8, h8, 4);
    t.l[6] = (h8 >> 4) | (l9 << 16);
    t.l[7] = shr(l9, h9, 16);
    return fr_reduce_once(t);
}
