"""The run's settings and facts in a `.wbtrace` header, checked field by field.

The analyses read these (gpu_workers sizes the replay, worker_gpu maps workers to mutexes,
link_gbps times copies), so a crafted value (gpu_workers -3, a worker's GPU null, a link of
1e-300 GB/s) would reach them as a deadlock or an overflow. Known fields must have the type
and range the workbench writes; unknown ones are left alone (a newer workbench may add some).

Contract: `facts_fault(config, meta) -> str | None`, the fault naming the field.
"""

from __future__ import annotations

import math
from typing import Any

from workbench.config import BACKENDS, LINK_GBPS_RANGE, LOCK_SCOPES, MEMORY_MODES, SYNTHESIS_MODES

TIME_LIMIT = 2**62


class _Bad(Exception):
    pass


def _int(low: int, high: int, none: bool = False) -> Any:
    def check(value: Any) -> None:
        if value is None and none:
            return
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise _Bad(f"an integer from {low} to {high}")
    return check


def _number(low: float, high: float, none: bool = False) -> Any:
    def check(value: Any) -> None:
        if value is None and none:
            return
        if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
                or not low <= value <= high):
            raise _Bad(f"a number from {low:g} to {high:g}")
    return check


def _text(none: bool = False) -> Any:
    def check(value: Any) -> None:
        if not (isinstance(value, str) or (value is None and none)):
            raise _Bad("a string")
    return check


def _strings(value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Bad("a list of strings")


def _flag(value: Any) -> None:
    if not isinstance(value, bool):
        raise _Bad("true or false")


def _object(value: Any) -> None:
    if not isinstance(value, dict):
        raise _Bad("an object")


def _choice(allowed: tuple[str, ...]) -> Any:
    def check(value: Any) -> None:
        if value not in allowed:
            raise _Bad("one of " + ", ".join(allowed))
    return check


def _worker_gpu(value: Any) -> None:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and k.isdigit() and len(k) < 6 and isinstance(g, int) and not isinstance(g,
                                                                                                        bool)
            and 0 <= g < 4096 for k, g in value.items()):
        raise _Bad("an object of worker numbers to GPU numbers (0 to 4095)")


TIME = _int(-TIME_LIMIT, TIME_LIMIT)
META = {
    "origin_ns": TIME, "origin_file_ns": TIME, "origin_unix_ns": TIME, "started_ns": _int(0, TIME_LIMIT,
                                                                                          True),
    "outcome": _text(), "error": _text(none=True), "device": _text(True), "backend": _text(),
    "label": _text(),
    "trace_file": _text(), "memory_emulated": _flag, "partitions_done": _int(0, 2**31 - 1),
    "gpus": _int(0, 4096), "host_cpus": _int(0, 2**20, True), "wall_s": _number(0, TIME_LIMIT / 1e9),
    "link_gbps": _number(*LINK_GBPS_RANGE, none=True), "switch_interval_s": _number(0, 1e9, True),
    "notices": _strings, "track_order": _strings, "worker_gpu": _worker_gpu, "import": _object,
}

# Not RunConfig's own bounds (a run's): an imported trace may have more workers than a run may.
COUNT = _int(1, 65536)
CONFIG = {
    "backend": _choice(BACKENDS), "memory_mode": _choice(MEMORY_MODES), "lock_scope": _choice(LOCK_SCOPES),
    "synthesis": _choice(SYNTHESIS_MODES), "gpus": COUNT, "gpu_workers": COUNT, "synth_threads": COUNT,
    "synth_lookahead": COUNT, "partitions": _int(0, 2**31 - 1), "log2_constraints": _int(0, 62),
    "bool_fraction": _number(0, 1), "seed": _int(0, 2**64), "synth_terms": _int(0, 2**31 - 1),
    "host_load_threads": _int(0, 65536), "sample_interval_ms": _int(0, 2**31 - 1),
    **{name: _flag for name in ("trace", "gpu_trace", "verify")},
}


def facts_fault(config: dict[str, Any], meta: dict[str, Any]) -> str | None:
    """What is wrong with the first known field that is wrong, or None."""
    for table, checks, values in (("config", CONFIG, config), ("meta", META, meta)):
        for key, check in checks.items():
            if key in values:
                try:
                    check(values[key])
                except _Bad as bad:
                    return f"header field '{table}.{key}' is {_shown(values[key])}, not {bad}"
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
