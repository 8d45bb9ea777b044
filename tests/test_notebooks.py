"""Every notebook runs top to bottom in a headless kernel, on this machine's backend (CPU in CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook extra is not installed")
nbclient = pytest.importorskip("nbclient", reason="the notebook extra is not installed")
pytest.importorskip("ipykernel", reason="the notebook extra is not installed")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CELL_TIMEOUT_S = 180

pytestmark = pytest.mark.slow


def test_there_are_notebooks():
    assert {p.name for p in NOTEBOOKS.glob("*.ipynb")} >= {"01_quickstart.ipynb", "02_memory_modes.ipynb",
                                                         "03_case_study.ipynb"}


def test_notebooks_are_stored_without_outputs():
    for path in NOTEBOOKS.glob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name} has outputs"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, tmp_path):
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    # The kernel runs in tmp_path: point it at this checkout, not whichever copy is installed.
    here = os.pathsep.join(p for p in (str(NOTEBOOKS.parent), os.environ.get("PYTHONPATH", "")) if p)
    client.execute(env={**os.environ, "PYTHONPATH": here})
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    for cell in notebook.cells:  # a cell ending in a helper shows its output once, not again as Out[]
        last = cell.source.strip().splitlines()[-1] if cell.source.strip() else ""
        if cell.cell_type == "code" and last.startswith("wb."):
            assert "execute_result" not in [o.output_type for o in cell.outputs], cell.source
    widgets = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widgets, "the notebook shows its figures and panel as widgets"
    if path.stem == "01_quickstart":
        assert (tmp_path / "reports" / "quickstart.html").exists()
    if path.stem == "03_case_study":
        assert (tmp_path / "reports" / "case_study_pageable_loaded.html").exists()
        html = "".join(o.get("data", {}).get("text/html", "") for o in outputs if "data" in o)
        assert "Slow host-to-device copies hold the GPU mutex" in html
        assert "zerocopy_t14_w2_load14 (earlier kernels)" in html  # the what-if table reached its last rows
        assert "of the time it is held is not GPU compute" in html  # the quiet zerocopy run's verdict
        assert "A: pageable_t14_w2_load14.wbtrace" in html and "run A" not in html  # compare's names
    if path.stem == "02_memory_modes":
        text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
        assert "pageable:" in text and "zerocopy:" in text
