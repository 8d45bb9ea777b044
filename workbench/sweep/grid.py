"""A sweep's grid file: the base configuration, the cells and how often and in which order to
run them. TOML by default, JSON when the name ends in .json.

    repeats = 3                 # runs of every cell
    order = "interleave"        # grid | interleave | shuffle
    seed = 7                    # of the shuffle (each run's circuit seed is its config's `seed`)
    proofs = false              # keep each run's proofs beside its trace
    link_gbps = 55.2            # host link speed for what-if replays of runs that measured none
    [base]                      # RunConfig knobs every cell starts from
    backend = "gpu"
    [cells.zerocopy_t14]        # named cells: the base with these knobs changed
    memory_mode = "zerocopy"
    [axes]                      # knob -> values: every cell (or the base) times their product
    lock_scope = ["coarse", "compute"]
    [[checks]]                  # what-if replays checked against the cell that made the change
    base = "pageable_t14"; cell = "zerocopy_t14"; change = { copies_at_link = true }
    [report]                    # the sweep report's title, introduction and pairs side by side
    pairs = [["pageable_t14", "zerocopy_t14"]]

Every knob is checked as `workbench run` checks it; a bad one is refused in one line naming
the file, the key and what is allowed.

Orders: `grid` runs every repeat of a cell before the next cell; `interleave` every cell's
first run, then every cell's second...; `shuffle` all runs in an order drawn from `seed`.
Interleaved or shuffled, drift across a sitting (a host warming up, a neighbour starting)
spreads over all cells instead of biasing the ones that ran last.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from workbench.analysis.whatif import Change, WhatIfError
from workbench.config import ConfigError, RunConfig
from workbench.pipeline.faults import FaultSpecError, fault_hook

ORDERS = ("grid", "interleave", "shuffle")
TOP_KEYS = ("base", "axes", "cells", "repeats", "order", "seed", "proofs", "checks", "report", "link_gbps")
CELL_EXTRAS = ("inject_fault",)  # cell keys that are not RunConfig knobs
CHANGE_KEYS = tuple(f.name for f in fields(Change))
NAME = re.compile(r"[A-Za-z0-9_+-]{1,80}")


class GridError(ValueError):
    """A grid file that cannot be run; the message names the file and the key at fault."""


@dataclass(frozen=True)
class CellSpec:
    """One configuration of the grid: a name, its settings and an optional injected fault."""

    name: str
    config: RunConfig
    fault: str | None = None


@dataclass(frozen=True)
class Cell:
    """One run of the sweep: a configuration and which repeat of it this is."""

    spec: CellSpec
    repeat: int
    label: str  # the run's name in the index and its trace file's stem

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def config(self) -> RunConfig:
        return self.spec.config


@dataclass(frozen=True)
class Check:
    base: str
    cell: str
    change: dict[str, Any]


@dataclass(frozen=True)
class Grid:
    cells: tuple[CellSpec, ...]
    repeats: int = 1
    order: str = "interleave"
    seed: int = 0
    proofs: bool = False
    checks: tuple[Check, ...] = ()
    report: dict[str, Any] = field(default_factory=dict)
    source: str = "grid"
    link_gbps: float | None = None  # the host link's speed for what-if replays of runs that measured none

    def runs(self) -> list[Cell]:
        """Every run in the order the sweep starts them."""
        def label(spec: CellSpec, k: int) -> str:
            return spec.name if self.repeats == 1 else f"{spec.name}.r{k}"

        by_cell = [Cell(s, k, label(s, k)) for s in self.cells for k in range(self.repeats)]
        if self.order == "grid":
            return by_cell
        interleaved = [Cell(s, k, label(s, k)) for k in range(self.repeats) for s in self.cells]
        if self.order == "interleave":
            return interleaved
        random.Random(self.seed).shuffle(interleaved)
        return interleaved

    def to_dict(self) -> dict[str, Any]:
        """What the index keeps of the grid, enough to summarise the folder later."""
        return {"source": self.source, "repeats": self.repeats, "order": self.order, "seed": self.seed,
                "proofs": self.proofs, "cells": {c.name: c.config.to_dict() for c in self.cells},
                "checks": [vars(c) for c in self.checks], "report": self.report, "link_gbps": self.link_gbps}


def load_grid(path: str | Path) -> Grid:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise GridError(f"{path}: cannot read the grid file ({err.strerror})") from None
    except UnicodeDecodeError:
        raise GridError(f"{path}: not a text file (a grid is TOML, or JSON ending in .json)") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except json.JSONDecodeError as err:
        raise GridError(f"{path}: line {err.lineno}: not valid JSON ({err.msg})") from None
    except tomllib.TOMLDecodeError as err:
        raise GridError(f"{path}: not valid TOML ({err})") from None
    return parse_grid(data, str(path))


def parse_grid(data: Any, source: str = "grid") -> Grid:
    def fail(key: str, message: str) -> GridError:
        return GridError(f"{source}: {key}: {message}")

    if not isinstance(data, dict):
        raise GridError(f"{source}: a grid is a table of {', '.join(TOP_KEYS)}")
    for key in data:
        if key not in TOP_KEYS:
            raise fail(key, f"unknown key; allowed: {', '.join(TOP_KEYS)}")
    repeats = data.get("repeats", 1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= 1000:
        raise fail("repeats", f"{repeats!r} is not allowed: an integer from 1 to 1000")
    order = data.get("order", "interleave")
    if order not in ORDERS:
        raise fail("order", f"{order!r} is not allowed: one of {' | '.join(ORDERS)}")
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise fail("seed", f"{seed!r} is not allowed: an integer from 0")
    proofs = data.get("proofs", False)
    if not isinstance(proofs, bool):
        raise fail("proofs", f"{proofs!r} is not allowed: true or false")
    link = data.get("link_gbps")
    if link is not None and (isinstance(link, bool) or not isinstance(link, int | float) or link <= 0):
        raise fail("link_gbps", f"{link!r} is not allowed: a positive number (GB/s)")
    base_table = _table(data.get("base", {}), "base", fail)
    base_fault = base_table.pop("inject_fault", None)
    base = _config(RunConfig(), base_table, "base", fail)
    named = _table(data.get("cells", {}), "cells", fail)
    specs = [CellSpec("base", base, base_fault)] if not named else []
    for name, changes in named.items():
        key = f"cells.{name}"
        if not NAME.fullmatch(name):
            raise fail(key, "a cell's name is 1 to 80 letters, digits, _, + or - (it names its trace file)")
        changes = dict(_table(changes, key, fail))
        fault = changes.pop("inject_fault", base_fault)
        specs.append(CellSpec(name, _config(base, changes, key, fail), fault))
    specs = _cross(specs, _table(data.get("axes", {}), "axes", fail), fail)
    for spec in specs:
        try:
            fault_hook(spec.fault, f"cells.{spec.name}.inject_fault")
        except FaultSpecError as err:
            raise GridError(f"{source}: {err}") from None
    names = {s.name for s in specs}
    checks = tuple(_check(c, f"checks[{k}]", names, fail) for k, c in enumerate(_list(data, "checks", fail)))
    report = _table(data.get("report", {}), "report", fail)
    for key in report:
        if key not in ("title", "intro", "pairs"):
            raise fail(f"report.{key}", "unknown key; allowed: title, intro, pairs")
    for pair in report.get("pairs", []):
        if not (isinstance(pair, list) and len(pair) == 2 and set(pair) <= names):
            raise fail("report.pairs", f"{pair!r} is not allowed: two cell names of "
                                       f"{', '.join(sorted(names))}")
    return Grid(tuple(specs), repeats, order, seed, proofs, checks, report, source,
                float(link) if link is not None else None)


def _table(value: Any, key: str, fail: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise fail(key, f"{value!r} is not allowed: a table")
    return dict(value)


def _list(data: dict[str, Any], key: str, fail: Any) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise fail(key, f"{value!r} is not allowed: a list of tables")
    return value


def _config(base: RunConfig, changes: dict[str, Any], key: str, fail: Any) -> RunConfig:
    known = {f.name for f in fields(RunConfig)}
    for name in changes:
        if name not in known:
            allowed = ", ".join(sorted(known | set(CELL_EXTRAS)))
            raise fail(f"{key}.{name}", f"unknown knob; allowed: {allowed}")
    try:
        return base.replace(**changes)
    except ConfigError as err:
        raise fail(f"{key}.{err.field}", f"{err.value!r} is not allowed: {err.allowed}") from None


def _cross(specs: list[CellSpec], axes: dict[str, Any], fail: Any) -> list[CellSpec]:
    """Each spec times the product of the axes, named `<cell>+<knob>-<value>...`."""
    if not axes:
        return specs
    for knob, values in axes.items():
        if not isinstance(values, list) or not values:
            raise fail(f"axes.{knob}", f"{values!r} is not allowed: a non-empty list of values")
    out = []
    for spec in specs:
        for combo in itertools.product(*axes.values()):
            changes = dict(zip(axes, combo, strict=True))
            config = _config(spec.config, changes, "axes", fail)
            parts = [f"{k}-{v}".lower() for k, v in changes.items()]
            name = "+".join(([spec.name] if spec.name != "base" else []) + parts)
            if not NAME.fullmatch(name):
                raise fail("axes", f"cell name {name!r} would not make a file name: use plain values")
            out.append(CellSpec(name, config, spec.fault))
    if len({s.name for s in out}) < len(out):
        raise fail("axes", "two cells of the product have one name: give each value once")
    return out


def _check(entry: Any, key: str, names: set[str], fail: Any) -> Check:
    table = _table(entry, key, fail)
    for part in ("base", "cell"):
        if table.get(part) not in names:
            raise fail(f"{key}.{part}", f"{table.get(part)!r} is not a cell of this grid; "
                                        f"cells: {', '.join(sorted(names))}")
    change = _table(table.get("change", {}), f"{key}.change", fail)
    for name in change:
        if name not in CHANGE_KEYS:
            raise fail(f"{key}.change.{name}", f"unknown what-if change; allowed: {', '.join(CHANGE_KEYS)}")
    try:
        Change(**change)
    except (WhatIfError, TypeError) as err:
        raise fail(f"{key}.change", str(err)) from None
    extra = set(table) - {"base", "cell", "change"}
    if extra:
        raise fail(f"{key}.{sorted(extra)[0]}", "unknown key; allowed: base, cell, change")
    return Check(table["base"], table["cell"], change)
