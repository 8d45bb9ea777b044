// Fixed-base multiplication out_i = s_i * G in BLS12-381 G1 and G2: the points of the Groth16
// trusted setup (workbench/gpu/groth16_setup.py) and of the random SRS (workbench/gpu/srs_gen.py).
//
// A comb: table row 256 w + d holds d * 2^(8w) * G for the 32 byte positions w of a scalar and
// d < 256 (row 256 w is infinity, all zeros), in Montgomery form; the host builds it once with
// the curve library (prover/trusted_setup.py, comb_table_xy: the CPU setup's own table). Each
// product is then one mixed addition per nonzero byte of the scalar and one inversion for the
// affine result. The table (8192 points: 768 KB for G1, 1.5 MB for G2) stays in L2, and the
// threads of a warp read rows picked by their scalars' bytes, so the reads are scattered but
// cached.
//
// Scalars are canonical (not Montgomery), in the (n, 4) uint64 layout, below 2^256; outputs are
// canonical affine coordinates, the host's "xy little-endian" words (kernels/g1.cuh, g2.cuh), so
// they come back as the key's bytes without a conversion pass.
//
// Kernel names follow msm.cu's: G1 plain, G2 with the suffix _g2 (workbench/gpu/msm.py, Group).
// Grid-stride loops with no shared memory, barriers or warp intrinsics: any grid is correct, and
// the CPU tests run the same code compiled for the host with a grid of one thread.
#include "fr.cuh"
#include "g1.cuh"
#include "g2.cuh"

typedef unsigned long long fb_u64;

#define FB_GRID_STRIDE(i, n) \
    for (fb_u64 i = blockIdx.x * (fb_u64)blockDim.x + threadIdx.x; i < (n); \
         i += (fb_u64)gridDim.x * blockDim.x)

// Byte w of a scalar, without indexing its limb array at run time (which would move it to
// local memory).
FP_FN unsigned int fb_byte(const fr_t& s, unsigned int w)
{
    const unsigned int k = w >> 2;
    unsigned int limb = 0;
#pragma unroll
    for (unsigned int j = 0; j < 8; ++j) limb = j == k ? s.l[j] : limb;
    return (limb >> (8 * (w & 3))) & 0xffu;
}

FP_FN fp_t fb_from_mont(const fp_t& x) { return fp_from_mont(x); }
FP_FN fp2_t fb_from_mont(const fp2_t& x) { return fp2_make(fp_from_mont(x.c0), fp_from_mont(x.c1)); }

template <class F>
EC_KERNEL_BODY void fixed_base_body(const uint4* table, const uint4* scalars, uint4* out, fb_u64 n)
{
    FB_GRID_STRIDE(i, n) {
        const fr_t s = fr_load(scalars, i);
        ec_xyzz<F> acc = ec_infinity<F>();
#pragma unroll 1
        for (unsigned int w = 0; w < 32; ++w) {
            const unsigned int byte = fb_byte(s, w);
            if (byte) acc = ec_add_affine(acc, ec_affine_load<F>(table, 256ull * w + byte));
        }
        ec_affine<F> a = ec_to_affine(acc);  // infinity stays (0, 0), and 0 is its own canonical form
        a.x = fb_from_mont(a.x);
        a.y = fb_from_mont(a.y);
        ec_affine_store(out, i, a);
    }
}

extern "C" __global__ void __launch_bounds__(128)
fixed_base(const uint4* table, const uint4* scalars, uint4* out, fb_u64 n)
{
    fixed_base_body<fp_t>(table, scalars, out, n);
}

extern "C" __global__ void __launch_bounds__(128)
fixed_base_g2(const uint4* table, const uint4* scalars, uint4* out, fb_u64 n)
{
    fixed_base_body<fp2_t>(table, scalars, out, n);
}
