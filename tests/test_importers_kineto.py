"""PyTorch profiler (Kineto) traces from real runs: every span on the track its role calls for.

Expected counts, tracks and times are computed here with json over each file, by category.
"""

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from workbench.importers import ImportFailed, load_any, parse_chrome
from workbench.model import tracks as tr
from workbench.model.roles import role_counts

DATA = Path(__file__).parent / "data" / "kineto"
FILES = sorted(DATA.glob("*.json.gz"))
API = {"cuda_runtime", "cuda_driver"}
# Which of the API calls these files hold block the caller until the GPU catches up, and
# which launch GPU work (by the CUDA and HIP documentation of each call).
# (cudaEventQuery returns at once and cudaStreamWaitEvent makes a stream wait, not the host.)
SYNCS = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
         "cudaFree", "cudaMemcpy", "hipDeviceSynchronize", "hipMemcpyWithStream"}
LAUNCHES = {"cudaLaunchKernel", "cuLaunchKernel", "hipLaunchKernel", "hipExtModuleLaunchKernel"}
DIRECTIONS = {"HtoD": "h2d", "DtoH": "d2h", "DtoD": "d2d", "PtoP": "p2p"}
_loaded: dict[Path, tuple[list[dict], object]] = {}


def _both(path: Path):
    if path not in _loaded:
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        _loaded[path] = (events, load_any(path))
    return _loaded[path]


def _x(events, *cats):
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in cats]


def _syncs(events):
    """Synchronisation records, each with the API call of its correlation (None without one)."""
    calls = {e["args"]["correlation"]: e for e in _x(events, *API) if "correlation" in e["args"]}
    return [(e, calls.get(e["args"].get("correlation"))) for e in _x(events, "cuda_sync")]


def _spans_on(trace, kind):
    return [s for s in trace.iter_spans() if tr.parse(s.track).kind == kind]


def test_every_real_kineto_file_is_here():
    assert len(FILES) == 6


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name.split("_")[0])
def test_roles_by_category(path):
    events, trace = _both(path)
    counts = role_counts(trace)
    assert counts.get("kernel", 0) == len(_x(events, "kernel"))
    assert counts.get("copy", 0) == len(_x(events, "gpu_memcpy"))
    assert counts.get("memset", 0) == len(_x(events, "gpu_memset"))
    api = Counter(e["name"] for e in _x(events, *API))
    records = _syncs(events)
    # A stream's wait on an event holds no host thread: those records are runtime calls.
    called = sum(1 for e, call in records if call is not None and e["name"] != "Stream Wait Event")
    stream_waits = sum(1 for e, call in records if call is not None and e["name"] == "Stream Wait Event")
    assert counts.get("sync", 0) == sum(n for name, n in api.items() if name in SYNCS) + called
    assert counts.get("launch", 0) == sum(n for name, n in api.items() if name in LAUNCHES)
    others = sum(n for name, n in api.items() if name not in SYNCS | LAUNCHES)
    assert counts.get("runtime", 0) == others + stream_waits
    steps = [e for e in _x(events, "user_annotation", "cpu_op") if e["name"].startswith("ProfilerStep#")]
    assert counts.get("unit", 0) == len(steps)
    # The GPU-side mirrors are "other"; the profiler's recording window ("Trace") is an instant.
    mirrors = _x(events, "gpu_user_annotation", "cuda_profiler_range")
    placed = called + stream_waits  # records with their call sit on its cuda/ track
    assert counts.get("other", 0) == len(mirrors) + len(records) - placed
    windows = _x(events, "Trace")
    assert sum(counts.values()) == len(_x(events, *{e.get("cat") for e in events})) - len(windows)
    marks = [i for i in trace.iter_instants() if i.attrs.get("profiler_window")]
    assert sorted((i.name, round(i.attrs["dur_ns"] / 1e3)) for i in marks) == sorted(
        (e["name"], round(e["dur"])) for e in windows)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name.split("_")[0])
def test_tracks_from_the_arguments(path):
    events, trace = _both(path)
    kernels = _x(events, "kernel")
    assert Counter(s.track for s in _spans_on(trace, tr.KERNELS)) == Counter(
        tr.stream_track(e["args"]["device"], e["args"]["stream"]) for e in kernels)
    copies = _x(events, "gpu_memcpy")
    got = Counter((s.track, s.name, s.attrs.get("bytes"), s.attrs.get("src_kind"), s.attrs.get("dst_kind"))
                  for s in _spans_on(trace, tr.COPIES))
    # ROCm writes a copy's size only on the call that made it.
    sizes = {e["args"]["correlation"]: int(e["args"]["size"]) for e in _x(events, *API)
             if "size" in e["args"]}
    want = Counter()
    for e in copies:
        direction, kinds = e["name"].split(" ", 2)[1:]
        src, dst = kinds.strip("()").split(" -> ")
        size = e["args"].get("bytes", sizes.get(e["args"]["correlation"]))
        want[(tr.copy_track(e["args"]["device"]), DIRECTIONS[direction], size, src.lower(), dst.lower())] += 1
    assert all(key[2] is not None for key in want)
    assert got == want
    assert Counter(s.track for s in _spans_on(trace, tr.MEMSETS)) == Counter(
        tr.memset_track(e["args"]["device"]) for e in _x(events, "gpu_memset"))
    # Runtime calls on the calling thread's cuda/ track (each tid here is one process's).
    callers = _x(events, *API) + [call for _, call in _syncs(events) if call is not None]
    assert Counter(s.track for s in _spans_on(trace, tr.CUDA_API)) == Counter(
        tr.cuda_track(tr.thread_track(e["tid"])) for e in callers)
    names = {"Stream Sync": "stream_synchronize", "Event Sync": "event_synchronize",
             "Context Sync": "context_synchronize", "Stream Wait Event": "stream_wait_event"}
    assert Counter(s.name for s in _spans_on(trace, tr.CUDA_API) if "cuda_sync_kind" in s.attrs) == Counter(
        names[e["name"]] for e, call in _syncs(events) if call is not None)
    mirrored = {e["name"] for e in _x(events, "gpu_user_annotation")}
    assert not mirrored & {s.name for s in _spans_on(trace, tr.KERNELS)} - {e["name"] for e in kernels}
    threads = {tr.thread_track(e["tid"]): e["args"]["name"].strip() for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name" and isinstance(e["pid"], int)
               and e["pid"] > 100}
    for track, name in trace.thread_names.items():
        if track in threads:  # "thread 924719 (python3.8)" is named python3.8 beside its id
            assert threads[track] in (name, f"thread {tr.parse(track).name} ({name})")
    assert set(trace.thread_names) & set(trace.tracks())


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name.split("_")[0])
def test_correlation_links_kept(path):
    events, trace = _both(path)
    linked = _x(events, "kernel", "gpu_memcpy", "gpu_memset", *API) + [
        e for e, call in _syncs(events) if call is not None]
    want = Counter((e["args"].get("correlation"), e["args"].get("External id")) for e in linked)
    kinds = (tr.KERNELS, tr.COPIES, tr.MEMSETS, tr.CUDA_API)
    got = Counter((s.attrs.get("correlation"), s.attrs.get("External id")) for s in trace.iter_spans()
                  if tr.parse(s.track).kind in kinds)
    assert got == want
    flows = [e for e in events if e.get("ph") in ("s", "t", "f")]
    kept = [i for i in trace.iter_instants() if "flow" in i.attrs]
    assert Counter((i.attrs["flow"], i.attrs["flow_id"], i.attrs["cat"]) for i in kept) == Counter(
        (e["ph"], e["id"], e["cat"]) for e in flows)
    # A flow from a launch ends on the track of the GPU work with the same correlation.
    gpu_track = {s.attrs["correlation"]: s.track for s in trace.iter_spans()
                 if tr.parse(s.track).on_device and "correlation" in s.attrs}
    ends = [i for i in kept if i.attrs["cat"] == "ac2g" and i.attrs["flow"] == "f" and i.attrs["flow_id"]
            in gpu_track]
    assert all(i.track == gpu_track[i.attrs["flow_id"]] for i in ends)
    on_gpu = {e["args"]["correlation"] for e in _x(events, "kernel", "gpu_memcpy", "gpu_memset")}
    assert len(ends) == len(on_gpu & {e["id"] for e in flows if e["ph"] == "f" and e["cat"] == "ac2g"})


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name.split("_")[0])
def test_times_relative_to_the_first_event(path):
    events, trace = _both(path)
    timed = [e for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), int | float)]
    first = min(e["ts"] for e in timed)
    spans = [e for e in timed if e["ph"] == "X" and e.get("cat") != "Trace"]  # a window is an instant
    starts = np.sort([e["ts"] - first for e in spans])
    ends = np.sort([e["ts"] + e.get("dur", 0) - first for e in spans])
    assert np.abs(np.sort(trace.spans.start_ns) / 1e3 - starts).max() <= 1
    assert np.abs(np.sort(trace.spans.end_ns) / 1e3 - ends).max() <= 1
    assert trace.time_range()[0] == 0
    base = json.loads(gzip.decompress(path.read_bytes())).get("baseTimeNanoseconds", 0)
    assert abs(trace.meta["origin_unix_ns"] - (base + first * 1000)) < 1000
    assert trace.meta["origin_file_ns"] == pytest.approx(first * 1000, abs=1000)


def test_epoch_microseconds_keep_every_nanosecond():
    text = json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1,
         "args": {"device": 0, "stream": 7, "correlation": 3}},
    ]})
    # Written by hand: json.dumps would round these through a float64.
    text = text.replace('"ts": 1,', '"ts": 1700000000123456.789,').replace('"dur": 1,', '"dur": 0.001,')
    text = text.replace("]}", ', {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 5, "tid": 5, '
                        '"ts": 1700000000123457.001, "dur": 2.5}]}')
    trace = parse_chrome(text, "epoch.json")
    spans = {s.name: s for s in trace.iter_spans()}
    assert (spans["k"].start_ns, spans["k"].end_ns) == (0, 1)
    assert (spans["op"].start_ns, spans["op"].end_ns) == (212, 2712)
    assert spans["k"].track == "gpu0/stream/7" and spans["op"].track == "thread/5"
    assert trace.meta["origin_unix_ns"] == 1700000000123456789


@pytest.mark.parametrize("ts", ["1e300", "-1e18", "1.7e18"])
def test_garbage_timestamps_are_skipped_and_counted(ts):
    text = ('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": 1}, '
            f'{{"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": {ts}, "dur": 1}}]}}')
    trace = parse_chrome(text, "garbage.json")
    assert [s.name for s in trace.iter_spans()] == ["a"]
    assert trace.meta["import"]["skipped"] == {"timestamp out of range": 1}
    assert trace.meta["import"]["first_at"]["timestamp out of range"] == "event 1"


def test_a_truncated_gzip_is_refused_with_the_event(tmp_path):
    raw = (DATA / "trace_filter_sampled_rank-1.json.gz").read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ImportFailed, match=r"cut\.json\.gz: .*cut off.*line \d+.*event \d+"):
        load_any(cut)



def test_our_export_of_a_kineto_trace_loads_back_the_same():
    from workbench.export.chrome import to_chrome_json

    _, trace = _both(DATA / "critical_path_cuda_event_sync_event_sync_trace.json.gz")
    again = parse_chrome(to_chrome_json(trace), "export.json")
    assert list(again.iter_spans()) == list(trace.iter_spans())
    assert list(again.iter_instants()) == list(trace.iter_instants())
    assert (again.meta, again.thread_names) == (trace.meta, trace.thread_names)
