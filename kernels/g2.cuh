// BLS12-381 G2: y^2 = x^3 + 4(u + 1) over Fp2 (arithmetic in curve.cuh). A point is 192
// bytes, x.c0, x.c1, y.c0, y.c1; infinity is all zeros, as in G1.
#pragma once

#include "curve.cuh"

typedef ec_affine<fp2_t> g2_affine_t;
typedef ec_xyzz<fp2_t> g2_xyzz_t;
