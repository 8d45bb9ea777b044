"""NTTs over Fr on the GPU, and the Groth16 quotient h = (A·B − C)/Z, through CuPy.

Vectors are C-contiguous (n, 4) uint64 CuPy arrays in the shared Montgomery format (see
workbench/prover/field.py). A GpuDomain holds one size's device tables (twiddles laid out by
stage, coset factors with 1/n and 1/Z folded in) and one worker's scratch, all allocated
once; every transform then runs in place on the domain's stream without allocating.

How a transform maps onto kernels/ntt.cu: the log2(n) radix-2 stages are grouped into
passes of up to MAX_TILE_LOG2 stages, one kernel launch each (plan_passes). Forward and inverse
transforms with natural order in and out are Gentleman-Sande passes whose last pass scatters
to bit-reversed positions. compute_h never reorders: each inverse NTT leaves coefficients in
bit-reversed order, the coset shift is applied there, and the Cooley-Tukey forward passes
take bit-reversed input back to natural order; only the final coset_intt scatters, and C's
coefficients wait in bit-reversed order for it, where its last pass reads them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from workbench.gpu import kernels

MODULUS = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
GENERATOR = 7
TWO_ADICITY = 32
MAX_LOG2 = 28
_R_MONT = (1 << 256) % MODULUS

# A tile of 2^10 elements is 32 KB of shared memory, so four blocks of 256 threads share an
# SM (kernels/ntt.cu says why that shape).
MAX_TILE_LOG2 = 10
# Passes above the first read runs of 2^2 neighbouring elements: one 128-byte line each.
MIN_RUN_LOG2 = 2
MAX_THREADS = 256  # NTT_MAX_THREADS in kernels/ntt.cu
_STATIC_SMEM_LIMIT = 48 * 1024

# Flags of ntt_pass_kernel (kernels/ntt.cu).
IN_SCALE, OUT_SCALE_REV, OUT_SCALAR, OUT_SCATTER_REV, DIT, OUT_SUB = 1, 2, 4, 8, 16, 32

# compute_h's stages: the five transforms before the product, then the last transform with
# the pointwise product and the subtraction of C folded into its first and last passes.
STAGES = ("forward", "inverse")
TRANSFORMS_PER_H = 6


@dataclass(frozen=True)
class Pass:
    """Stages lo .. lo+bits-1 in one launch, on tiles 2^log_cols columns wide."""

    lo: int
    bits: int
    log_cols: int

    @property
    def tile_log2(self) -> int:
        return self.bits + self.log_cols


def plan_passes(log2: int) -> tuple[Pass, ...]:
    """The passes of a size-2^log2 transform, lowest stages first. The first pass takes as
    many stages as a tile holds (its columns are single elements, contiguous already); the
    rest are split evenly so every tile still has room for MIN_RUN_LOG2 columns."""
    first = min(log2, MAX_TILE_LOG2)
    passes = [Pass(0, first, 0)]
    rest = log2 - first
    if rest:
        count = -(-rest // (MAX_TILE_LOG2 - MIN_RUN_LOG2))
        lo = first
        for i in range(count):
            bits = rest // count + (1 if i < rest % count else 0)
            passes.append(Pass(lo, bits, min(lo, MAX_TILE_LOG2 - bits)))
            lo += bits
    return tuple(passes)


def mont_limbs(values: Sequence[int]) -> np.ndarray:
    """Python ints (taken mod r) as Montgomery-form (n, 4) uint64 limbs."""
    raw = b"".join((v % MODULUS * _R_MONT % MODULUS).to_bytes(32, "little") for v in values)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(len(values), 4)


def _u32(v: int) -> np.uint32:
    return np.uint32(v)


_NULL = np.uint64(0)  # a null device pointer for the kernels' optional tables


def _same_buffer(x: Any, y: Any) -> bool:
    return bool(x.data.ptr == y.data.ptr)
_attr_lock = threading.Lock()


class GpuDomain:
    """The 2^log2 roots of unity H and the coset g·H (g = 7) on the device, for one worker.

    Transforms run on `stream` (a cupy.cuda.Stream) or, when None, on the current stream at
    each call. Not thread-safe: give each worker its own domain (tables are per domain too;
    at 2^24 the two twiddle tables take 1 GiB, each coset table 512 MiB).
    """

    def __init__(self, log2: int, stream: Any = None) -> None:
        if isinstance(log2, bool) or not isinstance(log2, int) or not 1 <= log2 <= MAX_LOG2:
            raise ValueError(f"log2 must be an integer in [1, {MAX_LOG2}], got {log2!r}")
        self._cp = kernels.require_cupy()
        self.log2 = log2
        self.n = n = 1 << log2
        self.stream = stream
        self.passes = plan_passes(log2)
        r = MODULUS
        self.omega = pow(GENERATOR, (r - 1) >> log2, r)
        self.omega_inv = pow(self.omega, -1, r)
        self.n_inv = pow(n, -1, r)
        self.shift = GENERATOR
        self.shift_inv = pow(GENERATOR, -1, r)
        # Z(x) = x^n − 1 is the constant g^n − 1 on g·H.
        self.z_on_coset = (pow(GENERATOR, n, r) - 1) % r
        self.z_on_coset_inv = pow(self.z_on_coset, -1, r)

        self._pass_kernel = kernels.function("ntt", "ntt_pass_kernel")
        smem = 32 << max(p.tile_log2 for p in self.passes)
        if smem > _STATIC_SMEM_LIMIT:
            with _attr_lock:
                if self._pass_kernel.max_dynamic_shared_size_bytes < smem:
                    self._pass_kernel.max_dynamic_shared_size_bytes = smem
        self._tables: dict[str, Any] = {}
        self._scratch: Any = None
        self._h_out: Any = None
        self._events: dict[str, tuple[Any, Any]] | None = None
        with self._on_stream():
            self.twiddles = self._stage_twiddles(self.omega)
            self.inverse_twiddles = self._stage_twiddles(self.omega_inv)
            self._n_inv_dev = self._cp.asarray(mont_limbs([self.n_inv]))
            self._c_scale_dev = self._cp.asarray(mont_limbs([self.n_inv * self.z_on_coset_inv]))

    def __repr__(self) -> str:
        return f"GpuDomain(log2={self.log2}, passes={len(self.passes)})"

    # ------------------------------------------------------------------ tables

    def _on_stream(self) -> Any:
        return self.stream if self.stream is not None else contextlib.nullcontext()

    def _powers_into(self, out: Any, base: int, first: int) -> None:
        """out[i] = first * base^i on the device, for i < len(out)."""
        count = out.shape[0]
        nbits = max(1, (count - 1).bit_length())
        squares = [base % MODULUS]
        for _ in range(nbits - 1):
            squares.append(squares[-1] * squares[-1] % MODULUS)
        sq_dev = self._cp.asarray(mont_limbs(squares))
        first_dev = self._cp.asarray(mont_limbs([first]))
        runs = -(-count // 64)  # FR_POWERS_RUN
        blocks = max(1, min(-(-runs // 128), 4096))
        kernels.function("fr_vector", "fr_powers_kernel")(
            (blocks,), (128,), (out, sq_dev, _u32(nbits), first_dev, np.uint64(count)))

    def _stage_twiddles(self, root: int) -> Any:
        """tw[2^s + j] = root_(2^(s+1))^j for every stage s: one table of n elements."""
        tw = self._cp.empty((self.n, 4), dtype=self._cp.uint64)
        half = self.n // 2
        self._powers_into(tw[half:], root, 1)
        blocks = max(1, min(-(-half // 256), 4096))
        kernels.function("ntt", "ntt_spread_twiddles_kernel")(
            (blocks,), (256,), (tw, _u32(self.log2)))
        return tw

    _COSET: ClassVar[dict[str, Callable[[GpuDomain], tuple[int, int]]]] = {
        # name: (first, base) of first * base^i; 1/n and 1/Z folded in where they are used
        "shift": lambda d: (1, d.shift),
        "unshift": lambda d: (d.n_inv, d.shift_inv),
        "shift_over_n": lambda d: (d.n_inv, d.shift),
        "h": lambda d: (d.n_inv * d.z_on_coset_inv, d.shift_inv),
    }

    def table(self, name: str) -> Any:
        """A coset factor table indexed by coefficient i (natural order), built on first use:
        "shift" g^i, "unshift" g^-i/n, "shift_over_n" g^i/n, "h" g^-i/(n·Z(g))."""
        tab = self._tables.get(name)
        if tab is None:
            first, base = self._COSET[name](self)
            tab = self._cp.empty((self.n, 4), dtype=self._cp.uint64)
            with self._on_stream():
                self._powers_into(tab, base, first)
            self._tables[name] = tab
        return tab

    def prepare(self) -> None:
        """Build every table and buffer compute_h and the transforms need, so that none of
        them allocates later."""
        for name in self._COSET:
            self.table(name)
        self._scratch_buffer()
        self._h_buffer()
        self._event_pairs()

    def _scratch_buffer(self) -> Any:
        if self._scratch is None:
            self._scratch = self._cp.empty((self.n, 4), dtype=self._cp.uint64)
        return self._scratch

    def _h_buffer(self) -> Any:
        if self._h_out is None:
            self._h_out = self._cp.empty((self.n, 4), dtype=self._cp.uint64)
        return self._h_out

    def _event_pairs(self) -> dict[str, tuple[Any, Any]]:
        if self._events is None:
            ev = self._cp.cuda.Event
            self._events = {name: (ev(), ev()) for name in STAGES}
        return self._events

    # ------------------------------------------------------------------ transforms

    def _check(self, x: Any, name: str = "x") -> None:
        if (not isinstance(x, self._cp.ndarray) or x.dtype != np.uint64
                or x.shape != (self.n, 4) or not x.flags.c_contiguous):
            got = f"{type(x).__name__} {getattr(x, 'dtype', '')} {getattr(x, 'shape', '')}"
            raise ValueError(f"{name} must be a C-contiguous cupy uint64 array of shape "
                             f"({self.n}, 4), got {got}")

    def _run_pass(self, p: Pass, src: Any, dst: Any, tw: Any, flags: int,
                  in_scale: Any, out_scale: Any, sub: Any = None) -> None:
        tile = p.tile_log2
        self._pass_kernel(
            (self.n >> tile,), (min(1 << (tile - 1), MAX_THREADS),),
            (src, dst, tw, _NULL if in_scale is None else in_scale,
             _NULL if out_scale is None else out_scale, _NULL if sub is None else sub,
             _u32(self.log2), _u32(p.lo), _u32(p.bits), _u32(p.log_cols), _u32(flags)),
            shared_mem=32 << tile)

    def _transform(self, x: Any, tw: Any, *, dit: bool, out: Any = None,
                   in_scale: Any = None, out_flags: int = 0, out_scale: Any = None,
                   sub: Any = None) -> Any:
        """All passes over x; the result lands in out (default: x). When out is another
        array, x is used as workspace and left clobbered."""
        out = x if out is None else out
        passes = self.passes if dit else self.passes[::-1]
        scatter = bool(out_flags & OUT_SCATTER_REV)
        # A scatter pass writes into other tiles' positions, so it cannot run in place; only
        # a single-tile transform (one block reads everything before writing) may.
        in_place_scatter = scatter and len(passes) > 1 and _same_buffer(out, x)
        work = self._scratch_buffer() if in_place_scatter else x
        src = x
        for i, p in enumerate(passes):
            first, last = i == 0, i == len(passes) - 1
            dst = out if last else work
            flags = (DIT if dit else 0) | (out_flags if last else 0)
            if first and in_scale is not None:
                flags |= IN_SCALE
            self._run_pass(p, src, dst, tw, flags, in_scale if first else None,
                           out_scale if last else None, sub if last else None)
            src = dst
        return out

    def ntt(self, x: Any) -> Any:
        """In place: coefficients (natural order) -> evaluations on H (natural order)."""
        self._check(x)
        with self._on_stream():
            return self._transform(x, self.twiddles, dit=False, out_flags=OUT_SCATTER_REV)

    def intt(self, x: Any) -> Any:
        """In place: evaluations on H -> coefficients."""
        self._check(x)
        with self._on_stream():
            return self._transform(x, self.inverse_twiddles, dit=False,
                                   out_flags=OUT_SCATTER_REV | OUT_SCALAR,
                                   out_scale=self._n_inv_dev)

    def coset_ntt(self, x: Any) -> Any:
        """In place: coefficients -> evaluations on g·H (coefficient i times g^i, then NTT)."""
        self._check(x)
        shift = self.table("shift")
        with self._on_stream():
            return self._transform(x, self.twiddles, dit=False, in_scale=shift,
                                   out_flags=OUT_SCATTER_REV)

    def coset_intt(self, x: Any) -> Any:
        """In place: evaluations on g·H -> coefficients (inverse NTT, then times g^-i)."""
        self._check(x)
        unshift = self.table("unshift")
        with self._on_stream():
            return self._transform(x, self.inverse_twiddles, dit=False,
                                   out_flags=OUT_SCATTER_REV | OUT_SCALE_REV,
                                   out_scale=unshift)

    def compute_h(self, a: Any, b: Any, c: Any, out: Any = None,
                  events: MutableMapping[str, tuple[Any, Any]] | None = None) -> Any:
        """Coefficients of h = (A·B − C)/Z from the evaluations a, b, c on H, the same
        function as workbench.prover.ntt.compute_h, in TRANSFORMS_PER_H = 6 transforms
        instead of the prover's 7: C needs no coset evaluation, because the coset inverse
        transform is linear and undoes the coset transform of any polynomial of degree < n,
        so h = (coset_intt(A·B on g·H) − C)/Z(g) exactly. Passes: intt and coset_ntt of a
        and b, intt of c (its 1/n and 1/Z(g) folded into one scalar), then coset_intt with
        the product A·B formed as its first pass loads and C/Z(g) subtracted as its last
        pass stores. a, b and c are used as workspace and left clobbered. The result goes
        to out (any array but a or c), else to a buffer the domain owns and reuses on the
        next call. When events is a dict, it receives (start, end) CUDA events per stage in
        STAGES (see durations_ms); they are the domain's own and are re-recorded by the
        next call."""
        for name, v in (("a", a), ("b", b), ("c", c)):
            self._check(v, name)
        out = self._h_buffer() if out is None else out
        self._check(out, "out")
        if _same_buffer(out, a) or _same_buffer(out, c):
            raise ValueError("out must not be a or c: the last transform reads them while it "
                             "writes")
        shift_over_n, h_factors = self.table("shift_over_n"), self.table("h")
        marks = self._event_pairs() if events is not None else None
        with self._on_stream():
            with _stage(marks, "forward"):
                for v in (a, b):
                    # intt leaves coefficient i at bitrev(i); the coset shift and 1/n go there
                    self._transform(v, self.inverse_twiddles, dit=False,
                                    out_flags=OUT_SCALE_REV, out_scale=shift_over_n)
                    self._transform(v, self.twiddles, dit=True)
                # C/Z(g), its coefficient i at bitrev(i): where the last pass stores h[i]
                self._transform(c, self.inverse_twiddles, dit=False, out_flags=OUT_SCALAR,
                                out_scale=self._c_scale_dev)
            with _stage(marks, "inverse"):
                self._transform(a, self.inverse_twiddles, dit=False, out=out, in_scale=b,
                                out_flags=OUT_SCALE_REV | OUT_SUB | OUT_SCATTER_REV,
                                out_scale=h_factors, sub=c)
        if events is not None and marks is not None:
            events.update(marks)
        return out


@contextlib.contextmanager
def _stage(marks: dict[str, tuple[Any, Any]] | None, name: str) -> Iterator[None]:
    if marks is None:
        yield
        return
    start, end = marks[name]
    start.record()
    yield
    end.record()


def durations_ms(events: MutableMapping[str, tuple[Any, Any]]) -> dict[str, float]:
    """Device time of each recorded stage, in milliseconds (waits for the stages' ends)."""
    cupy = kernels.require_cupy()
    result = {}
    for name, (start, end) in events.items():
        end.synchronize()
        result[name] = float(cupy.cuda.get_elapsed_time(start, end))
    return result
