"""The Chrome export follows the trace-event rules, draws hand-offs, and other tools read it."""

import importlib.util
import json
import sqlite3
import subprocess
import sys
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import pytest
from golden import case

from workbench.export.chrome import to_chrome, to_chrome_json
from workbench.importers import load_any, parse_chrome
from workbench.trace import load
from workbench.trace.container import Trace

DATA = Path(__file__).parent / "data"
NSYS = DATA / "nsys" / "pipit_perlmutter-cloverleaf-cuda.sqlite"
KINETO = DATA / "kineto" / "critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"
RUN = DATA / "whatif" / "g2w2.wbtrace"  # a recorded run: two GPUs, two workers each


def _traces():
    return {"nsys": load_any(NSYS), "run": load(RUN), "copy_bound": case("copy_bound"),
            "kineto": load_any(KINETO)}


def _check_rules(data: dict) -> None:
    events = data["traceEvents"]
    assert all("cat" in e and "pid" in e and "ph" in e for e in events)
    named_pids = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    named_threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            assert e["dur"] >= 0
            start = round(e["ts"] * 1e3)  # in nanoseconds, as readers take it: floats would add noise
            slices[(e["pid"], e["tid"])].append((start, start + round(e["dur"] * 1e3)))
        if e["ph"] != "M":
            assert e["pid"] in named_pids
        if e["ph"] in "Xbeisf":
            assert (e["pid"], e["tid"]) in named_threads
    for thread in slices.values():  # duration events on one thread nest
        stack: list[int] = []
        for start, end in sorted(thread, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1]
            stack.append(end)
    device = [e for e in events if e["ph"] in "Xb" and e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert all(e["pid"] == e["args"]["device"] and e["args"]["stream"] >= 0 for e in device)
    correlations = [e["args"]["correlation"] for e in device]  # added ones never clash with recorded ones
    assert len(set(correlations)) == len(correlations)
    begins = [(e["cat"], e["id"]) for e in events if e["ph"] == "b"]
    assert len(set(begins)) == len(begins)
    assert set(begins) == {(e["cat"], e["id"]) for e in events if e["ph"] == "e"}
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == sum(e["ph"] == "s" for e in events) and starts.keys() == ends.keys()
    for flow in (*starts.values(), *ends.values()):  # each binds to the slice enclosing it
        assert flow.get("bp", "e") == "e"
        at = round(flow["ts"] * 1e3)
        assert any(a <= at <= b for a, b in slices[(flow["pid"], flow["tid"])]), flow


def test_every_export_keeps_the_trace_event_rules_and_round_trips():
    for name, trace in _traces().items():
        data = to_chrome(trace)
        _check_rules(data)
        again = parse_chrome(json.dumps(data), name)
        assert list(again.iter_spans()) == list(trace.iter_spans()), name
        assert list(again.iter_instants()) == list(trace.iter_instants()), name
        assert list(again.iter_counters()) == list(trace.iter_counters()), name
        assert (again.config, again.meta) == (trace.config, trace.meta)
        assert again.thread_names == trace.thread_names, name


def test_overlapping_spans_get_threads_of_their_own_lanes_or_async_ids():
    trace = Trace.from_rows([
        ("gpu0/copy", "h2d", 0, 10, 0, 0, {"bytes": 8}), ("gpu0/copy", "h2d", 5, 15, 1, 1, {"bytes": 8}),
        ("mutex/gpu0", "hold", 0, 10, 0, 0, None), ("mutex/gpu0", "wait", 2, 10, 1, 1, None),
        ("mutex/gpu0", "wait", 3, 20, 2, 2, None), ("mutex/gpu0", "hold", 10, 20, 1, 1, None),
    ])
    events = to_chrome(trace)["traceEvents"]
    copies = [e for e in events if e["cat"] == "gpu_memcpy"]
    assert [e["ph"] for e in copies] == ["X", "X"] and copies[0]["tid"] != copies[1]["tid"]
    assert {e["args"]["stream"] for e in copies} == {copies[0]["tid"], copies[1]["tid"]}
    assert [e["name"] for e in copies] == ["Memcpy HtoD (Unknown -> Unknown)"] * 2
    holds = [e for e in events if e["name"] == "hold"]
    assert [e["ph"] for e in holds] == ["X", "X"] and holds[0]["tid"] == holds[1]["tid"]
    assert sorted(e["ph"] for e in events if e["name"] == "wait") == ["b", "b", "e", "e"]
    flows = [e for e in events if e["cat"] == "lock_handoff"]
    assert [(e["ph"], e["tid"]) for e in flows] == [("s", holds[0]["tid"]), ("f", holds[0]["tid"])]
    assert flows[1]["ts"] == holds[1]["ts"] and holds[0]["ts"] <= flows[0]["ts"] <= 10e-3
    _check_rules(to_chrome(trace))
    assert list(parse_chrome(to_chrome_json(trace)).iter_spans()) == list(trace.iter_spans())


def test_hand_offs_join_each_release_to_the_next_acquire_and_synthesis_to_pickup():
    trace = load(RUN)
    events = to_chrome(trace)["traceEvents"]
    expected_locks = 0
    for track in ("mutex/gpu0", "mutex/gpu1"):
        holds = sorted(trace.select(track=track, name="hold"), key=lambda s: s.start_ns)
        expected_locks += sum(a.worker != b.worker for a, b in pairwise(holds))
    synthesised = {s.partition for s in trace.select(name="synthesis")}
    picked = {s.partition for s in trace.iter_spans() if s.track.startswith("worker/") and s.partition >= 0}
    kinds = defaultdict(int)
    for e in events:
        if e["ph"] == "s":
            kinds[e["cat"]] += 1
    assert dict(kinds) == {"lock_handoff": expected_locks, "partition_handoff": len(synthesised & picked)}
    assert expected_locks > 0 and synthesised & picked
    cats = {(e["name"], e["cat"]) for e in events if e["ph"] == "X"}
    assert {("hold", "lock"), ("wait", "lock"), ("synthesis", "cpu_op"), ("ntt_msm_h", "cpu_op")} <= cats
    assert ("wait", "barrier") in cats


def test_each_launch_flows_to_the_gpu_work_it_issued_as_the_sql_says():
    events = to_chrome(load_any(NSYS))["traceEvents"]
    with sqlite3.connect(NSYS) as db:
        launched = sum(db.execute(f"SELECT COUNT(*) FROM {table} WHERE correlationId IN "
                                  "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME)").fetchone()[0]
                       for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"))
    by_start = {(e["pid"], e["tid"], round(e["ts"] * 1e3)): e for e in events if e["ph"] == "X"}
    by_end = {(e["pid"], e["tid"], round(e["ts"] * 1e3) + round(e["dur"] * 1e3)): e
              for e in events if e["ph"] == "X"}
    starts = {e["id"]: e for e in events if e["ph"] == "s" and e["cat"] == "ac2g"}
    ends = [e for e in events if e["ph"] == "f" and e["cat"] == "ac2g"]
    assert len(starts) == len(ends) == launched > 0
    for end in ends:  # the flow ends where its GPU work starts and starts 1 ns before its call ends
        work = by_start[(end["pid"], end["tid"], round(end["ts"] * 1e3))]
        start = starts[end["id"]]
        call = by_end[(start["pid"], start["tid"], round(start["ts"] * 1e3) + 1)]
        assert work["cat"] in ("kernel", "gpu_memcpy") and call["cat"] == "cuda_runtime"
        assert call["args"]["correlation"] == work["args"]["correlation"]


HTA_SCRIPT = """
import json, sys
from hta.trace_analysis import TraceAnalysis
results = {}
for folder in sys.argv[1:]:
    analysis = TraceAnalysis(trace_dir=folder)
    temporal = analysis.get_temporal_breakdown(visualize=False)
    kinds, kernels = analysis.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
    results[folder] = {"kinds": dict(zip(kinds["kernel_type"], kinds["sum"].astype(float))),
                       "temporal": temporal.iloc[0].astype(float).to_dict(),
                       "ranks": sorted(analysis.t.get_ranks())}
print(json.dumps(results))
"""


@pytest.mark.skipif(importlib.util.find_spec("hta") is None,
                    reason="Holistic Trace Analysis is not installed (pip install holistictraceanalysis)")
def test_holistic_trace_analysis_reads_the_export_and_breaks_down_its_kernels(tmp_path):
    folders = {name: tmp_path / name for name in ("nsys", "kineto", "kineto_ours")}
    for folder in folders.values():
        folder.mkdir()
    (folders["nsys"] / "rank-0.pt.trace.json").write_text(to_chrome_json(load_any(NSYS)))
    (folders["kineto"] / KINETO.name).write_bytes(KINETO.read_bytes())
    (folders["kineto_ours"] / "rank-0.pt.trace.json").write_text(to_chrome_json(load_any(KINETO)))
    done = subprocess.run([sys.executable, "-c", HTA_SCRIPT, *map(str, folders.values())],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    result = results[str(folders["nsys"])]
    with sqlite3.connect(NSYS) as db:
        def totals(table: str) -> tuple[int, float]:
            n, ns = db.execute(f"SELECT COUNT(*), SUM(end - start) FROM {table}").fetchone()
            return n, ns / 1e3

        kernels, kernel_us = totals("CUPTI_ACTIVITY_KIND_KERNEL")
        copies, copy_us = totals("CUPTI_ACTIVITY_KIND_MEMCPY")
        first, last = db.execute("SELECT MIN(start), MAX(end) FROM (SELECT start, end FROM "
                                 "CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT start, end FROM "
                                 "CUPTI_ACTIVITY_KIND_MEMCPY)").fetchone()
    assert result["ranks"] == [0]
    # The tool rounds each event to whole microseconds inwards (start up, end down): up to 2 us each.
    assert kernel_us - 2 * kernels <= result["kinds"]["COMPUTATION"] <= kernel_us
    assert copy_us - 2 * copies <= result["kinds"]["MEMORY"] <= copy_us
    assert (last - first) / 1e3 - 2 <= result["temporal"]["kernel_time(us)"] <= (last - first) / 1e3
    assert kernel_us - 2 * kernels <= result["temporal"]["compute_time(us)"] <= kernel_us
    # A PyTorch profiler trace, imported and exported again, breaks down as the original does.
    original, ours = results[str(folders["kineto"])], results[str(folders["kineto_ours"])]
    assert original["kinds"] and ours == original


def test_the_export_command_writes_gzip_that_reads_back_to_the_same_spans(tmp_path, capsys):
    from workbench.cli import main

    written = tmp_path / "cloverleaf.json.gz"
    assert main(["export", "chrome", str(NSYS), "-o", str(written)]) == 0
    assert written.read_bytes()[:2] == b"\x1f\x8b"
    assert list(load_any(written).iter_spans()) == list(load_any(NSYS).iter_spans())
    assert main(["export", "cuzk", str(NSYS)]) == 2  # a CUDA program without a proving pipeline
    assert capsys.readouterr().err.endswith("nothing to write as cuzk lines (no GPU worker phases of a "
                                            "proving pipeline in it)\n")
