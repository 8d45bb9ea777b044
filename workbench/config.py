"""One validated run configuration, round-tripping through JSON so a run can be repeated."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

BACKENDS = ("auto", "cpu", "gpu")
MEMORY_MODES = ("pageable", "pinned", "zerocopy", "registered")
LOCK_SCOPES = ("coarse", "compute")
SYNTHESIS_MODES = ("threads", "processes")
# A host-to-device link speed the analyses will time copies by, in GB/s: beyond these a copy of
# a few bytes lasts past any clock, or no time at all.
LINK_GBPS_RANGE = (1e-3, 1e5)


class ConfigError(ValueError):
    """A knob with a value it cannot take; names the field, the value and what is allowed."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}={value!r} is not allowed: {allowed}")


@dataclass(frozen=True)
class RunConfig:
    backend: str = "auto"
    # GPUs to spread partitions over (devices 0..gpus-1; emulated on the CPU backend), each
    # with its own mutex, device buffers and gpu_workers workers.
    gpus: int = 1
    gpu_workers: int = 2
    synth_threads: int = 2
    # Where synthesis computes: in the synthesis threads themselves, or each thread hands its
    # partitions to a process of its own (pipeline/synth_processes.py), where no other
    # thread's Python can hold the interpreter lock it needs between numpy calls.
    synthesis: str = "threads"
    # How many partitions may be synthesised (or in synthesis) before a GPU worker picks
    # them up: the back-pressure bound that keeps synthesis from running away with memory.
    synth_lookahead: int = 2
    memory_mode: str = "pageable"
    lock_scope: str = "coarse"
    partitions: int = 8
    log2_constraints: int = 13
    # Share of witness scalars that are 0 or 1 (bit-heavy circuits are ~0.9).
    bool_fraction: float = 0.9
    seed: int = 1
    # Cost knob of synthesis: witness terms gathered and combined per constraint (each term
    # is a random-access read of the witness plus a field addition; see prover/circuit.py).
    synth_terms: int = 4
    # Threads streaming through host memory beside the run (pipeline/host_load.py): the other
    # memory-bound work that shares a proving host. 0: none.
    host_load_threads: int = 0
    # Whether to record events; off leaves the instrumented primitives free of cost.
    trace: bool = True
    # Record what the device did (activity records) and sample its counters during the run.
    gpu_trace: bool = False
    # Period of the counter sampler, in milliseconds.
    sample_interval_ms: int = 100
    # Verify every proof (prover/verify.py) in a phase of its own after finish, outside the mutex.
    verify: bool = False

    def __post_init__(self) -> None:
        _check_choice("backend", self.backend, BACKENDS)
        _check_choice("memory_mode", self.memory_mode, MEMORY_MODES)
        _check_choice("lock_scope", self.lock_scope, LOCK_SCOPES)
        _check_choice("synthesis", self.synthesis, SYNTHESIS_MODES)
        _check_int("gpus", self.gpus, 1, 16)
        _check_int("gpu_workers", self.gpu_workers, 1, 16)
        _check_int("synth_threads", self.synth_threads, 1, 256)
        _check_int("synth_lookahead", self.synth_lookahead, 1, 4096)
        _check_int("partitions", self.partitions, 1, 1_000_000)
        _check_int("log2_constraints", self.log2_constraints, 2, 27)
        _check_int("seed", self.seed, 0, 2**63 - 1)
        _check_int("synth_terms", self.synth_terms, 1, 64)
        _check_int("host_load_threads", self.host_load_threads, 0, 256)
        if isinstance(self.bool_fraction, bool) or not isinstance(self.bool_fraction, int | float):
            raise ConfigError("bool_fraction", self.bool_fraction, "a number from 0 to 1")
        if not 0.0 <= float(self.bool_fraction) <= 1.0:
            raise ConfigError("bool_fraction", self.bool_fraction, "a number from 0 to 1")
        for name in ("trace", "gpu_trace", "verify"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "true or false")
        _check_int("sample_interval_ms", self.sample_interval_ms, 10, 60_000)

    @property
    def workers(self) -> int:
        """GPU workers over all GPUs."""
        return self.gpus * self.gpu_workers

    def gpu_of(self, worker: int) -> int:
        """Workers are numbered GPU by GPU: 0..gpu_workers-1 serve GPU 0, and so on."""
        return worker // self.gpu_workers

    @property
    def constraints(self) -> int:
        return 1 << self.log2_constraints

    def replace(self, **changes: Any) -> RunConfig:
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            name = sorted(unknown)[0]
            raise ConfigError(name, changes[name], f"one of the known fields {field_names()}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        if not isinstance(data, dict):
            raise ConfigError("config", data, "a JSON object of run settings")
        known = set(field_names())
        for key in data:
            if key not in known:
                raise ConfigError(key, data[key], f"one of the known fields {field_names()}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        if json_depth(text) > MAX_JSON_DEPTH:
            raise ConfigError("config", text[:40], f"JSON nested at most {MAX_JSON_DEPTH} levels deep")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError("config", text[:40], f"valid JSON ({err.msg} at line {err.lineno})") from None
        return cls.from_dict(data)


def field_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(RunConfig))


def _check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(name, value, "one of " + " | ".join(allowed))


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(name, value, f"an integer from {low} to {high}")


class SmallFileError(ValueError):
    """A settings file or role mapping that cannot be read; the message names the file."""


SMALL_FILE = 1 << 20  # a settings file or role mapping is a few KiB


def read_small(path: Path, what: str) -> str:
    """A small text file read whole, at most SMALL_FILE bytes: a device (/dev/zero) or a runaway
    pipe is refused after reading that much instead of read forever."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(SMALL_FILE + 1)
    except OSError as err:
        raise SmallFileError(f"{path}: cannot read the {what} ({err.strerror or err})") from None
    if len(data) > SMALL_FILE:
        raise SmallFileError(f"{path}: more than {SMALL_FILE >> 20} MiB, not a {what} file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SmallFileError(f"{path}: cannot read the {what} (not UTF-8 text: byte {err.start})") from None


MAX_JSON_DEPTH = 64
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth(text: str) -> int:
    """How deep arrays and objects nest in JSON text, measured before it is parsed: the parser
    recurses in C, and deep enough text overflows the stack (a crash, not a RecursionError)."""
    depth = deepest = 0
    for bracket in _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest
