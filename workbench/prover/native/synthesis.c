/* Synthesis (the witness and a, b, c of the circuit's R1CS) and witness preparation for the
 * synthetic circuit, compiled for the host.
 *
 * The same mathematics as prover/circuit.py and prover/prep.py (the numpy code stays as the
 * reference and the fallback; tests hold the two byte for byte equal). Numpy needs dozens of
 * passes over memory per field multiplication; here each constraint is a few scattered reads,
 * one Montgomery multiplication in registers and four 32-byte writes, so synthesis costs
 * what a compiled prover's does and the host side can keep up with the GPU.
 *
 * Elements of Fr are four little-endian 64-bit limbs in Montgomery form, fully reduced.
 * Every function works on a caller's range so callers can check for a stop between calls;
 * none allocates, none keeps state, all are safe to call from many threads at once.
 */
#include <stdint.h>
#include <string.h>

typedef uint64_t u64;
typedef unsigned __int128 u128;

static const u64 R[4] = {0xffffffff00000001ull, 0x53bda402fffe5bfeull, 0x3339d80809a1d805ull,
                         0x73eda753299d7d48ull};
static const u64 R_INV = 0xfffffffeffffffffull; /* -r^-1 mod 2^64 */
static const u64 ONE[4] = {0x00000001fffffffeull, 0x5884b7fa00034802ull, 0x998c4fefecbc4ff5ull,
                           0x1824b159acc5056full}; /* 2^256 mod r */

static inline int geq_r(const u64 a[4])
{
    for (int k = 3; k >= 0; --k) {
        if (a[k] != R[k]) return a[k] > R[k];
    }
    return 1;
}

static inline void sub_r(u64 a[4])
{
    u64 borrow = 0;
    for (int k = 0; k < 4; ++k) {
        u128 d = (u128)a[k] - R[k] - borrow;
        a[k] = (u64)d;
        borrow = (u64)(d >> 64) & 1;
    }
}

/* a + b < 2r < 2^256: no carry leaves the top limb, one conditional subtraction reduces. */
static inline void fr_add(u64 out[4], const u64 a[4], const u64 b[4])
{
    u64 carry = 0;
    for (int k = 0; k < 4; ++k) {
        u128 s = (u128)a[k] + b[k] + carry;
        out[k] = (u64)s;
        carry = (u64)(s >> 64);
    }
    if (geq_r(out)) sub_r(out);
}

/* Montgomery product a b 2^-256 mod r, interleaved (CIOS). r < 2^255 keeps t below 2r. */
static inline void fr_mul(u64 out[4], const u64 a[4], const u64 b[4])
{
    u64 t0 = 0, t1 = 0, t2 = 0, t3 = 0, t4 = 0;
    for (int i = 0; i < 4; ++i) {
        u128 c = (u128)a[0] * b[i] + t0;
        t0 = (u64)c;
        c = (u128)a[1] * b[i] + t1 + (c >> 64);
        t1 = (u64)c;
        c = (u128)a[2] * b[i] + t2 + (c >> 64);
        t2 = (u64)c;
        c = (u128)a[3] * b[i] + t3 + (c >> 64);
        t3 = (u64)c;
        u128 top = (u128)t4 + (c >> 64);
        const u64 m = t0 * R_INV;
        c = (u128)m * R[0] + t0;
        c = (u128)m * R[1] + t1 + (c >> 64);
        t0 = (u64)c;
        c = (u128)m * R[2] + t2 + (c >> 64);
        t1 = (u64)c;
        c = (u128)m * R[3] + t3 + (c >> 64);
        t2 = (u64)c;
        top += c >> 64;
        t3 = (u64)top;
        t4 = (u64)(top >> 64);
    }
    out[0] = t0, out[1] = t1, out[2] = t2, out[3] = t3;
    if (t4 || geq_r(out)) sub_r(out);
}

/* The finaliser of a 64-bit counter-mode generator: a bijection that mixes every input bit
 * into every output bit. prover/circuit.py computes the same in numpy. */
static inline u64 mix64(u64 z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define GOLDEN 0x9e3779b97f4a7c15ull
#define DRAWS 5 /* generator outputs per witness entry: the bit or the choice, four limbs */
#define MAX_TERMS 256
#define PREFETCH_AHEAD 16 /* constraints: the gathers are cache misses, their latency overlaps */

static const u64 MINUS_ONE[4] = {0xfffffffd00000003ull, 0xfb38ec08fffb13fcull, 0x99ad88181ce5880full,
                                 0x5bc8f5f97cd877d8ull}; /* r - ONE: the form of -1 */

/* The largest power of two <= j (j >= 1): the reads of constraint j stay below it, so every
 * variable is defined from earlier ones and a block [2^k, 2^(k+1)) only reads below itself. */
static inline u64 floor_pow2(u64 j) { return 1ull << (63 - __builtin_clzll(j)); }

/* Rows [start, stop) of the circuit, in order (each reads only earlier variables, so the
 * caller's ranges must come in order). Variable j of the witness z and row j of a = A z,
 * b = B z, c = C z:
 *   j = 0:           z = 1,                                  a = z + S, b = 0, c = 0
 *   j = 1:           z = public input (four draws),          a = 0, b = z + S, c = 0
 *   2 <= j <= pub:   z = public input (four draws),          a = z, b = 0, c = 0
 *   every further j: x = k_j + z[p_0(j)] + ... + z[p_{terms-1}(j)],  y = z[p_terms(j)] + kb
 *   boolean j:       z = the low bit of the form of x y      a = z, b = z - 1, c = 0
 *   other j:         z = x y                                 a = x, b = y, c = z
 * (a boolean is a bit decomposition's advice, derived from earlier values as real circuits
 * derive bits: so every constraint costs the same reads, additions and product) with p_t(j) = (j mul[t] + off[t]) & (floor_pow2(j) - 1) and k_j the row's constant (the
 * Montgomery form drawn from ckey: draws 4j .. 4j+3, the top one cut to 62 bits). Variable j
 * is boolean when mix64(skey + j GOLDEN) >> 11 < cut: the structure is the seed's, the
 * values the partition's (wkey). S is the sum of the other variables (rows 0 and 1 carry them
 * all, in A and in B: B = 0 and A = 0 make those rows hold for any values): this adds them
 * into *total and leaves a_0 = 1, b_1 = z_1 for the caller to add the final S to. Returns -1
 * for a term count out of range. */
int wb_synthesize(u64 wkey, u64 skey, u64 ckey, u64 cut, u64 pub, const u64* mul, const u64* off,
                  int terms, const u64* kb, u64 start, u64 stop, u64* w, u64* a, u64* b, u64* c,
                  u64* total)
{
    if (terms < 1 || terms > MAX_TERMS) return -1;
    for (u64 j = start; j < stop; ++j) {
        u64 *wj = w + 4 * j, *aj = a + 4 * j, *bj = b + 4 * j, *cj = c + 4 * j;
        const u64 base = wkey + DRAWS * j * GOLDEN;
        if (j <= pub) {
            if (j == 0) {
                memcpy(wj, ONE, sizeof ONE);
            } else {
                wj[0] = mix64(base + 1 * GOLDEN);
                wj[1] = mix64(base + 2 * GOLDEN);
                wj[2] = mix64(base + 3 * GOLDEN);
                wj[3] = mix64(base + 4 * GOLDEN) & 0x3fffffffffffffffull;
            }
            if (j == 1) {
                memset(aj, 0, 32);
                memcpy(bj, wj, 32);
            } else {
                memcpy(aj, wj, 32);
                memset(bj, 0, 32);
            }
            memset(cj, 0, 32);
            continue;
        }
        if (j + PREFETCH_AHEAD < stop) {
            const u64 ahead = j + PREFETCH_AHEAD, mask = floor_pow2(ahead) - 1;
            for (int t = 0; t <= terms; ++t)
                __builtin_prefetch(w + 4 * ((ahead * mul[t] + off[t]) & mask), 0, 0);
        }
        const u64 mask = floor_pow2(j) - 1;
        u64 acc[4], rhs[4], prod[4];
        const u64 kbase = ckey + 4 * j * GOLDEN;
        acc[0] = mix64(kbase);
        acc[1] = mix64(kbase + 1 * GOLDEN);
        acc[2] = mix64(kbase + 2 * GOLDEN);
        acc[3] = mix64(kbase + 3 * GOLDEN) & 0x3fffffffffffffffull;
        for (int t = 0; t < terms; ++t) fr_add(acc, acc, w + 4 * ((j * mul[t] + off[t]) & mask));
        fr_add(rhs, w + 4 * ((j * mul[terms] + off[terms]) & mask), kb);
        fr_mul(prod, acc, rhs);
        if ((mix64(skey + j * GOLDEN) >> 11) < cut) {
            if (prod[0] & 1) {
                memcpy(wj, ONE, 32);
                memset(bj, 0, 32);
            } else {
                memset(wj, 0, 32);
                memcpy(bj, MINUS_ONE, 32);
            }
            memcpy(aj, wj, 32);
            memset(cj, 0, 32);
            continue;
        }
        memcpy(aj, acc, sizeof acc);
        memcpy(bj, rhs, sizeof rhs);
        memcpy(cj, prod, sizeof prod);
        memcpy(wj, prod, sizeof prod);
        fr_add(total, total, prod);
    }
    return 0;
}

/* prep_msm, pass 1 over m entries: ones_mask[i] = (w_i == 1), the same packed little-endian
 * into bitmap (ceil(m/8) bytes), and counts[0] / counts[1] = how many are 0 / 1. */
void wb_classify(const u64* w, u64 m, uint8_t* ones_mask, uint8_t* bitmap, u64* counts)
{
    u64 zeros = 0, ones = 0;
    for (u64 byte = 0; byte * 8 < m; ++byte) {
        unsigned bits = 0;
        const u64 end = byte * 8 + 8 < m ? byte * 8 + 8 : m;
        for (u64 i = byte * 8; i < end; ++i) {
            const u64* row = w + 4 * i;
            const int zero = (row[0] | row[1] | row[2] | row[3]) == 0;
            const int one = row[0] == ONE[0] && row[1] == ONE[1] && row[2] == ONE[2] && row[3] == ONE[3];
            zeros += zero;
            ones += one;
            ones_mask[i] = (uint8_t)one;
            bits |= (unsigned)one << (i - byte * 8);
        }
        bitmap[byte] = (uint8_t)bits;
    }
    counts[0] = zeros;
    counts[1] = ones;
}

/* prep_msm, pass 2: the positions and rows of the tail, ascending: every nonzero entry, less
 * the ones when split. Returns how many were written (the caller sized the arrays from pass
 * 1's counts). */
u64 wb_tail(const u64* w, u64 m, const uint8_t* ones_mask, int split, int64_t* indices, u64* scalars)
{
    u64 t = 0;
    for (u64 i = 0; i < m; ++i) {
        const u64* row = w + 4 * i;
        if ((row[0] | row[1] | row[2] | row[3]) == 0 || (split && ones_mask[i])) continue;
        indices[t] = (int64_t)i;
        memcpy(scalars + 4 * t, row, 32);
        ++t;
    }
    return t;
}

/* Host-load streaming (pipeline/host_load.py): copies `words` 64-bit words from src to dst
 * and back, the pattern of memory-bound work (hashing layers, sorting, other provers) that
 * shares a proving host. Returns a checksum so the compiler keeps the loads. */
u64 wb_stream(u64* dst, u64* src, u64 words)
{
    memcpy(dst, src, words * sizeof(u64));
    memcpy(src, dst, words * sizeof(u64));
    return dst[0] ^ src[words - 1];
}
