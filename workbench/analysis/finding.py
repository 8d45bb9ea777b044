"""A finding: one claim about a run, with its numbers, the spans that prove it, the change
it suggests and, where the replay can say, what that change is predicted to do."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from workbench.analysis.whatif import Prediction
from workbench.trace.container import Trace


@dataclass(frozen=True)
class Evidence:
    spans: tuple[int, ...]  # indices into the trace's span table
    partitions: tuple[int, ...]

    @classmethod
    def of(cls, trace: Trace, spans: Iterable[int]) -> Evidence:
        unique = tuple(dict.fromkeys(int(i) for i in spans))
        partitions = sorted({int(trace.spans.partition[i]) for i in unique} - {-1})
        return cls(unique, tuple(partitions))


@dataclass(frozen=True)
class Finding:
    id: str  # stable across runs, so a diff can say a finding appeared or went away
    title: str
    sentence: str
    cost: float  # share of the run this accounts for: the ranking key
    numbers: dict[str, float]
    evidence: Evidence
    suggestion: str
    predictions: tuple[Prediction, ...] = field(default=())

    @property
    def best_prediction(self) -> Prediction | None:
        return max(self.predictions, key=lambda p: p.gain, default=None)


def span_indices(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.flatnonzero(mask))
