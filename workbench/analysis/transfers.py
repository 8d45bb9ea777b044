"""Host-to-device copies: effective GB/s per copy against the link, and hidden staging.

The link speed is given by the caller, or measured: the fastest pinned copy in the device
records, or a figure the run stored in its facts (`meta["link_gbps"]`). Without one the
report still gives every copy's rate and the fastest copy in the run as a yardstick.

Hidden staging: a pageable copy is staged through a pinned bounce buffer by the runtime, a
host memcpy that no span names; where device copy records exist (or the backend timed each
copy on the device, attribute `device_ms`) it is the host copy span's length minus the
device's. Pinned mode's explicit staging is its own span.

Contract: `transfer_report(trace, link_gbps=None, copy_bytes=None) -> TransferReport | None`
(None when the trace has no copies); `copy_rates(trace) -> tuple[CopyRate, ...]`, one row
per copy. `copy_bytes` fills in the bytes a partition moves for copies that do not record
them (logs carry times only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.distribution import Distribution, correlation
from workbench.analysis.intervals import Intervals, concurrency_ns
from workbench.analysis.tracks import counter_values, device_mask, kind_mask
from workbench.model import tracks as tr
from workbench.model.tracks import HOST_LOAD_TRACK
from workbench.trace.container import Trace

GB = 1e9
EVIDENCE = 5
PINNED_KINDS = ("pinned", 1, "1")


@dataclass(frozen=True)
class Rates:
    """Rates in GB/s."""

    count: int
    min: float
    median: float
    p90: float
    max: float

    @classmethod
    def of(cls, values: np.ndarray) -> Rates | None:
        if not len(values):
            return None
        return cls(len(values), float(values.min()), float(np.median(values)),
                   float(np.percentile(values, 90)), float(values.max()))


@dataclass(frozen=True)
class LinkSpeed:
    gbps: float
    source: str


@dataclass(frozen=True)
class TransferReport:
    copies: int
    bytes_total: int
    sources: tuple[str, ...]  # memory kinds copied from (pageable, pinned)
    emulated: bool  # copies were host memcpys standing in for a link
    rates: Rates | None  # host-timed, per copy
    device_rates: Rates | None  # device copy records, host to device
    link: LinkSpeed | None
    per_partition: Distribution  # copy time per partition (a, b and c together)
    at_link_ms: float | None  # the median partition's copy time at link speed
    excess_ms: float | None  # total copy time above link speed
    under_lock_ms: float  # copy time spent holding the GPU mutex
    staging_ms: float  # explicit staging copies
    hidden_staging_ms: float | None
    synth_correlation: float | None  # r(copy rate, synthesis threads running during it)
    # Host memory load run beside the pipeline (pipeline/host_load.py), if any: its threads,
    # its mean rate, and r(copy rate, load rate sampled nearest the copy).
    host_load_threads: int
    host_load_gbps: float | None
    load_correlation: float | None
    slowest: tuple[int, ...]  # span indices of the slowest copies

    @property
    def link_share(self) -> float | None:
        if self.link is None or self.rates is None:
            return None
        return self.rates.median / self.link.gbps


@dataclass(frozen=True)
class CopyRate:
    span: int
    partition: int
    vector: str
    source: str
    bytes: float
    host_ms: float
    gbps: float | None  # host-timed effective rate
    device_ms: float | None


def copy_rates(trace: Trace, copy_bytes: float | None = None) -> tuple[CopyRate, ...]:
    """Every host-to-device copy with its effective rate, in trace order."""
    host = np.flatnonzero(trace.span_mask(name="h2d_copy") & ~device_mask(trace))
    nbytes = _bytes(trace, host, copy_bytes)
    out = []
    for i, size in zip(host.tolist(), nbytes.tolist(), strict=True):
        ns = int(trace.spans.end_ns[i] - trace.spans.start_ns[i])
        device = _number(trace, i, "device_ms")
        out.append(CopyRate(
            i, int(trace.spans.partition[i]), str(_attr(trace, i, "vector", "")),
            str(_attr(trace, i, "source", "")), size, ns / 1e6, size / ns if size and ns else None,
            None if np.isnan(device) else device,
        ))
    return tuple(out)


def transfer_report(
    trace: Trace, link_gbps: float | None = None, copy_bytes: float | None = None,
) -> TransferReport | None:
    spans = trace.spans
    host = np.flatnonzero(trace.span_mask(name="h2d_copy") & ~device_mask(trace))
    staging = trace.span_mask(name="staging_copy")
    device = np.flatnonzero(kind_mask(trace, tr.COPIES, name="h2d"))
    if not len(host) and not len(device):
        return None
    durations = spans.end_ns[host] - spans.start_ns[host]
    nbytes = _bytes(trace, host, copy_bytes)
    known = (nbytes > 0) & (durations > 0)
    rates = nbytes[known] / durations[known]  # bytes per ns = GB/s
    device_dur = (spans.end_ns[device] - spans.start_ns[device]).astype(np.float64)
    device_bytes = np.array([_attr(trace, i, "bytes", 0) for i in device.tolist()], dtype=np.float64)
    device_pinned = np.array([_attr(trace, i, "src_kind", None) in PINNED_KINDS for i in device.tolist()],
                             dtype=bool)
    hidden = _hidden_staging(trace, host, device)
    timed = np.array([_number(trace, i, "device_ms") * 1e6 for i in host.tolist()])
    if not len(device) and np.isfinite(timed).any():
        # No device records, but the backend timed each copy on the device itself.
        on_device = np.isfinite(timed)
        device_dur, device_bytes = timed[on_device], nbytes[on_device]
        device_pinned = np.array([_attr(trace, i, "source", None) in PINNED_KINDS
                                  for i in host[on_device].tolist()], dtype=bool)
        pageable = on_device & np.array([_attr(trace, i, "source", "pageable") == "pageable"
                                         for i in host.tolist()], dtype=bool)
        hidden = float(np.clip(durations[pageable] - timed[pageable], 0, None).sum()) / 1e6
    device_ok = (device_bytes > 0) & (device_dur > 0)
    device_rates = device_bytes[device_ok] / device_dur[device_ok]
    link = _link(trace, link_gbps, device_rates, device_pinned[device_ok])
    per_partition = _per_partition_ns(trace, host, durations)
    at_link = excess = None
    if link is not None and known.any():
        at_link_ns = nbytes / link.gbps
        excess = float(np.clip(durations - at_link_ns, 0, None)[known].sum()) / 1e6
        per_partition_bytes = _per_partition_ns(trace, host, nbytes.astype(np.int64))
        if len(per_partition_bytes):
            at_link = float(np.median(per_partition_bytes)) / link.gbps / 1e6
    holds = kind_mask(trace, tr.MUTEX, name="hold")
    held = Intervals.of(spans.start_ns[holds], spans.end_ns[holds])
    copies_set = Intervals.of(spans.start_ns[host], spans.end_ns[host])
    synth = trace.span_mask(name="synthesis")
    synth_active = concurrency_ns(
        spans.start_ns[host][known], spans.end_ns[host][known], spans.start_ns[synth], spans.end_ns[synth],
    ) / np.maximum(durations[known], 1)
    load_threads, load_gbps, load_r = _host_load(trace, spans.start_ns[host][known],
                                                 spans.end_ns[host][known], rates)
    slowest = host[known][np.argsort(rates, kind="stable")[:EVIDENCE]] if known.any() else host[:0]
    sources = sorted({str(_attr(trace, i, "source", "")) for i in host.tolist()} - {""})
    return TransferReport(
        copies=len(host) or len(device),
        bytes_total=int(nbytes.sum() if len(host) else device_bytes.sum()),
        sources=tuple(sources),
        emulated=bool(trace.meta.get("memory_emulated", False))
        or any(_attr(trace, i, "emulated", False) for i in host[:1].tolist()),
        rates=Rates.of(rates), device_rates=Rates.of(device_rates), link=link,
        per_partition=Distribution.of_ns(per_partition), at_link_ms=at_link, excess_ms=excess,
        under_lock_ms=copies_set.intersect(held).total() / 1e6,
        staging_ms=float((spans.end_ns[staging] - spans.start_ns[staging]).sum()) / 1e6,
        hidden_staging_ms=hidden,
        synth_correlation=correlation(rates, synth_active),
        host_load_threads=load_threads, host_load_gbps=load_gbps, load_correlation=load_r,
        slowest=tuple(int(i) for i in slowest.tolist()),
    )


def _host_load(trace: Trace, starts: np.ndarray, ends: np.ndarray,
               rates: np.ndarray) -> tuple[int, float | None, float | None]:
    mask = trace.span_mask(track=HOST_LOAD_TRACK, name="host_load")
    index = np.flatnonzero(mask)
    if not len(index):
        return 0, None, None
    attrs = trace.spans.attrs[int(index[0])] or {}
    threads = int(attrs.get("threads", 0) or 0)
    gbps = attrs.get("gbps")
    ts, values = counter_values(trace, HOST_LOAD_TRACK, "GB/s")
    r = None
    if len(ts) >= 2 and len(rates):
        # Each copy against the load sampled nearest its middle (samples every quarter second).
        middle = (starts + ends) // 2
        after = np.clip(np.searchsorted(ts, middle), 1, len(ts) - 1)
        before = after - 1
        nearest = np.where(middle - ts[before] <= ts[after] - middle, before, after)
        r = correlation(rates, values[nearest])
    return threads, float(gbps) if isinstance(gbps, int | float) else None, r


def _attr(trace: Trace, i: int, key: str, default: object) -> object:
    attrs = trace.spans.attrs[i]
    return attrs.get(key, default) if attrs else default


def _number(trace: Trace, i: int, key: str) -> float:
    value = _attr(trace, i, key, None)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else np.nan


def _bytes(trace: Trace, host: np.ndarray, copy_bytes: float | None) -> np.ndarray:
    nbytes = np.nan_to_num(np.array([_number(trace, i, "bytes") for i in host.tolist()]))
    if copy_bytes and (nbytes == 0).any():
        partitions = trace.spans.partition[host]
        for p in np.unique(partitions[nbytes == 0]).tolist():
            mine = (partitions == p) & (nbytes == 0)
            nbytes[mine] = copy_bytes / mine.sum()
    return nbytes


def link_speed(trace: Trace, given: float | None, fastest_pinned: float | None,
               pinned_source: str) -> LinkSpeed | None:
    """The host link's speed: given, else the run's own probe, else the fastest pinned copy."""
    if given:
        return LinkSpeed(float(given), "given")
    # The run's own probe (a pinned copy timed at setup, before any load) comes before copies
    # seen during the run: in a pageable run those are the driver's bounce-buffer chunks, and
    # on a loaded H200 host the fastest of them ran at 43 GB/s on a 54 GB/s link.
    stored = trace.meta.get("link_gbps")
    if isinstance(stored, int | float) and stored > 0:
        return LinkSpeed(float(stored), "measured by the run")
    if fastest_pinned is not None:
        return LinkSpeed(float(fastest_pinned), pinned_source)
    return None


def _link(trace: Trace, given: float | None, rates: np.ndarray, pinned: np.ndarray) -> LinkSpeed | None:
    fastest = float(rates[pinned].max()) if pinned.any() else None
    return link_speed(trace, given, fastest, "fastest pinned copy timed on the device")


def _per_partition_ns(trace: Trace, idx: np.ndarray, values: np.ndarray) -> np.ndarray:
    partitions = trace.spans.partition[idx]
    if not len(idx):
        return np.zeros(0, np.int64)
    keys, inverse = np.unique(partitions, return_inverse=True)
    sums = np.zeros(len(keys), dtype=np.float64)
    np.add.at(sums, inverse, values)
    return sums


def _hidden_staging(trace: Trace, host: np.ndarray, device: np.ndarray) -> float | None:
    """Host copy time not covered by device copies inside it, for pageable copies."""
    if not len(device) or not len(host):
        return None
    spans = trace.spans
    on_device = Intervals.of(spans.start_ns[device], spans.end_ns[device])
    hidden = 0
    for i in host.tolist():
        if _attr(trace, i, "source", "pageable") != "pageable":
            continue
        start, end = int(spans.start_ns[i]), int(spans.end_ns[i])
        hidden += (end - start) - on_device.overlap_with(start, end)
    return hidden / 1e6
