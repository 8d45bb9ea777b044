"""A fleet of hosts, each reduced to what bounds it, ranked so the commonest problem leads.

Each host's load and verdict (analysis/verdict.py) is reduced where it is read to a
`HostRecord`: small, picklable, made of plain values (the trace stays where it was read). The
bound is the verdict's first finding (its id, without the GPU a multi-GPU finding names), so a
pipeline (our runs, cuzk logs) is bound by a pipeline finding and any other GPU program by a
program finding (what its GPU waited for); a pipeline verdict is never invented for one.

Ranking: hosts grouped by bound, the groups with most hosts first, the GPU-bound ones (the
host keeps its GPU busy: nothing to fix there), those with no finding and the unreadable last;
inside a group, the costliest first (cost: the share of the run the bound accounts for).

Contract: `host_record(...) -> HostRecord`, `unreadable(...) -> HostRecord`,
`rank(records) -> FleetView`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from workbench.analysis.finding import Finding
from workbench.analysis.verdict import Verdict
from workbench.trace.container import Trace

NONE, UNREADABLE, GPU_BOUND = "none", "unreadable", "gpu_bound"
LABELS = {
    "copy_bound": "copy-bound", "lock_serialised": "lock-serialised",
    "synthesis_starved": "synthesis-starved", "prep_bound": "prep-bound", GPU_BOUND: "GPU-bound",
    "workers_short": "short of GPU workers", "variable_lock_phase": "a lock phase varies",
    "staging": "staging copies", "gpu_imbalance": "GPU imbalance",
    "host_contention": "host memory contention", "pageable_copies": "pageable copies",
    "unit_variation": "a varying unit of work", "lock_contention": "lock contention",
    NONE: "no bound found", UNREADABLE: "unreadable",
}
LAST = (GPU_BOUND, NONE, UNREADABLE)  # groups ranked after every problem, in this order
EVIDENCE = 5  # spans or lines kept per host: enough to show the bound, small to ship
_GPU_SUFFIX = re.compile(r"/gpu\d+$")


@dataclass(frozen=True)
class EvidenceItem:
    """One span behind a host's bound: a line of a log (`line` set) or a span of a trace."""

    span: int  # its index in the host's trace
    name: str
    track: str
    partition: int
    ms: float
    line: int | None = None  # the log line its figure came from (cuzk logs)

    def where(self, source: str) -> str:
        """`node7.log:812` for a log's line, `span 4711` for a trace's span."""
        return f"{_file_name(source)}:{self.line}" if self.line is not None else f"span {self.span}"

    def describe(self, source: str) -> str:
        partition = f", partition {self.partition}" if self.partition >= 0 else ""
        return f"{self.where(source)} {self.name} on {self.track} {_ms(self.ms)}{partition}"


def _ms(ms: float) -> str:
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.3g} ms"


@dataclass(frozen=True)
class HostRecord:
    host: str
    source: str  # the file read
    kind: str  # input format: cuzk, nsys, chrome, wbtrace (empty when unreadable)
    bound: str  # the first finding's id (NONE, UNREADABLE)
    title: str
    cost: float  # share of the host's run the bound accounts for
    headline: str = ""
    pipeline: bool = False  # a pipeline verdict (consumer threads) or a program verdict
    window_s: float = 0.0
    throughput: float | None = None  # units per minute, where the trace has units
    unit: str = ""  # what throughput counts
    evidence: tuple[EvidenceItem, ...] = ()
    numbers: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    error: str = ""  # why the file could not be read
    read_s: float = 0.0  # seconds to read and judge it

    @property
    def group(self) -> str:
        """The bound without the GPU it was found on: hosts bound alike on different GPUs group."""
        return _GPU_SUFFIX.sub("", self.bound)

    @property
    def label(self) -> str:
        return label(self.group)

    @property
    def readable(self) -> bool:
        return self.bound != UNREADABLE

    @property
    def cost_text(self) -> str:
        """The cost as tables show it: a GPU-bound host's is the share its GPU computes."""
        if not self.readable:
            return "-"
        return f"{self.cost:.0%} busy" if self.group == GPU_BOUND else f"{self.cost:.0%}"


def label(group: str) -> str:
    if group in LABELS:
        return LABELS[group]
    if group.startswith("idle_"):
        return f"GPU idle: {group.removeprefix('idle_').replace('_', ' ')}"
    return group.replace("_", " ")


def host_record(
    host: str, source: str, kind: str, trace: Trace, verdict: Verdict, read_s: float = 0.0,
) -> HostRecord:
    first = verdict.findings[0] if verdict.findings else None
    summary = verdict.summary
    throughput, unit = _throughput(verdict, summary.wall_s)
    numbers: dict[str, float] = {}
    if first is not None:
        numbers = {k: float(v) for k, v in first.numbers.items()}
        best = first.best_prediction
        if best is not None:
            numbers["predicted_gain"] = float(best.gain)
    if verdict.pipeline:
        numbers["mutex_held"] = float(summary.mutex_held_fraction)
        numbers["partitions"] = float(summary.partitions_done)
    return HostRecord(
        host=host, source=source, kind=kind,
        bound=first.id if first is not None else NONE,
        title=first.title if first is not None else verdict.headline,
        cost=float(first.cost) if first is not None else 0.0,
        headline=verdict.headline, pipeline=verdict.pipeline, window_s=float(summary.wall_s),
        throughput=throughput, unit=unit,
        evidence=evidence_of(trace, first) if first is not None else (),
        numbers=numbers, notes=tuple(verdict.notes), read_s=read_s,
    )


def _throughput(verdict: Verdict, wall_s: float) -> tuple[float | None, str]:
    if verdict.pipeline:
        return float(verdict.summary.throughput_per_min), "partitions/min"
    units = verdict.units
    if units is not None and wall_s > 0 and units.durations.count:
        return units.durations.count / wall_s * 60, f"{units.name}/min"
    return None, ""


def evidence_of(trace: Trace, finding: Finding, keep: int = EVIDENCE) -> tuple[EvidenceItem, ...]:
    s = trace.spans
    out = []
    for i in finding.evidence.spans[:keep]:
        attrs = s.attrs[i] or {}
        line = attrs.get("line")
        out.append(EvidenceItem(
            span=int(i), name=trace.strings.values[s.name[i]], track=trace.strings.values[s.track[i]],
            partition=int(s.partition[i]), ms=float(s.end_ns[i] - s.start_ns[i]) / 1e6,
            line=int(line) if isinstance(line, int) else None,
        ))
    return tuple(out)


def unreadable(host: str, source: str, reason: str, read_s: float = 0.0) -> HostRecord:
    said = (reason.strip().splitlines() or ["cannot be read"])[0]
    return HostRecord(host=host, source=source, kind="", bound=UNREADABLE, title=said, cost=0.0,
                      error=said, read_s=read_s)


@dataclass(frozen=True)
class BoundCount:
    group: str
    label: str
    hosts: int
    cost_mean: float


@dataclass(frozen=True)
class FleetView:
    records: tuple[HostRecord, ...]  # ranked
    counts: tuple[BoundCount, ...]  # in the order the groups rank

    @property
    def sentence(self) -> str:
        """"31 hosts copy-bound, 12 lock-serialised, ...": the fleet in one line."""
        if not self.counts:
            return "no hosts"
        parts = [f"{c.hosts} {c.label}" for c in self.counts]
        noun = "host" if self.counts[0].hosts == 1 else "hosts"
        parts[0] = f"{self.counts[0].hosts} {noun} {self.counts[0].label}"
        return ", ".join(parts)

    @property
    def read(self) -> int:
        return sum(1 for r in self.records if r.readable)


def distinct_hosts(records: Iterable[HostRecord]) -> list[HostRecord]:
    """Hosts named alike (two files of one host) told apart by their files' names."""
    records = list(records)
    seen = Counter(r.host for r in records)
    return [replace(r, host=f"{r.host} ({_file_name(r.source)})") if seen[r.host] > 1 else r for r in records]


def _file_name(source: str) -> str:
    return re.split(r"[\\/]", source)[-1] or source


def rank(records: Sequence[HostRecord]) -> FleetView:
    records = distinct_hosts(records)
    by_group: dict[str, list[HostRecord]] = {}
    for r in records:
        by_group.setdefault(r.group, []).append(r)

    def group_key(group: str) -> tuple[int, int, float, str]:
        members = by_group[group]
        last = LAST.index(group) + 1 if group in LAST else 0
        return (last, -len(members), -sum(r.cost for r in members), group)

    ordered = sorted(by_group, key=group_key)
    ranked = tuple(r for g in ordered for r in sorted(by_group[g], key=lambda r: (-r.cost, r.host)))
    counts = tuple(BoundCount(g, label(g), len(by_group[g]),
                              sum(r.cost for r in by_group[g]) / len(by_group[g])) for g in ordered)
    return FleetView(ranked, counts)


def as_dict(view: FleetView) -> dict[str, Any]:
    """The view as plain JSON values: the counts in rank order and every host's record."""
    hosts = []
    for r in view.records:
        d = asdict(r)
        d["group"], d["label"] = r.group, r.label
        for item, e in zip(d["evidence"], r.evidence, strict=True):
            item["where"] = e.where(r.source)
        hosts.append(d)
    return {"sentence": view.sentence, "counts": [asdict(c) for c in view.counts], "hosts": hosts}
