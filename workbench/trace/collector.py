"""Collectors: things that record into the trace beside the pipeline's own spans (device
activity, counter samplers). They start before the first partition and stop after the last,
on every way a run ends; one that cannot start says why and the run goes on without it."""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType
from typing import Protocol

from workbench.trace.recorder import Recorder


class Collector(Protocol):
    name: str

    def start(self, recorder: Recorder) -> None:
        """Begin recording; raise CollectorUnavailable when it cannot run here."""

    def stop(self) -> None:
        """Flush what is buffered into the recorder and release everything; idempotent."""


class CollectorUnavailable(RuntimeError):
    """A collector that cannot run here (library missing, no device, another profiler)."""


def import_for_collector(module: str, distribution: str) -> ModuleType:
    """A collector's optional library, or CollectorUnavailable naming the package to install."""
    try:
        # The libraries' own import-time deprecation notices are not ours to act on.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return importlib.import_module(module)
    except ImportError as err:
        raise CollectorUnavailable(
            f"{distribution} is not installed ({err}); install the gpu extra: pip install 'workbench[gpu]'"
        ) from None
