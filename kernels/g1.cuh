// BLS12-381 G1: y^2 = x^3 + 4 over Fp (arithmetic in curve.cuh). A point is 96 bytes, x then
// y; the point at infinity is (0, 0), which is not on the curve, so the all-zero encoding is
// unambiguous (as in the host's "xy little-endian" format).
#pragma once

#include "curve.cuh"

typedef ec_affine<fp_t> g1_affine_t;
typedef ec_xyzz<fp_t> g1_xyzz_t;
