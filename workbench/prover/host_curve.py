"""The curve phases as computed on the host with the independent curve library, and the
Groth16 key both backends load.

The CPU backend uses all of them; the GPU backend keeps finish here, and all of them when it
runs without its MSM kernels (gpu_msm=False).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.config import RunConfig
from workbench.prover import key_cache, prep, srs
from workbench.prover.backend import DeviceBuffers
from workbench.prover.circuit import SyntheticCircuit
from workbench.prover.proof import assemble_proof
from workbench.trace.scope import Scope


class HostCurvePhases:
    key: srs.Srs | None = None
    setup_notices: list[str]  # lines for the run's notices, said during setup (set in __init__)

    def load_groth16_key(self, config: RunConfig, scope: Scope, **options: Any) -> srs.Srs:
        """The circuit's Groth16 key (prover/trusted_setup.py), through its cache; a cache
        file that could not be used becomes a setup notice."""
        circuit = SyntheticCircuit(config.log2_constraints, config.bool_fraction, config.synth_terms,
                                   config.seed, native_code=False)
        with scope.span("proving_key", log2=config.log2_constraints, setup="groth16"):
            self.key = key_cache.load_or_setup(circuit, notice=self.setup_notices.append, **options)
        return self.key

    def _key(self) -> srs.Srs:
        if self.key is None:
            raise RuntimeError("the proving key is not loaded: setup() must run first")
        return self.key

    def parse_key_points(self, scope: Scope) -> None:
        """Turn the key's bytes into the curve library's point objects now, in setup: done
        lazily by the first partition it took seconds at 2^22 (G2 most of all) and held
        every worker up inside the run."""
        key = self._key()
        with scope.span("parse_key_points", points=len(key.b_g2) + 3 * len(key.a)):
            for points in (key.b_g2, key.l, key.a, key.b_g1):
                points.objects()

    def batch_add(self, buffers: DeviceBuffers, prepared: prep.PrepResult, scope: Scope) -> dict[str, Any]:
        return prep.batch_add_queries(prepared, self._key())

    def tail_msm(self, buffers: DeviceBuffers, prepared: prep.PrepResult, scope: Scope) -> dict[str, Any]:
        return prep.tail_msm_queries(prepared, self._key())

    def b_g2_msm(self, witness: np.ndarray, prepared: prep.PrepResult, scope: Scope) -> Any:
        return prep.b_g2_msm_prepared(prepared, self._key())

    def finish(self, parts: dict[str, Any], partition: int, scope: Scope) -> Any:
        return assemble_proof(self._key(), parts, partition)
