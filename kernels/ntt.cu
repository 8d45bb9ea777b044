// Radix-2 NTTs over Fr, a tile of several stages per launch.
//
// An NTT of size n = 2^log_n is a sequence of passes; a pass runs `bits` consecutive radix-2
// stages (index bits lo .. lo+bits-1) on tiles held in shared memory, so the data crosses
// device memory once per pass instead of once per stage. A tile is the 2^bits elements that
// differ only in those bits, times 2^log_cols neighbouring columns (consecutive low indices)
// so that global reads and writes come in runs of 2^log_cols * 32 bytes.
//
// Stage s pairs index i with i + 2^s and uses the twiddle w_(2^(s+1))^(i mod 2^s), read from
// a per-size table laid out by stage: tw[2^s + j] = w_(2^(s+1))^j (forward or inverse roots),
// so that a stage's twiddles are contiguous and the low stages' tables stay in cache.
//
//   DIF (Gentleman-Sande, stages high to low): natural order in, bit-reversed order out.
//   DIT (Cooley-Tukey, stages low to high):    bit-reversed order in, natural order out.
//
// Flags fold the neighbouring element-wise work into the first and last pass, where the data
// is already in registers: coset shifts and 1/n scalings, and the bit-reversal permutation
// (a scatter of whole 32-byte sectors, which costs no extra device-memory traffic). With
// in_scale another vector, the first pass's scaling is a pointwise product of two vectors.
// The FP64 product by default (kernels/fr_fp64.cuh): on the H200 an NTT of 2^24 took 4.83 ms
// with it against 5.45 with the integer one, h 29.6 against 34.7 (kernels/NOTES_ntt.md row 6).
#define FR_DEFAULT_FP64
#include "fr.cuh"

#define NTT_IN_SCALE        1u   // x[pos] *= in_scale[pos] on load
#define NTT_OUT_SCALE_REV   2u   // y[pos] *= out_scale[bitrev(pos)] before the store
#define NTT_OUT_SCALAR      4u   // y[pos] *= out_scale[0] before the store
#define NTT_OUT_SCATTER_REV 8u   // store y[pos] at bitrev(pos): dst must not alias src then
#define NTT_DIT             16u  // Cooley-Tukey stages; Gentleman-Sande otherwise
#define NTT_OUT_SUB         32u  // y[pos] -= sub[pos] last, before the store

// 256 threads on 1024-element tiles (32 KB), 4 blocks per SM: measured faster on the H200
// than 512 threads on 2048-element tiles (2 blocks per SM), 1024 threads (1 block), or two
// butterflies in flight per thread (more registers, fewer warps); more resident blocks leave
// more warps computing while one block waits at a barrier or on memory. NTT_MAX_THREADS must
// equal MAX_THREADS in workbench/gpu/ntt.py.
#ifndef NTT_MAX_THREADS
#define NTT_MAX_THREADS 256
#endif
#ifndef NTT_MIN_BLOCKS
#define NTT_MIN_BLOCKS 4  // resident blocks per SM that the register budget must allow
#endif

__device__ __forceinline__ unsigned int ntt_bitrev(unsigned int x, unsigned int log_n)
{
    return log_n ? __brev(x) >> (32u - log_n) : 0u;
}

// Split halves keep each 16-byte shared-memory access of a warp on distinct banks.
__device__ __forceinline__ void tile_store(uint4* tile, unsigned int e_count, unsigned int e,
                                           const fr_t& x)
{
    tile[e] = make_uint4(x.l[0], x.l[1], x.l[2], x.l[3]);
    tile[e_count + e] = make_uint4(x.l[4], x.l[5], x.l[6], x.l[7]);
}

__device__ __forceinline__ fr_t tile_load(const uint4* tile, unsigned int e_count, unsigned int e)
{
    const uint4 a = tile[e], b = tile[e_count + e];
    fr_t x;
    x.l[0] = a.x; x.l[1] = a.y; x.l[2] = a.z; x.l[3] = a.w;
    x.l[4] = b.x; x.l[5] = b.y; x.l[6] = b.z; x.l[7] = b.w;
    return x;
}

// Where butterfly b of a stage reads and writes in the tile, and its twiddle's index.
struct ntt_pair {
    unsigned int e0, e1, tw_index;
};

__device__ __forceinline__ ntt_pair ntt_locate(unsigned int b, unsigned int sl, unsigned int s,
                                               unsigned int lo, unsigned int log_cols,
                                               unsigned int col_mask, unsigned int col0)
{
    const unsigned int low_mask = (1u << sl) - 1u;
    const unsigned int c = b & col_mask, rb = b >> log_cols;
    const unsigned int r0 = ((rb >> sl) << (sl + 1u)) | (rb & low_mask);
    ntt_pair p;
    p.e0 = (r0 << log_cols) | c;
    p.e1 = p.e0 + (1u << (sl + log_cols));
    p.tw_index = (1u << s) + (((r0 & low_mask) << lo) | (col0 + c));  // j = i mod 2^s
    return p;
}

// Stage 0, where every twiddle is 1.
__device__ __forceinline__ void ntt_butterfly_unit(fr_t& x0, fr_t& x1)
{
    const fr_t y0 = fr_add(x0, x1);
    x1 = fr_sub(x0, x1);
    x0 = y0;
}

__device__ __forceinline__ void ntt_butterfly(fr_t& x0, fr_t& x1, const fr_t& w, bool dit)
{
    if (dit) {
        const fr_t v = fr_mul(x1, w);
        x1 = fr_sub(x0, v);
        x0 = fr_add(x0, v);
    } else {
        const fr_t d = fr_sub_unreduced(x0, x1);  // < 2r: fine as fr_mul's second operand
        x0 = fr_add(x0, x1);
        x1 = fr_mul(w, d);
    }
}

// One pass. Grid: n / 2^(bits+log_cols) blocks; block: min(2^(bits+log_cols-1),
// NTT_MAX_THREADS) threads; dynamic shared memory: 32 bytes per tile element. src may equal dst unless
// NTT_OUT_SCATTER_REV is set: each block reads its whole tile before it writes any of it.
extern "C" __global__ void __launch_bounds__(NTT_MAX_THREADS, NTT_MIN_BLOCKS)
ntt_pass_kernel(const uint4* src, uint4* dst, const uint4* __restrict__ tw,
                const uint4* __restrict__ in_scale, const uint4* __restrict__ out_scale,
                const uint4* __restrict__ sub, unsigned int log_n, unsigned int lo,
                unsigned int bits, unsigned int log_cols, unsigned int flags)
{
    extern __shared__ uint4 tile[];
    const unsigned int e_count = 1u << (bits + log_cols);
    const unsigned int col_mask = (1u << log_cols) - 1u;
    const unsigned int col_blocks_log = lo - log_cols;
    const unsigned int col0 = (blockIdx.x & ((1u << col_blocks_log) - 1u)) << log_cols;
    const unsigned int base = ((blockIdx.x >> col_blocks_log) << (lo + bits)) + col0;

    for (unsigned int e = threadIdx.x; e < e_count; e += blockDim.x) {
        const unsigned int pos = base + ((e >> log_cols) << lo) + (e & col_mask);
        fr_t x = fr_load(src, pos);
        if (flags & NTT_IN_SCALE) x = fr_mul(x, fr_load_ro(in_scale, pos));
        tile_store(tile, e_count, e, x);
    }
    __syncthreads();

    const bool dit = (flags & NTT_DIT) != 0;
    const unsigned int half = e_count / 2;
    for (unsigned int t = 0; t < bits; ++t) {
        const unsigned int sl = dit ? t : bits - 1u - t;  // stage within the tile
        const unsigned int s = lo + sl;                     // stage within the whole NTT
        for (unsigned int b = threadIdx.x; b < half; b += blockDim.x) {
            const ntt_pair p = ntt_locate(b, sl, s, lo, log_cols, col_mask, col0);
            fr_t x0 = tile_load(tile, e_count, p.e0), x1 = tile_load(tile, e_count, p.e1);
            if (s == 0)
                ntt_butterfly_unit(x0, x1);
            else
                ntt_butterfly(x0, x1, fr_load_ro(tw, p.tw_index), dit);
            tile_store(tile, e_count, p.e0, x0);
            tile_store(tile, e_count, p.e1, x1);
        }
        __syncthreads();
    }

    fr_t scalar;
    if (flags & NTT_OUT_SCALAR) scalar = fr_load_ro(out_scale, 0);
    for (unsigned int e = threadIdx.x; e < e_count; e += blockDim.x) {
        const unsigned int pos = base + ((e >> log_cols) << lo) + (e & col_mask);
        const unsigned int rev = ntt_bitrev(pos, log_n);
        fr_t y = tile_load(tile, e_count, e);
        if (flags & NTT_OUT_SCALE_REV) y = fr_mul(y, fr_load_ro(out_scale, rev));
        if (flags & NTT_OUT_SCALAR) y = fr_mul(y, scalar);
        if (flags & NTT_OUT_SUB) y = fr_sub(y, fr_load_ro(sub, pos));
        fr_store(dst, (flags & NTT_OUT_SCATTER_REV) ? rev : pos, y);
    }
}

// Fills tw[1 .. n/2) from the last stage's table tw[n/2 .. n) = w_n^j, j < n/2:
// tw[2^s + j] = w_(2^(s+1))^j = w_n^(j * 2^(log_n-1-s)). tw[0] is unused and set to one.
extern "C" __global__ void ntt_spread_twiddles_kernel(uint4* tw, unsigned int log_n)
{
    const unsigned int half = 1u << (log_n - 1u);
    for (unsigned int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < half;
         idx += gridDim.x * blockDim.x) {
        if (idx == 0) {
            fr_store(tw, 0, fr_one());
            continue;
        }
        const unsigned int s = 31u - __clz(idx);
        const unsigned int j = idx - (1u << s);
        fr_store(tw, idx, fr_load(tw, half + (j << (log_n - 1u - s))));
    }
}
