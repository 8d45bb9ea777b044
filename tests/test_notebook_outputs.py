"""Each `wb.*` helper's output appears once in an executed cell, and compare names its runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook extra is not installed")
nbclient = pytest.importorskip("nbclient", reason="the notebook extra is not installed")
pytest.importorskip("ipykernel", reason="the notebook extra is not installed")
pytest.importorskip("jupyter_bokeh", reason="the notebook extra is not installed")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "notebooks" / "data" / "h200_2e22"  # real H200 runs (notebooks/data README)
A, B = DATA / "pageable_t14_w2.wbtrace", DATA / "zerocopy_t14_w2.wbtrace"
WIDGET = "application/vnd.jupyter.widget-view+json"

# helper call -> the display outputs it makes (compare: its summaries, then its figure); a
# figure's widget is followed by its hidden static copy (for a notebook reopened without kernel)
CALLS = {
    "wb.summary(a)": 1, "wb.verdict(a)": 1, "wb.gantt(a)": 2, "wb.distributions(a)": 2,
    "wb.compare(a, b)": 3, "wb.grid({'a': a, 'b': b})": 1, "wb.utilisations({'a': a})": 1,
    "wb.check_predictions([(a, Change(copies_at_link=True), b)], [('a', 'b')], link_gbps=50.0)": 1,
}


RUN_CELL = ("r = wb.run(backend='cpu', partitions=3, log2_constraints=6)\n"
            "print(f'rate {r.summary.throughput_per_min:.1f}', r.summary.partitions_done)")


@pytest.fixture(scope="module")
def executed() -> Any:
    """One kernel for every cell below: each helper's call, then a run from a cell."""
    setup = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"  # this checkout, not an installed copy
             "import workbench.notebook as wb\nfrom workbench.analysis import Change\n"
             f"a, b = wb.load({str(A)!r}), wb.load({str(B)!r})\nwb.setup()\nprint(wb.__file__)")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(setup)]
                                        + [nbformat.v4.new_code_cell(call) for call in CALLS]
                                        + [nbformat.v4.new_code_cell(RUN_CELL)])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    return notebook


def test_each_helper_shows_its_output_once_in_an_executed_cell(executed):
    notebook = executed
    printed = "".join(o.get("text", "") for o in notebook.cells[0].outputs if o.output_type == "stream")
    assert printed.startswith(str(ROOT / "workbench")), printed
    for cell, wanted in zip(notebook.cells[1:-1], CALLS.values(), strict=True):
        kinds = [o.output_type for o in cell.outputs]
        assert "error" not in kinds, (cell.source, cell.outputs)
        assert kinds == ["display_data"] * wanted, (cell.source, kinds)  # no execute_result again
    gantt, copy = notebook.cells[1 + list(CALLS).index("wb.gantt(a)")].outputs
    assert WIDGET in gantt["data"]
    assert WIDGET not in copy["data"] and "class='wb-fallback' hidden" in copy["data"]["text/html"]


def test_compare_names_the_runs_by_their_files_or_the_labels_given(monkeypatch):
    import workbench.notebook as wb

    shown: list = []
    figure_labels: list = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    # The figure itself, not its widget: a widget starts an IPython shell and its threads here.
    monkeypatch.setattr(wb, "show", lambda layout: wb._display(layout))
    real_figure = wb.compare_figure
    monkeypatch.setattr(wb, "compare_figure", lambda a, b, labels, **kw: (
        figure_labels.append(labels), real_figure(a, b, labels, **kw))[1])

    a, b = wb.load(A), wb.load(B)
    handle = wb.compare(a, b)
    html = shown[0].data
    assert f"A: {A.name}" in html and f"B: {B.name}" in html and "run A" not in html
    assert figure_labels == [(A.name, B.name)]
    assert handle.value is shown[-1] and handle.children == shown[-1].children  # through the handle

    wb.compare(str(A), b, labels=("before", "after"))
    assert "A: before" in shown[2].data and "B: after" in shown[2].data
    assert figure_labels[-1] == ("before", "after")


def test_wb_run_shows_a_progress_bar_that_stays_as_a_static_line_with_the_summarys_rate(executed):
    outputs = executed.cells[-1].outputs
    shown = [o for o in outputs if o.output_type == "display_data"]
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    rate, done = printed.split()[1:3]
    assert done == "3"
    assert len(shown) == 1 and WIDGET not in shown[0]["data"]  # the widget gave way to plain HTML
    html = shown[0]["data"]["text/html"]
    assert "completed · 3/3 partitions" in html and f"{rate} partitions/min" in html and "run 1" in html
