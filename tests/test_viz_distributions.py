"""The distributions list every kernel and phase, in an order that says which took longest,
on an axis whose range the view sets itself (an empty log axis makes the browser warn)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("bokeh", reason="the notebook extra is not installed")

from workbench.importers import load_any
from workbench.viz.bars import trace_bars
from workbench.viz.distributions import FLOOR_MS, DistributionView
from workbench.viz.lanes import readable
from workbench.viz.palette import PHASE_COLORS

# A real H200 run of the pipeline with its device activity (notebooks/data README).
CASE = Path(__file__).resolve().parents[1] / "notebooks" / "data" / "h200_2e22" / "pageable_t14_w2.wbtrace"


def test_every_kernel_has_a_row_and_the_rest_go_longest_first():
    trace = load_any(CASE)
    kernel_ns: dict[str, int] = {}
    durations_ms: list[float] = []
    for span in trace.iter_spans():
        durations_ms.append((span.end_ns - span.start_ns) / 1e6)
        if re.fullmatch(r"gpu\d+/stream/\d+", span.track):
            name = readable(span.name)  # the row's name: a mangled C++ name shortened
            kernel_ns[name] = kernel_ns.get(name, 0) + span.end_ns - span.start_ns
    view = DistributionView()
    view.set(trace_bars(trace))
    rows = list(view.y_range.factors)[::-1]  # top to bottom
    assert set(kernel_ns) <= set(rows) and len(kernel_ns) > 20
    kernels_in_rows = [r for r in rows if r in kernel_ns and r not in PHASE_COLORS]
    by_time = sorted(kernels_in_rows, key=lambda k: (-kernel_ns[k], k))
    assert kernels_in_rows == by_time
    pipeline_rows = [r for r in rows if r in PHASE_COLORS]
    assert pipeline_rows == [p for p in PHASE_COLORS if p in pipeline_rows]
    assert rows.index(pipeline_rows[-1]) < rows.index(by_time[0])  # the pipeline's phases first
    # The view's own range, spanning every duration drawn (floored at 1 µs on the log axis).
    assert type(view.x_range).__name__ == "Range1d"
    assert view.x_range.start <= max(min(durations_ms), FLOOR_MS)
    assert view.x_range.end >= max(durations_ms)


def test_an_empty_live_view_has_a_finite_log_range():
    view = DistributionView()
    assert type(view.x_range).__name__ == "Range1d" and 0 < view.x_range.start < view.x_range.end
