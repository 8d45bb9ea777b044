"""Device copies by direction and memory kind, with effective GB/s against the link.

Reads the device's own copy records (role copy: span name h2d / d2h / d2d / p2p, attributes
bytes, src_kind, dst_kind). The link speed is, first to last: the one the caller gives
(`--link-gbps`), the run's own link probe (`meta["link_gbps"]`), or the fastest copy
from pinned host memory in the trace, said as such; without any of them rates stand alone.

Pageable host-to-device copies are flagged: the driver copies them through a pinned bounce
buffer on the host, so they run below the link and their speed depends on host memory.

Contract: `copy_kinds(trace, link_gbps=None) -> CopyKinds | None` (None: no copy records).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.transfers import LinkSpeed, link_speed
from workbench.model import roles as rl
from workbench.trace.container import Trace

EVIDENCE = 5
PINNED = "pinned"
PAGEABLE = "pageable"


@dataclass(frozen=True)
class CopyKind:
    direction: str  # h2d, d2h, d2d, p2p
    src_kind: str  # pageable, pinned, device, managed, ... ("" where the record does not say)
    dst_kind: str
    count: int
    bytes: int
    ms: float  # summed copy time
    gbps: float | None  # bytes over summed time: the rate these copies moved data at
    median_gbps: float | None  # of the copies one by one
    max_gbps: float | None
    slowest: tuple[int, ...]  # span indices

    @property
    def pageable_h2d(self) -> bool:
        return self.direction == "h2d" and self.src_kind == PAGEABLE

    @property
    def label(self) -> str:
        kinds = f" {self.src_kind} -> {self.dst_kind}" if self.src_kind or self.dst_kind else ""
        return f"{self.direction}{kinds}"


@dataclass(frozen=True)
class CopyKinds:
    kinds: tuple[CopyKind, ...]  # most time first
    link: LinkSpeed | None

    @property
    def pageable_h2d(self) -> CopyKind | None:
        return next((k for k in self.kinds if k.pageable_h2d), None)

    def link_share(self, kind: CopyKind) -> float | None:
        if self.link is None or kind.gbps is None:
            return None
        return kind.gbps / self.link.gbps


def copy_kinds(trace: Trace, link_gbps: float | None = None) -> CopyKinds | None:
    spans = trace.spans
    index = np.flatnonzero(rl.role_mask(trace, "copy"))
    if not len(index):
        return None
    text = trace.strings.values
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i in index.tolist():
        attrs = spans.attrs[i] or {}
        key = (text[spans.name[i]], str(attrs.get("src_kind", "")), str(attrs.get("dst_kind", "")))
        groups.setdefault(key, []).append(i)
    kinds = []
    for (direction, src, dst), members in groups.items():
        idx = np.array(members)
        ns = (spans.end_ns[idx] - spans.start_ns[idx]).astype(np.float64)
        nbytes = np.array([_bytes(spans.attrs[i]) for i in members], dtype=np.float64)
        ok = (ns > 0) & (nbytes > 0)
        rates = nbytes[ok] / ns[ok]  # bytes per ns = GB/s
        total_ns = float(ns[ok].sum())
        slowest = idx[ok][np.argsort(rates, kind="stable")[:EVIDENCE]] if ok.any() else idx[:0]
        kinds.append(CopyKind(
            direction, src, dst, len(members), int(nbytes.sum()), float(ns.sum()) / 1e6,
            float(nbytes[ok].sum()) / total_ns if total_ns else None,
            float(np.median(rates)) if len(rates) else None, float(rates.max()) if len(rates) else None,
            tuple(int(i) for i in slowest.tolist()),
        ))
    kinds.sort(key=lambda k: -k.ms)
    return CopyKinds(tuple(kinds), _link(trace, link_gbps, kinds))


def _bytes(attrs: dict[str, object] | None) -> float:
    value = (attrs or {}).get("bytes")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _link(trace: Trace, given: float | None, kinds: list[CopyKind]) -> LinkSpeed | None:
    pinned = [k.max_gbps for k in kinds if k.max_gbps is not None and k.direction in ("h2d", "d2h")
              and PINNED in (k.src_kind, k.dst_kind)]
    return link_speed(trace, given, max(pinned) if pinned else None, "the fastest pinned copy in the trace")
