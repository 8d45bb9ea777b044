"""Flow arrows on the Gantt: hand-offs of our own runs and flows recorded in foreign traces,
counted independently of the code that draws them."""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path

from workbench.config import RunConfig
from workbench.importers import load_any
from workbench.pipeline.run import Pipeline
from workbench.prover.cpu_backend import CpuBackend
from workbench.viz.bars import origin_of, trace_bars
from workbench.viz.gantt import GanttView
from workbench.viz.lanes import lane_sort_key

DATA = Path(__file__).parent / "data" / "chrome"


def _arrows(trace):
    origin = origin_of(trace)
    bars = trace_bars(trace, origin)
    view = GanttView(sorted(set(bars.lane.tolist()), key=lane_sort_key))
    view.set(bars)
    view.set_flows(trace, bars, origin)
    return view.flow_source.data


def test_a_run_draws_each_lock_and_partition_hand_off():
    config = RunConfig(backend="cpu", log2_constraints=5, partitions=6, synth_terms=3, gpu_workers=2)
    trace = Pipeline(config, CpuBackend()).run().trace
    holds = sorted((s.start_ns, s.worker) for s in trace.select(track="mutex/gpu0", name="hold"))
    data = _arrows(trace)
    kinds = Counter(data["kind"])
    # One mutex: a hold taken by another worker than the one before it is a hand-off.
    handed = sum(1 for (_, a), (_, b) in pairwise(holds) if a != b)
    assert handed > 0 and kinds["lock_handoff"] == handed
    assert kinds["partition_handoff"] == config.partitions
    # An arrow never runs backwards in time: a hand-off follows the release it answers.
    assert all(x1 >= x0 for x0, x1 in zip(data["x0"], data["x1"], strict=True))


def test_a_foreign_traces_own_flows_join_their_steps():
    path = DATA / "flow_simple.json"
    events = json.loads(path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    steps = Counter((e.get("cat", ""), str(e["id"])) for e in events if e.get("ph") in ("s", "t", "f"))
    data = _arrows(load_any(path))
    assert len(data["x0"]) == sum(n - 1 for n in steps.values())
