// The affine halving rounds of batch_affine.cuh alone, for G1 and G2, built with the options
// that change how their products are formed (workbench/gpu/affine_rounds.py, PRODUCTS and
// SQUARE: BA_PRODUCTS_INLINE, BA_PRODUCTS_CALLED, FP_SQR_DEDICATED). The default build of
// the rounds stays in msm.cu and batch_add.cu; this module is compiled once per set of
// options only when a variant asks for it, so the default modules' build time is unchanged.
#include "g1.cuh"
#include "g2.cuh"
#include "batch_affine.cuh"

BA_ROUND_KERNEL(, fp_t)
BA_ROUND_KERNEL(_g2, fp2_t)
