"""Recording: the recorder, the instrumented mutex and barrier, the trace and its file, the
scope a phase records into (`scope.py`) and the interface of collectors that record beside
the pipeline (`collector.py`)."""

from workbench.trace.barrier import BarrierBroken, BarrierStatistics, InstrumentedBarrier
from workbench.trace.container import Trace
from workbench.trace.mutex import InstrumentedMutex, MutexAborted, MutexStatistics
from workbench.trace.recorder import Recorder
from workbench.trace.store import TraceFormatError, load, save

__all__ = [
    "BarrierBroken",
    "BarrierStatistics",
    "InstrumentedBarrier",
    "InstrumentedMutex",
    "MutexAborted",
    "MutexStatistics",
    "Recorder",
    "Trace",
    "TraceFormatError",
    "load",
    "save",
]
