"""A fleet of hosts read at once (layer 2, above the importers and the analysis it drives).

`read_fleet(expand(paths))` reads every host's log, export or trace in parallel (a process
pool, or Ray when asked) and returns a small record per host; `analysis.fleet.rank` orders
them by what bounds each.
"""

from workbench.fleet.pool import PARALLEL, FleetError, FleetRead, read_fleet
from workbench.fleet.read import expand, read_host

__all__ = ["PARALLEL", "FleetError", "FleetRead", "expand", "read_fleet", "read_host"]
