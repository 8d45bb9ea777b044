"""The curve phases as computed on the host with the independent curve library.

The CPU backend uses all of them; the GPU backend keeps b_g2_msm and finish here (as the
production prover does) and, until its own MSM kernels take over, the rest too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.pipeline.scope import Scope
from workbench.prover import prep, srs
from workbench.prover.backend import DeviceBuffers
from workbench.prover.proof import assemble_proof


class HostCurvePhases:
    key: srs.Srs | None = None

    def _key(self) -> srs.Srs:
        if self.key is None:
            raise RuntimeError("the proving key is not loaded: setup() must run first")
        return self.key

    def batch_add(self, buffers: DeviceBuffers, prepared: prep.PrepResult, scope: Scope) -> dict[str, Any]:
        return prep.batch_add_queries(prepared, self._key())

    def tail_msm(self, buffers: DeviceBuffers, prepared: prep.PrepResult, scope: Scope) -> dict[str, Any]:
        return prep.tail_msm_queries(prepared, self._key())

    def b_g2_msm(self, witness: np.ndarray, prepared: prep.PrepResult, scope: Scope) -> Any:
        return prep.b_g2_msm_prepared(prepared, self._key())

    def finish(self, parts: dict[str, Any], partition: int, scope: Scope) -> Any:
        return assemble_proof(self._key(), parts, partition)
