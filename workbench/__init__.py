"""workbench: a profiling workbench for GPU proving pipelines.

Layers (imports point down only; tests/test_layering.py checks it):
  4  cli, commands/, notebook helpers
  3  viz/: figures, live view, panel, reports
  2  pipeline/: the run, over collectors/, export/, render/, over gpu/, analysis/, importers/
  1  model/: the pipeline as data, the track grammar, span roles; prover/; over trace/
  0  config, events, clock
"""

from workbench.config import ConfigError, RunConfig
from workbench.trace import (
    InstrumentedBarrier,
    InstrumentedMutex,
    Recorder,
    Trace,
    load,
    save,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "InstrumentedBarrier",
    "InstrumentedMutex",
    "Recorder",
    "RunConfig",
    "Trace",
    "__version__",
    "load",
    "save",
]
