"""`PHASE:PARTITION` fault specs: make one phase raise on one partition, to see how a run (or a
sweep's cell) handles a failure. One parser for `workbench run --inject-fault` and a grid's
`inject_fault` key, so both accept and refuse the same specs."""

from __future__ import annotations

from workbench.pipeline.run import FAULT_POINTS, FaultHook


class FaultSpecError(ValueError):
    pass


def fault_hook(spec: str | None, where: str = "--inject-fault") -> FaultHook | None:
    """The hook a spec names (None: no fault); FaultSpecError naming `where` when it is malformed."""
    if spec is None:
        return None
    if not isinstance(spec, str):
        raise FaultSpecError(f"{where} {spec!r} is not allowed: PHASE:PARTITION, e.g. batch_add:2")
    phase, _, partition_text = spec.partition(":")
    if not phase or not partition_text.isdigit():
        raise FaultSpecError(f"{where} {spec!r} is not allowed: PHASE:PARTITION, e.g. batch_add:2")
    partition = int(partition_text)
    if phase not in FAULT_POINTS:
        raise FaultSpecError(f"{where} {spec!r} is not allowed: no phase {phase!r} (one of "
                             f"{', '.join(FAULT_POINTS)})")

    def hook(name: str, p: int, worker: int) -> None:
        if name == phase and p == partition:
            raise RuntimeError(f"fault injected into {phase} of partition {partition}")

    return hook
