"""workbench: a profiling workbench for GPU proving pipelines.

Layers (imports point down only):
  4  cli, notebook helpers
  3  render/, export/ (and the Bokeh views and GPU collectors to come)
  2  analysis/: pure functions, trace in, tables and findings out
  1  pipeline/, prover/, trace/: the run, its phases over a backend, the recording
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
