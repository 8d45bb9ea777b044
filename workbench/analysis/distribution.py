"""A distribution of durations in milliseconds: the numbers every table and finding quotes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Distribution:
    count: int
    total_ms: float
    min_ms: float
    median_ms: float
    p90_ms: float
    max_ms: float
    mean_ms: float
    cv: float  # standard deviation over mean: 0 for a constant cost

    @classmethod
    def of(cls, values_ms: np.ndarray | list[float]) -> Distribution:
        values = np.asarray(values_ms, dtype=np.float64)
        if not len(values):
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        mean = float(values.mean())
        return cls(
            count=len(values), total_ms=float(values.sum()), min_ms=float(values.min()),
            median_ms=float(np.median(values)), p90_ms=float(np.percentile(values, 90)),
            max_ms=float(values.max()), mean_ms=mean,
            cv=float(values.std() / mean) if mean > 0 else 0.0,
        )

    @classmethod
    def of_ns(cls, values_ns: np.ndarray | list[int]) -> Distribution:
        return cls.of(np.asarray(values_ns, dtype=np.float64) / 1e6)

    @property
    def swing(self) -> float:
        """max / min: how far the slowest instance is from the fastest (1.0 for constant)."""
        return self.max_ms / self.min_ms if self.min_ms > 0 else float("inf") if self.max_ms else 1.0


def correlation(x: np.ndarray, y: np.ndarray) -> float | None:
    """Pearson's r, or None where it means nothing (fewer than 3 points, a constant side)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(x) < 3 or x.std() == 0 or y.std() == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])
