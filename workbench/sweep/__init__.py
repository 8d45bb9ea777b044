"""Sweeps: a grid of run configurations (grid.py), each run in this process or on a Ray
cluster's long-lived runners (local.py; ray_executor.py with ray_pool.py, ray_runner.py and,
for a cluster started here, workbench/ray_cluster.py), its trace kept in one folder with an index
(index.py, run.py), and the folder read back as one table with spreads across repeats and the
grid's what-if checks (study.py, text.py). Ray is optional and imported only where used."""

from workbench.sweep.grid import Cell, CellSpec, Grid, GridError, load_grid, parse_grid
from workbench.sweep.index import Entry, SweepIndex, read_index
from workbench.sweep.run import Driver, Executor, Listener, prepare_folder
from workbench.sweep.study import Study, read_study, summary_of

__all__ = [
    "Cell", "CellSpec", "Driver", "Entry", "Executor", "Grid", "GridError", "Listener", "Study", "SweepIndex",
    "load_grid", "make_executor", "parse_grid", "prepare_folder", "read_index", "read_study", "summary_of",
]


def make_executor(local: bool = False, address: str | None = None, exclusive_host: bool = False) -> Executor:
    """Ray's executor when Ray is installed (and not `local`), else the local one saying why."""
    from workbench.sweep.local import LocalExecutor
    from workbench.sweep.ray_executor import RayExecutor, ray_unavailable_reason

    if local:
        return LocalExecutor()
    reason = ray_unavailable_reason()
    if reason is not None:
        if address is not None or exclusive_host:
            raise ValueError(f"--address and --exclusive-host need Ray: {reason}")
        return LocalExecutor(f"running the cells one after another in this process: {reason}")
    return RayExecutor(address, exclusive_host)
