"""Where a piece of work runs: the recorder, its track, and the partition and worker it serves.

Phases and memory modes take a scope so they can record their own sub-spans (a copy inside
ntt_msm_h, say) without knowing which thread or pipeline they run in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.events import NO_ID
from workbench.trace.recorder import NullScope, Recorder, SpanScope


@dataclass(frozen=True, slots=True)
class Scope:
    recorder: Recorder
    track: str
    partition: int = NO_ID
    worker: int = NO_ID

    def span(self, name: str, **attrs: Any) -> SpanScope | NullScope:
        return self.recorder.span(self.track, name, self.partition, self.worker, attrs or None)

    def instant(self, name: str, **attrs: Any) -> None:
        self.recorder.instant(self.track, name, self.partition, self.worker, attrs or None)

    def on(self, track: str) -> Scope:
        return Scope(self.recorder, track, self.partition, self.worker)
