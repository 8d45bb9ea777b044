"""The progress bar of a run: partitions done of all, the rate and the time left.

While the run goes on the rate is the pipeline's own count over the time since its setup
ended; once it has ended the bar shows the figures the summary prints (partitions done and
the run's wall time from its trace, `final`), so the two never disagree. `wb.run` shows the bar
while its cell runs and then leaves a static copy of the last state in the output, which a
reopened notebook shows as it was (a widget's model dies with its kernel).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from workbench.viz.deps import require

STYLES = {"completed": "success", "stopped": "warning", "failed": "danger"}
COLOURS = {"completed": "#009E73", "stopped": "#E69F00", "failed": "#D55E00"}  # the palette's


@dataclass(frozen=True)
class Figures:
    done: int
    total: int
    elapsed_s: float
    setting_up: bool = False
    outcome: str | None = None  # once the run has ended

    @property
    def rate_per_min(self) -> float:
        return self.done / self.elapsed_s * 60 if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far (None before the first partition is done)."""
        if self.outcome is not None:
            return 0.0
        rate = self.rate_per_min / 60
        return (self.total - self.done) / rate if rate > 0 else None

    def text(self) -> str:
        if self.setting_up:
            return f"setting up (proving key, twiddles) · {self.elapsed_s:.1f} s"
        parts = [f"{self.done}/{self.total} partitions", f"{self.elapsed_s:.1f} s",
                 f"{self.rate_per_min:.1f} partitions/min"]
        if self.outcome is not None:
            parts.insert(0, self.outcome)
        else:
            eta = self.eta_s
            parts.append("ETA —" if eta is None else f"ETA {format_seconds(eta)}")
        return " · ".join(parts)


def format_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def live_figures(run: Any) -> Figures:
    """A running BackgroundRun's figures, from the pipeline's count and the recorder's clock."""
    progress = run.pipeline.progress
    if not progress.started_ns:
        return Figures(0, progress.total, run.elapsed_s(), setting_up=True)
    elapsed = (run.recorder.now_ns() - progress.started_ns) / 1e9
    return Figures(progress.done, progress.total, elapsed)


def final_figures(record: Any, run: Any = None) -> Figures:
    """A finished run's figures: its summary's (traced), else the pipeline's own count and clock
    from the end of setup, as `workbench run --no-trace` reports them."""
    config = record.config
    if config.trace or run is None:
        s = record.summary
        return Figures(s.partitions_done, config.partitions, s.wall_s, outcome=record.outcome)
    progress = run.pipeline.progress
    wall_ns = run.recorder.now_ns() - progress.started_ns if progress.started_ns else 0
    return Figures(progress.done, config.partitions, wall_ns / 1e9, outcome=record.outcome)


def static_html(figures: Figures, label: str = "") -> str:
    """The bar as plain HTML (what stays in a saved notebook)."""
    colour = COLOURS.get(figures.outcome or "", "#0072B2")
    share = figures.done / max(figures.total, 1)
    head = f"<b>{escape(label)}</b> " if label else ""
    return (f"<div class='wb-progress' style='font-family: sans-serif; font-size: 13px'>{head}"
            f"<span style='display:inline-block; width:240px; height:12px; background:#E8E8E8; "
            f"vertical-align:middle; margin-right:8px'><span style='display:block; height:100%; "
            f"width:{share:.1%}; background:{colour}'></span></span>{escape(figures.text())}</div>")


class ProgressBar:
    """An ipywidgets bar and its line of figures, in `widget`."""

    def __init__(self, label: str = "") -> None:
        widgets = require("ipywidgets")
        self.label = label
        self.bar = widgets.IntProgress(value=0, min=0, max=1, description=label,
                                       style={"description_width": "initial"}, bar_style="info")
        self.line = widgets.HTML(value="")
        self.widget = widgets.HBox([self.bar, self.line])
        self.figures: Figures | None = None

    def show(self, figures: Figures) -> None:
        self.figures = figures
        self.bar.max = max(figures.total, 1)
        self.bar.value = min(figures.done, self.bar.max)
        if figures.outcome is not None:
            self.bar.bar_style = STYLES.get(figures.outcome, "")
        self.line.value = escape(figures.text())

    def reset(self, label: str = "") -> None:
        self.label = self.bar.description = label
        self.bar.value, self.bar.bar_style, self.line.value = 0, "info", ""
        self.figures = None
