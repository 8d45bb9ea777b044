"""Scalars that drive the MSM's signed-digit recoding (kernels/msm.cu, msm_for_each_digit)
through its carries, for the MSM tests on the CPU build and on the GPU."""

from __future__ import annotations

import random

from workbench.prover.curve import R_MODULUS


def carry_scalars(c: int, rng: random.Random) -> list[int]:
    """Scalars below r for c-bit windows: every window all ones (a digit of -1, then a carry
    that turns each window above into 2^c, digit 0 and carry again, up to a final 1); every
    window exactly 2^(c-1) (the largest digit, kept positive) or one more (the smallest
    negative one); all ones below a top window near its largest value (the carry reaches the
    top window, which is never recoded); r - 1 and (r - 1) / 2; and pairs s, 2^c - s, whose
    first digits share a bucket with opposite signs."""
    windows = -(-256 // c)
    half = 1 << (c - 1)
    full = 254 // c  # windows wholly below 2^254 < r
    top_shift = c * (windows - 1)
    below_top = (1 << top_shift) - 1
    top = (R_MODULUS - 1) >> top_shift
    values = [
        (1 << (c * full)) - 1,
        sum(half << (c * w) for w in range(full)),
        sum((half + 1) << (c * w) for w in range(full)),
        ((top - 1) << top_shift) | below_top if top else below_top >> 1,
        R_MODULUS - 1,
        (R_MODULUS - 1) // 2,
        (1 << c) - 1,
        1 << c,
    ]
    for _ in range(3):
        s = rng.randrange(1, 1 << c)
        values += [s, (1 << c) - s]
    assert all(0 <= v < R_MODULUS for v in values)
    return values
