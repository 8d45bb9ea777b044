"""What each span is, whoever wrote the trace: its role.

Analyses ask for roles, never for phase names or track strings of one program, so a
finding can say what it needs and be skipped when a trace lacks it. A span's role comes
from, first to last:

1. the trace's role rules (`trace.meta["roles"]`): written by an importer that knows its
   format (a Kineto step is a unit of work) or by the user's mapping file (`--roles FILE`:
   this NVTX range is in fact a mutex hold);
2. the track it sits on (see model/tracks.py) and its name: kernels on stream tracks,
   copies on copy tracks, synchronisation calls among CUDA API calls, contended lock
   calls among OS runtime calls, the pipeline's own threads, mutex and barrier.

Roles are worked out once per distinct (track, name) pair, so a trace of millions of spans
costs a lookup per pair. Contract: `span_roles(trace) -> int8 array of indices into ROLES`,
`role_mask(trace, *roles)`, `role_counts(trace)`, `parse_rules(data, source)`.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.config import MAX_JSON_DEPTH, SmallFileError, json_depth, read_small
from workbench.model import tracks as tr

if TYPE_CHECKING:
    from workbench.trace.container import Trace

# Every role, with what it means (the import report and `--show-roles` print these).
ROLES: dict[str, str] = {
    "kernel": "GPU kernel",
    "copy": "memory copy (direction, bytes, source memory kind in its attributes)",
    "memset": "GPU memset",
    "sync": "host call that waits for the GPU (device, stream or event synchronisation, blocking copy)",
    "launch": "host call that launches GPU work",
    "runtime": "other CUDA runtime or driver call",
    "lock_wait": "waiting to acquire a lock",
    "lock_hold": "holding a lock",
    "cond_wait": "waiting on a condition variable or semaphore",
    "barrier_wait": "waiting at a barrier for the other parties",
    "producer": "producer work (synthesis: makes the units a consumer takes)",
    "prep": "preparation work a consumer meets at a barrier (prep_msm)",
    "consumer": "host work of a consumer thread (a GPU worker's phases)",
    "unit": "one repeated unit of work (a partition, an iteration, a step)",
    "os_call": "other OS runtime call",
    "host": "other host work (ranges, operators, functions)",
    "other": "none of the above",
}
ROLE_NAMES = tuple(ROLES)
WAIT_ROLES = ("lock_wait", "cond_wait", "barrier_wait")  # a host thread waiting on another
CODE = {name: i for i, name in enumerate(ROLE_NAMES)}

# CUDA runtime and driver calls that block the calling thread until the GPU has caught up,
# and the activity records of such waits, named for what was synchronised (an nsys export's
# synchronisation table, the workbench's own activity collector).
# Queries (cudaEventQuery, cudaStreamQuery) return at once and cudaStreamWaitEvent makes a stream,
# not the host, wait: none of them is a wait of the host's.
SYNC_CALLS = re.compile(
    r"^(?:(?:cuda|cu|hip)(?:DeviceSynchronize|CtxSynchronize|StreamSynchronize|EventSynchronize"
    r"|Memcpy(?:2D|3D|Peer|ToSymbol|FromSymbol|HtoD|DtoH|DtoD|WithStream)?(?:_v\d+)?"
    r"|Memset(?:D8|D16|D32)?(?:_v\d+)?"
    r"|Free|FreeHost|MemFree|MemFreeHost)(?:_v\d+|_ptsz|_ptds)*"
    r"|(?:event_|stream_|context_)?synchronize)$"
)
# ROCm's HIP calls are named as CUDA's (hipLaunchKernel, hipDeviceSynchronize, hipExtModuleLaunchKernel).
# The runtime's own entry of a `<<<...>>>` launch (__cudaLaunchKernel) and the old cudaLaunch and
# cuLaunchGrid calls launch kernels too; cudaLaunchHostFunc queues a host function, not GPU work.
LAUNCH_CALLS = re.compile(r"^(?:__)?(?:cuda|cu|hip)(?:LaunchKernel\w*|LaunchCooperativeKernel\w*"
                          r"|GraphLaunch\w*|(?:Ext)?ModuleLaunchKernel\w*|Launch(?:_\w+)?|LaunchGrid\w*)$")
LOCK_CALLS = re.compile(r"^(?:pthread_mutex_(?:timed)?lock|pthread_rwlock_(?:rd|wr|timedrd|timedwr)lock"
                        r"|pthread_spin_lock|mtx_(?:timed)?lock)$")
COND_CALLS = re.compile(r"^(?:pthread_cond_(?:timed|clock)?wait|sem_(?:timed|clock)?wait|cnd_(?:timed)?wait"
                        r"|futex|syscall_futex|pthread_barrier_wait)$")
UNIT_NAMES = re.compile(r"^ProfilerStep#\d+$")


class RolesError(ValueError):
    """A role mapping that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class RoleRule:
    """Spans whose name (and track, when given) match get this role."""

    role: str
    name: str = ""  # regular expression, matched in full; "" matches any name
    track: str = ""  # regular expression, matched in full; "" matches any track
    lock: str = ""  # for lock roles: the lock's identity

    def matches(self, track: str, name: str) -> bool:
        return ((not self.name or re.fullmatch(self.name, name) is not None)
                and (not self.track or re.fullmatch(self.track, track) is not None))

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in (("role", self.role), ("name", self.name), ("track", self.track),
                                  ("lock", self.lock)) if v}


def parse_rules(data: Any, source: str = "roles") -> tuple[RoleRule, ...]:
    """Rules from decoded JSON or TOML: `{"role": [{"name": ..., "role": ...}, ...]}` or the list."""
    entries = data.get("role", data.get("roles")) if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise RolesError(f"{source}: expected a list of rules under 'role' (each with 'role' and 'name' "
                         "or 'track')")
    rules = []
    for n, entry in enumerate(entries):
        where = f"{source}: rule {n + 1}"
        if not isinstance(entry, dict):
            raise RolesError(f"{where}: a rule is a table with 'role' and 'name' or 'track'")
        unknown = set(entry) - {"role", "name", "track", "lock"}
        if unknown:
            allowed = "role, name, track, lock"
            raise RolesError(f"{where}: unknown key {sorted(unknown)[0]!r} (allowed: {allowed})")
        role = entry.get("role")
        if role not in ROLES:
            raise RolesError(f"{where}: role {role!r} is not one of {', '.join(ROLE_NAMES)}")
        fields = {}
        for key in ("name", "track", "lock"):
            value = entry.get(key, "")
            if not isinstance(value, str):
                raise RolesError(f"{where}: {key} must be a string")
            fields[key] = value
        if not fields["name"] and not fields["track"]:
            raise RolesError(f"{where}: give 'name' or 'track' (a regular expression) to match spans by")
        for key in ("name", "track"):
            try:
                re.compile(fields[key])
            except re.error as err:
                what = f"{key} {fields[key]!r}"
                raise RolesError(f"{where}: {what} is not a regular expression ({err})") from None
        rules.append(RoleRule(role, **fields))
    return tuple(rules)


def load_rules(path: str | Path) -> tuple[RoleRule, ...]:
    """A mapping file: TOML (`[[role]]` tables) or JSON; a `.json` name is read as JSON, any other
    as TOML (a TOML file may begin with `[` too, so the first character cannot tell)."""
    path = Path(path)
    try:
        text = read_small(path, "role mapping")
    except SmallFileError as err:
        raise RolesError(str(err)) from None
    if path.suffix.lower() == ".json" and json_depth(text) > MAX_JSON_DEPTH:
        raise RolesError(f"{path}: not valid JSON (nested deeper than {MAX_JSON_DEPTH} levels)")
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, RecursionError) as err:
        kind = "JSON" if path.suffix.lower() == ".json" else "TOML"
        raise RolesError(f"{path}: not valid {kind} ({err})") from None
    return parse_rules(data, str(path))



def trace_rules(trace: Trace) -> tuple[RoleRule, ...]:
    stored = trace.meta.get("roles")
    return parse_rules(stored, "trace role rules") if stored else ()


def with_rules(trace: Trace, rules: Iterable[RoleRule]) -> None:
    """Add rules to a trace (the user's mapping goes first, so it overrides an importer's)."""
    existing = [r.as_dict() for r in trace_rules(trace)]
    trace.meta["roles"] = [r.as_dict() for r in rules] + existing


def default_role(track: str, name: str) -> str:
    """A span's role from its track and name alone."""
    t = tr.parse(track)
    kind = t.kind
    if kind == tr.KERNELS:
        return "kernel"
    if kind == tr.COPIES:
        return "copy"
    if kind == tr.MEMSETS:
        return "memset"
    if kind == tr.DEVICE:
        # The GPU's own record of a host thread's wait for it (the activity collector's
        # gpu<n>/sync); any other device record is none of the GPU's work.
        return "sync" if t.gpu is not None and track == tr.sync_track(t.gpu) else "other"
    if kind == tr.CUDA_API:
        return "sync" if SYNC_CALLS.match(name) else "launch" if LAUNCH_CALLS.match(name) else "runtime"
    if kind == tr.OS_API:
        return "lock_wait" if LOCK_CALLS.match(name) else "cond_wait" if COND_CALLS.match(name) else "os_call"
    if kind in (tr.MUTEX, tr.LOCK):
        return {"wait": "lock_wait", "hold": "lock_hold"}.get(name, "other")
    if kind == tr.BARRIER:
        return "barrier_wait"
    if kind == tr.SAMPLED:  # when kernels were recorded: the recording's, nobody's work
        return "other"
    if kind == tr.SYNTH:
        return "producer"
    if kind == tr.PREP:
        return "barrier_wait" if name == "barrier_wait" else "prep"
    if kind == tr.WORKER:
        return "consumer"
    if UNIT_NAMES.match(name):
        return "unit"
    return "host"


def role_of(track: str, name: str, rules: tuple[RoleRule, ...] = ()) -> str:
    for rule in rules:
        if rule.matches(track, name):
            return rule.role
    return default_role(track, name)


def span_roles(trace: Trace) -> np.ndarray:
    """Each span's role, as an index into ROLE_NAMES (read-only).

    Kept on the trace, keyed by its span columns and its rules, so the analyses of one verdict
    (idle causes, copies, units, lock waits, the export) share one computation; rules added
    later (`with_rules`) or new columns make a new one."""
    spans = trace.spans
    rules = trace_rules(trace)
    cached = trace.__dict__.get("_span_roles")
    # The cache holds the columns themselves, so a column replaced since cannot pass for them.
    if cached is not None and cached[0] is spans.track and cached[1] is spans.name and cached[2] == rules:
        return cached[3]
    codes = _span_roles(trace, rules)
    codes.setflags(write=False)
    trace.__dict__["_span_roles"] = (spans.track, spans.name, rules, codes)
    return codes


def _span_roles(trace: Trace, rules: tuple[RoleRule, ...]) -> np.ndarray:
    spans = trace.spans
    if not len(spans):
        return np.zeros(0, np.int8)
    width = np.int64(len(trace.strings.values) + 1)
    keys = spans.track.astype(np.int64) * width + spans.name.astype(np.int64)
    pairs, inverse = np.unique(keys, return_inverse=True)
    text = trace.strings.values
    codes = np.array([CODE[role_of(text[int(k // width)], text[int(k % width)], rules)] for k in pairs],
                     dtype=np.int8)
    return codes[inverse]


def role_mask(trace: Trace, *roles: str, codes: np.ndarray | None = None) -> np.ndarray:
    for role in roles:
        if role not in CODE:
            raise KeyError(f"unknown role {role!r}")
    codes = span_roles(trace) if codes is None else codes
    return np.isin(codes, [CODE[r] for r in roles])


def role_counts(trace: Trace, codes: np.ndarray | None = None) -> dict[str, int]:
    """How many spans of each role the trace holds (roles it lacks are left out)."""
    codes = span_roles(trace) if codes is None else codes
    counts = np.bincount(codes.astype(np.int64), minlength=len(ROLE_NAMES))
    return {ROLE_NAMES[i]: int(n) for i, n in enumerate(counts) if n}


def lock_identity(track: str, name: str, rules: tuple[RoleRule, ...] = ()) -> str:
    """Which lock a lock span is about: the mutex's GPU, the lock track's name, or a rule's."""
    for rule in rules:
        if rule.matches(track, name) and rule.lock:
            return rule.lock
    t = tr.parse(track)
    if t.kind == tr.MUTEX:
        return f"gpu{t.gpu}"
    if t.kind == tr.LOCK:
        return t.name
    return ""
