"""The panel's knobs: one widget per run setting, and the check that says whether they can run.

Every combination is checked the way a run would check it (the configuration's own
validation, the backend's availability and limits) plus an estimate of host memory, and
the reason it cannot run is returned as a sentence for the panel, never raised.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from workbench.config import BACKENDS, LOCK_SCOPES, MEMORY_MODES, SYNTHESIS_MODES, ConfigError, RunConfig
from workbench.pipeline import host_load
from workbench.pipeline.backends import BackendUnavailable, select_backend
from workbench.viz.deps import require

widgets = require("ipywidgets")

ELEMENT_BYTES = 32  # one field element
# The settings under "more settings", in order.
MORE = ("gpus", "synthesis", "synth_terms", "host_load_threads", "seed", "gpu_trace")
MEMORY_SHARE = 0.8  # leave the rest of the machine to the kernel, the browser and the OS

DESCRIPTIONS = {
    "backend": ("backend", "where the GPU phases run: auto takes the GPU when it can run here"),
    "gpus": ("GPUs", "GPUs to spread partitions over, each with its own mutex (emulated on the CPU)"),
    "gpu_workers": ("GPU workers", "workers per GPU, taking turns on that GPU's mutex"),
    "synth_threads": ("synth threads", "synthesis threads"),
    "synthesis": ("synthesis in", "threads, or a process per synthesis thread (parallel for real)"),
    "synth_lookahead": ("lookahead", "partitions that may be synthesised ahead of the GPU workers"),
    "memory_mode": ("memory mode", "where synthesis writes a, b, c and how they reach the device"),
    "lock_scope": ("lock scope", "coarse: the mutex covers copy and compute; compute: kernels only"),
    "partitions": ("partitions", "partitions to prove"),
    "log2_constraints": ("log2 size", "log2 of constraints (and NTT domain) per partition"),
    "bool_fraction": ("bool fraction", "share of witness scalars that are 0 or 1"),
    "synth_terms": ("synth cost", "witness terms combined per constraint in synthesis"),
    "seed": ("seed", "seed of the synthetic circuit and witnesses"),
    "host_load_threads": ("host load", "threads streaming through host memory beside the run"),
    "gpu_trace": ("GPU trace", "record what the GPU did (kernels, copies, counters) when it can"),
}


@dataclass(frozen=True)
class Check:
    config: RunConfig | None
    problem: str | None = None  # why it cannot run; None when it can
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.problem is None


def host_bytes_needed(config: RunConfig) -> int:
    """a, b, c and the witness for every partition in flight, plus each worker's device-side
    vectors (host memory on the CPU backend), in pinned mode its staging buffers, and the
    host load's buffers."""
    vector = config.constraints * ELEMENT_BYTES
    in_flight = config.synth_lookahead + config.workers
    per_worker = 3 * vector * (2 if config.memory_mode == "pinned" else 1)
    load = config.host_load_threads * 2 * host_load.BLOCK_BYTES
    return in_flight * 4 * vector + config.workers * per_worker + load


def host_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def check(values: dict[str, Any], memory_bytes: int | None = None) -> Check:
    try:
        config = RunConfig(**values)
    except ConfigError as err:
        return Check(None, str(err))
    try:
        backend = select_backend(config)
        backend.check(config)
    except (BackendUnavailable, ConfigError) as err:
        return Check(config, str(err))
    needed = host_bytes_needed(config)
    have = host_memory_bytes() if memory_bytes is None else memory_bytes
    if have and needed > MEMORY_SHARE * have:
        return Check(config, (
            f"needs about {needed / 2**30:.1f} GiB of host memory for the partitions in flight, "
            f"more than {MEMORY_SHARE:.0%} of this machine's {have / 2**30:.1f} GiB: lower log2 size, "
            "lookahead or GPU workers"))
    notes = []
    if backend.name == "cpu":
        notes.append("CPU backend: memory modes are emulated (copies are host memcpys, no PCIe link)")
    return Check(config, None, tuple(notes))


class Knobs:
    def __init__(self, defaults: RunConfig) -> None:
        cpus = os.cpu_count() or 2
        slider: dict[str, Any] = {"continuous_update": False, "style": {"description_width": "96px"}}
        specs: dict[str, Any] = {
            "backend": widgets.Dropdown(options=list(BACKENDS)),
            "gpu_workers": widgets.IntSlider(min=1, max=8, **slider),
            "synth_threads": widgets.IntSlider(min=1, max=max(32, cpus), **slider),
            "synth_lookahead": widgets.IntSlider(min=1, max=16, **slider),
            "memory_mode": widgets.Dropdown(options=list(MEMORY_MODES)),
            "lock_scope": widgets.ToggleButtons(options=list(LOCK_SCOPES)),
            "synthesis": widgets.ToggleButtons(options=list(SYNTHESIS_MODES)),
            "partitions": widgets.IntSlider(min=1, max=256, **slider),
            "log2_constraints": widgets.IntSlider(min=2, max=27, **slider),
            "bool_fraction": widgets.FloatSlider(min=0.0, max=1.0, step=0.05, **slider),
            "synth_terms": widgets.IntSlider(min=1, max=64, **slider),
            "seed": widgets.BoundedIntText(min=0, max=2**31 - 1),
            "gpus": widgets.IntSlider(min=1, max=8, **slider),
            "host_load_threads": widgets.IntSlider(min=0, max=max(16, cpus), **slider),
        }
        if "gpu_trace" in defaults.to_dict():
            specs["gpu_trace"] = widgets.Checkbox()
        for name, widget in specs.items():
            label, tooltip = DESCRIPTIONS[name]
            widget.description = label
            widget.tooltip = tooltip
            widget.style = {"description_width": "96px"}
            value = getattr(defaults, name)
            if hasattr(widget, "max") and not isinstance(value, bool) and value > widget.max:
                widget.max = value  # a slider would silently clip the default to its range
            widget.value = value
        self.widgets: dict[str, Any] = specs
        # Settings without a knob keep the defaults' values (and new settings need no knob).
        self._fixed = {k: v for k, v in defaults.to_dict().items() if k not in specs}
        main = ("backend", "gpu_workers", "synth_threads", "synth_lookahead", "memory_mode",
                "lock_scope", "partitions", "log2_constraints", "bool_fraction")
        self.box = widgets.VBox([
            widgets.HBox([widgets.VBox([specs[n] for n in main[:5]]),
                          widgets.VBox([specs[n] for n in main[5:]])]),
            widgets.Accordion(children=[widgets.HBox(
                [specs[n] for n in MORE if n in specs])],
                titles=("more settings",)),
        ])

    def values(self) -> dict[str, Any]:
        return {**self._fixed, **{name: widget.value for name, widget in self.widgets.items()}}

    def set(self, **values: Any) -> None:
        for name, value in values.items():
            if name not in self.widgets:
                raise ConfigError(name, value, f"one of the panel's knobs {sorted(self.widgets)}")
            self.widgets[name].value = value

    def check(self) -> Check:
        return check(self.values())

    def observe(self, callback: Any) -> None:
        for widget in self.widgets.values():
            widget.observe(callback, names="value")

    def enable(self, enabled: bool) -> None:
        for widget in self.widgets.values():
            widget.disabled = not enabled
