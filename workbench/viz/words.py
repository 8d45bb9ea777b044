"""A span's recorded attributes said in words, with units, for hovers and details.

Attributes arrive as recorders and importers wrote them (`gap_ns=405352`, `party=prep,
arrival=0`); a reader wants "the lock lay free 0.41 ms before it was taken" and "prep side,
arrived first". Known keys have a phrase each; any other key is said as its name in words
with its unit read from the suffix (`_ns`, `_ms`, `_bytes`, `_gbps`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

LIMIT = 160
ORDINALS = ("first", "second", "third", "fourth")
NO_STREAM = 4294967295  # CUPTI's "no stream" (all bits set)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3g} ms" if ns < 1e9 else f"{ns / 1e9:.3g} s"


def _bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def _count(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) else str(v)


def _counted(v: Any, noun: str) -> str:
    """`v` things: "1 point", "256 points" (a plural noun given, its "s" dropped for one)."""
    return f"{_count(v)} {noun[:-1] if v == 1 else noun}"


def _dims(v: Any) -> str:
    return "×".join(str(x) for x in v) if isinstance(v, list | tuple) else str(v)


PHRASES: dict[str, Callable[[Any], str]] = {
    "gap_ns": lambda v: f"the lock lay free {_ms(v)} before this wait ended",
    "party": lambda v: f"{v} side",
    "arrival": lambda v: "arrived " + (ORDINALS[v] if isinstance(v, int) and 0 <= v < len(ORDINALS) else
                                       f"number {v}"),
    "last": lambda v: f"the {v} side arrived last",
    "correlation": lambda v: f"CUDA correlation {v}",
    "by": lambda v: {"api": "matched to its API call", "time": "matched by time"}.get(v, f"matched by {v}"),
    "api": lambda v: f"launched by {v}",
    "phase": lambda v: f"during {v}",
    "span": lambda v: f"in {v}",
    "grid": lambda v: f"grid {_dims(v)}",
    "block": lambda v: f"block {_dims(v)}",
    "stream": lambda v: "no stream" if v == NO_STREAM else f"stream {v}",
    "src_kind": lambda v: f"from {v} memory",
    "dst_kind": lambda v: f"to {v} memory",
    "memory_kind": lambda v: f"{v} memory",
    "value": lambda v: f"fill value {v}",
    "vector": lambda v: f"vector {v}",
    "source": lambda v: f"from {v} memory",
    "emulated": lambda v: "emulated: host memcpy, no PCIe" if v else "",
    "device_ms": lambda v: f"{v:.3g} ms on the device",
    "host_span_ms": lambda v: f"host call {v:.3g} ms",
    "host_overhead_ms": lambda v: f"{v:.3g} ms of it beyond the device's time",
    "points": lambda v: _counted(v, "points"),
    "g2_points": lambda v: _counted(v, "G2 points"),
    "scalars": lambda v: _counted(v, "scalars"),
    "transforms": lambda v: _counted(v, "transforms"),
    "on": lambda v: f"on the {v}",
    "log2": lambda v: f"2^{v} constraints",
    "gpu": lambda v: f"GPU {v}",
    "gbps": lambda v: f"{v:.1f} GB/s",
    "workers": lambda v: _counted(v, "workers"),
    "count": lambda v: f"{_count(v)} of them",
    "backend": lambda v: f"{v} backend",
    "g1_method": lambda v: f"G1 by {v}",
}


def say(key: str, value: Any) -> str:
    """One attribute in words."""
    if key in PHRASES:
        try:
            return PHRASES[key](value)
        except (TypeError, ValueError):
            pass  # a value of an unexpected type: said plainly below
    words = key.replace("_", " ")
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if numeric and key.endswith("_ns"):
        return f"{words[:-3]} {_ms(value)}"
    if numeric and key.endswith("_ms"):
        return f"{words[:-3]} {value:.3g} ms"
    if numeric and key.endswith("_bytes"):
        return f"{words[:-6]} {_bytes(value)}"
    if numeric and key.endswith("_gbps"):
        return f"{words[:-5]} {value:.2f} GB/s"
    if isinstance(value, float):
        return f"{words} {value:.4g}"
    return f"{words} {_count(value)}"


def copy_detail(attrs: dict[str, Any], duration_ns: int) -> str:
    """Bytes and effective bandwidth (bytes per ns is GB/s) of a copy, with its provenance."""
    size = attrs["bytes"]
    rate = size / duration_ns if duration_ns > 0 else float("inf")
    text = f"{_bytes(size)} at {rate:.2f} GB/s"
    extras = [say(k, v) for k, v in attrs.items() if k != "bytes"]
    extras = [e for e in extras if e]
    return text + (f" ({', '.join(extras)})" if extras else "")


def describe(attrs: dict[str, Any] | None, duration_ns: int) -> str:
    if not attrs:
        return ""
    if "error" in attrs:
        return f"error: {attrs['error']}"
    if isinstance(attrs.get("bytes"), int | float):
        text = copy_detail(attrs, duration_ns)
    else:
        text = ", ".join(part for k, v in attrs.items() if (part := say(k, v)))
    return text if len(text) <= LIMIT else text[:LIMIT - 3] + "..."
