"""One recording: the program started with the shims, its events drained while it runs, its
end (exit, signal, a stop of ours forwarded to it) turned into a trace.

The program runs in a process group of its own, so a stop signal of the recorder's is passed
on to it (a second one kills it) and what was recorded is saved once it has ended. At a
terminal, the program's group is the terminal's foreground while it runs (it reads the
terminal and takes Ctrl-C itself, as it would unrecorded); elsewhere a Ctrl-C reaches the
recorder alone, which passes it on. A drain thread empties the ring every `period_s` into the
recorder, which the journal and a live view read as they read any run's.

What the recording costs the program is set part by part (benchmarks/record_gpu.py times each):
`cuda_kinds` (the CUPTI activity kinds, WORKBENCH_RECORD_CUDA_KINDS of cupti_injection.c),
`cuda_mode` (how kernels are recorded: `activity`, a CUPTI record each; `launches`, each
launch timed on the host through CUPTI's callbacks; `sampled`, those and kernel records in the
first `sample` ms of every period: WORKBENCH_RECORD_CUDA_MODE, launches.h),
`nvtx` (the NVTX injection), `preload` (the lock shim in LD_PRELOAD), `period_s` (how often
the ring is drained; None: only once the program has ended) and `env` (the shims' other
knobs: WORKBENCH_RECORD_FLUSH_MS, WORKBENCH_RECORD_BUFFER_KB, WORKBENCH_RECORD_CUDA_TIDS).

Contract: `Session(argv, ...)`: `.start()`, `.wait(stops)`, `.trace()`; `exit_status(code)`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workbench.attach.build import Shims
from workbench.attach.convert import Converter
from workbench.attach.ring import Ring
from workbench.clock import DEFAULT_CLOCK, Clock, MonotonicClock
from workbench.model import tracks as tr
from workbench.trace.container import Trace
from workbench.trace.recorder import Recorder

PERIOD_S = 0.05
GRACE_S = 10.0  # after a stop is passed on, how long the program has to end before it is killed
FORMAT = "workbench record"
LOCK_MODES = ("contended", "all", "none")  # which locks the shim records (shim.c); the first is the default
CUDA_KINDS = ("kernel", "memcpy", "memset", "sync", "runtime")  # CUPTI activity kinds (cupti_injection.c)
EXTRA_KINDS = ("overhead",)  # not in `all`: CUPTI's records of its own overhead, summed in the counts
# How kernels are recorded (cupti_injection.c, launches.h); the first is the default.
CUDA_MODES = ("activity", "launches", "sampled")
SAMPLE_MS = (1.0, 10.0)  # `sampled`: kernel records in the first 1 ms of every 10 ms


def cuda_kinds(text: str) -> tuple[str, ...]:
    """The CUDA activity kinds a comma list names (`all`, `none`, or some of CUDA_KINDS and
    EXTRA_KINDS; `all,overhead` is every kind and CUPTI's overhead records)."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == ["none"]:
        return ()
    if "all" in words:
        words = [*CUDA_KINDS, *(w for w in words if w != "all")]
    known = CUDA_KINDS + EXTRA_KINDS
    wrong = [w for w in words if w not in known]
    if wrong or not words:
        raise ValueError(f"CUDA activity kinds are a comma list of {', '.join(known)} (or all, none), "
                         f"not {text!r}")
    return tuple(k for k in known if k in words)


def sample_ms(text: str) -> tuple[float, float]:
    """`WINDOW/PERIOD` in ms (`1/10`, `0.5/20`): kernel records in the first WINDOW ms of every
    PERIOD ms, 0 < WINDOW < PERIOD <= 60000."""
    window, slash, period = text.partition("/")
    try:
        found = float(window), float(period)
    except ValueError:
        found = (0.0, 0.0)
    return _duty_cycle(found if slash else (0.0, 0.0), text)


def _duty_cycle(sample: tuple[float, float], said: str) -> tuple[float, float]:
    if not 0 < sample[0] < sample[1] <= 60000:
        raise ValueError(f"a sampling duty cycle is WINDOW/PERIOD in ms with 0 < WINDOW < PERIOD <= 60000 "
                         f"(1/10: the first 1 ms of every 10), not {said!r}")
    return sample


def check_cuda_mode(mode: str, kinds: Sequence[str]) -> None:
    """A known mode, and for the modes that record kernels by their launches, kernels among the
    kinds (checked by `workbench record` before it builds the shims, and by Session)."""
    if mode not in CUDA_MODES:
        raise ValueError(f"the CUDA mode is one of {', '.join(CUDA_MODES)}, not {mode!r}")
    if mode != "activity" and "kernel" not in kinds:
        raise ValueError(f"--cuda-mode {mode} records kernels by their launches: it needs kernel "
                         f"among the CUDA activity kinds")


def clock_offset(clock: Clock) -> int:
    """CLOCK_MONOTONIC minus the trace clock (the shim's timestamps are CLOCK_MONOTONIC)."""
    if isinstance(clock, MonotonicClock) and time.get_clock_info("perf_counter").implementation == \
            "clock_gettime(CLOCK_MONOTONIC)":
        return 0
    best = None
    for _ in range(20):  # the reading taken in the shortest window
        a = clock.now_ns()
        mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        b = clock.now_ns()
        if best is None or b - a < best[0]:
            best = (b - a, mono - (a + b) // 2)
    assert best is not None
    return best[1]


class Session:
    def __init__(self, argv: Sequence[str], shims: Shims, clock: Clock = DEFAULT_CLOCK,
                 capacity: int = 1 << 19, period_s: float | None = PERIOD_S, locks: str = "contended",
                 cuda_kinds: Sequence[str] = CUDA_KINDS, nvtx: bool = True, preload: bool = True,
                 env: Mapping[str, str] | None = None, cuda_mode: str = "activity",
                 sample: tuple[float, float] = SAMPLE_MS) -> None:
        if not argv:
            raise ValueError("no program to record: give it after `--`")
        if locks not in LOCK_MODES:
            raise ValueError(f"locks must be one of {', '.join(LOCK_MODES)}, not {locks!r}")
        wrong = [k for k in cuda_kinds if k not in CUDA_KINDS + EXTRA_KINDS]
        if wrong:
            raise ValueError(f"CUDA activity kinds are some of {', '.join(CUDA_KINDS + EXTRA_KINDS)}, "
                             f"not {', '.join(wrong)}")
        check_cuda_mode(cuda_mode, cuda_kinds)
        sample = _duty_cycle((float(sample[0]), float(sample[1])), "/".join(f"{v:g}" for v in sample))
        self.argv = list(argv)
        self.shims = shims
        self.cuda_mode = cuda_mode
        self.sample = sample
        self.locks = locks
        self.cuda_kinds = tuple(k for k in CUDA_KINDS + EXTRA_KINDS if k in cuda_kinds)
        self.nvtx = nvtx and shims.nvtx
        self.preload = preload
        self.knobs = dict(env or {})
        self.recorder = Recorder(clock, nvtx=False)
        self.ring = Ring.create(capacity)
        self.converter = Converter(self.recorder, clock_offset(clock))
        self.period_s = period_s
        self.process: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self.stopped_by: str | None = None
        self.ended_ns = 0
        self.error: str | None = None
        self._done = threading.Event()
        self._drainer: threading.Thread | None = None
        self._named: set[int] = set()
        self._terminal = False
        self.replaced: list[str] = []  # the program's own hooks that the recording's took the place of

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.knobs)
        if self.preload:
            preload = env.get("LD_PRELOAD", "")
            env["LD_PRELOAD"] = f"{self.shims.locks}{' ' + preload if preload else ''}"
        env["WORKBENCH_RECORD_RING"] = self.ring.path
        env["WORKBENCH_RECORD_RING_FD"] = str(self.ring.fd)
        env["WORKBENCH_RECORD_LOCKS"] = self.locks
        env["WORKBENCH_RECORD_CUDA_KINDS"] = ",".join(self.cuda_kinds) or "none"
        env["WORKBENCH_RECORD_CUDA_MODE"] = self.cuda_mode
        env["WORKBENCH_RECORD_SAMPLE_MS"] = "/".join(f"{v:g}" for v in self.sample)
        hooks = {"NVTX_INJECTION64_PATH": str(self.shims.locks) if self.nvtx else None,
                 "CUDA_INJECTION64_PATH": str(self.shims.cupti) if self.shims.cupti is not None else None}
        for name, ours in hooks.items():
            if ours is None:
                continue
            theirs = env.get(name)
            if theirs and theirs != ours and not any(name in n for n in self.replaced):
                self.replaced.append(f"{name} was {theirs}: replaced by the recording's for this program")
            env[name] = ours
        return env

    def start(self, stdout: Any = None) -> None:
        """Starts the program (OSError when it cannot be run) and the drain thread."""
        self.process = subprocess.Popen(self.argv, env=self.environment(), process_group=0, stdout=stdout,
                                        pass_fds=(self.ring.fd,))
        self.converter.main_pid = self.process.pid
        self._terminal = _foreground(self.process.pid)
        self._drainer = threading.Thread(target=self._drain_loop, name="workbench-record-drain", daemon=True)
        self._drainer.start()

    def _drain_loop(self) -> None:
        if hasattr(signal, "pthread_sigmask"):  # stop signals are the main thread's
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        try:
            while not self._done.wait(self.period_s):  # period None: nothing until the end
                self._drain_once(final=False)
        except Exception as err:  # the program goes on; the trace says recording stopped early
            self.error = f"{type(err).__name__}: {err}"

    def _drain_once(self, final: bool) -> None:
        self.converter.feed(self.ring.drain(final))
        self._name_threads()

    def _name_threads(self) -> None:
        """Threads named by the program (pthread_setname_np, or NVTX) get their names on tracks."""
        assert self.process is not None
        for tid in self.converter.threads - self._named:
            name = self.converter.thread_names.get(tid)
            if name is None:
                try:
                    name = Path(f"/proc/{self.process.pid}/task/{tid}/comm").read_text().strip()
                except OSError:
                    continue  # gone already: named by NVTX or by its id
            self._named.add(tid)
            self.recorder.name_track(tr.thread_track(tid), name)
        for tid, name in self.converter.thread_names.items():
            if self.recorder.thread_names.get(tr.thread_track(tid)) != name:
                self.recorder.name_track(tr.thread_track(tid), name)

    def wait(self, stops: Any = None) -> int:
        """Waits for the program; a stop (KeyboardInterrupt) is passed on to it as the signal
        received, a second one kills it. Returns the program's exit code as a shell gives it."""
        assert self.process is not None
        process = self.process
        deadline: float | None = None
        while True:
            try:
                if deadline is None:
                    code = process.wait()
                else:
                    code = process.wait(timeout=max(deadline - time.monotonic(), 0.01))
                break
            except KeyboardInterrupt:
                name = (stops.received[-1] if stops is not None and stops.received else "SIGINT")
                if self.stopped_by is None:
                    self.stopped_by = name
                    _signal(process, getattr(signal, name, signal.SIGINT))
                    deadline = time.monotonic() + GRACE_S
                else:
                    _signal(process, signal.SIGKILL)
            except subprocess.TimeoutExpired:
                _signal(process, signal.SIGKILL)
                deadline = None
        self.ended_ns = self.recorder.now_ns()
        if self._terminal:
            _foreground(os.getpgrp())
        self.returncode = code
        self._done.set()
        if self._drainer is not None:
            self._drainer.join()
        self._drain_once(final=True)
        self.converter.finish(self.ended_ns)
        return exit_status(code)

    def trace(self) -> Trace:
        c = self.converter
        notes = list(self.shims.notes) + self.replaced + c.notes
        features = self.ring.features
        counts = dict(c.counts)
        unrecorded = self.ring.unrecorded
        if not self.preload:
            notes.append("the lock shim was not preloaded: no lock operations recorded")
        elif "locks" not in features:
            notes.append("the lock shim did not attach (a statically linked program, or one that clears "
                         "LD_PRELOAD): no lock operations recorded")
        elif self.locks == "none":
            notes.append("locks not recorded (--locks none): no mutex, condition variable or semaphore spans")
        elif self.locks == "contended":
            notes.append(f"locks filtered (--locks contended, the default): a mutex's holds and waits are "
                         f"recorded from the first time a thread had to wait for it (the hold it waited "
                         f"for included), condition waits always, semaphore waits that blocked; "
                         f"{unrecorded} holds of mutexes nobody was waiting for were not recorded "
                         f"(--locks all records them)")
            if self.ring.untracked:
                notes.append(f"{self.ring.untracked} contended mutexes past the shim's set of them: some of "
                             f"their holds are missing")
        if "locks" in features and self.locks != "none" and not counts.get("lock acquires") \
                and not counts.get("condition waits") and not unrecorded:
            notes.append("the program took no pthread mutex, condition variable or semaphore: no lock spans")
        if self.shims.nvtx and not self.nvtx:
            notes.append("NVTX ranges not recorded: the NVTX injection was left off")
        elif self.shims.nvtx and "nvtx" not in features:
            notes.append("no NVTX ranges: the program made no NVTX calls")
        if self.shims.cupti is not None and "cupti" not in features:
            notes.append("no CUDA activity: the program did not initialise CUDA")
        elif self.shims.cupti is not None and not set(CUDA_KINDS) <= set(self.cuda_kinds):
            left = [k for k in CUDA_KINDS if k not in self.cuda_kinds]
            notes.append(f"CUDA activity kinds left out: {', '.join(left)} (--cuda-kinds "
                         f"{','.join(self.cuda_kinds) or 'none'})")
        if self.shims.cupti is not None and "cupti" in features:
            notes.extend(self._mode_notes(counts))
        dropped, lost = self.ring.dropped, self.ring.lost
        if dropped or lost:
            notes.append(f"{dropped + lost} events lost: the ring was full ({dropped}) or an event was cut "
                         f"off by the program's end ({lost})")
        if self.error:
            notes.append(f"recording stopped early: {self.error}")
        code = self.returncode
        outcome = "completed" if code == 0 else f"exited with {code}" if code and code > 0 else \
            f"killed by {_signal_name(-code)}" if code else "unknown"
        meta = {
            "import": {"format": FORMAT, "source": " ".join(self.argv), "kept": counts.get("events", 0),
                       "missing": notes},
            "record": {"command": self.argv, "exit_code": exit_status(code) if code is not None else None,
                       "features": sorted(features), "counts": counts, "dropped": dropped, "lost": lost,
                       "locks": self.locks, "unrecorded_holds": unrecorded,
                       "cuda_kinds": list(self.cuda_kinds) if self.shims.cupti is not None else [],
                       "cuda_mode": self.cuda_mode,
                       "sample_ms": list(self.sample) if self.cuda_mode == "sampled" else None,
                       "launches_by_kernel": dict(c.launches.most_common()),
                       "stopped_by": self.stopped_by, "notes": notes},
            "outcome": outcome,
        }
        rules = c.lock_rules()
        if rules:
            meta["roles"] = rules
        trace = Trace.from_recorder(self.recorder, config={"command": self.argv}, meta=meta)
        for track, name in c.lock_names.items():
            trace.thread_names[track] = name
        return trace

    def _mode_notes(self, counts: dict[str, int]) -> list[str]:
        """What `--cuda-mode launches` and `sampled` leave out of the trace, with its numbers."""
        if self.cuda_mode == "activity":
            return []
        launches, kernels = counts.get("kernel launches", 0), len(self.converter.launches)
        timed = (f"{launches} kernel launches ({kernels} kernels) timed on the host: each is the launch "
                 f"call on its thread (role launch), not the kernel's time on the GPU")
        if self.cuda_mode == "launches":
            return [f"kernels recorded by their launches only (--cuda-mode launches): {timed}; no kernel "
                    f"record, so the GPU's busy and idle time are not in the trace"]
        window, period = self.sample
        windows, sampled_ms = counts.get("sampling windows", 0), counts.get("sampled ns", 0) / 1e6
        return [f"kernel records sampled (--cuda-mode sampled, the first {window:g} ms of every "
                f"{period:g} ms): {counts.get('kernels', 0)} kernels recorded on the GPU in {windows} "
                f"windows ({sampled_ms:.1f} ms); {timed}; the GPU's busy and idle time are judged inside "
                f"the windows only"]

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            _signal(self.process, signal.SIGKILL)
            self.process.wait()
        self._done.set()
        self.ring.close()


def exit_status(code: int | None) -> int:
    """A program's exit code as a shell reports it: its own, or 128 + the signal that ended it."""
    if code is None:
        return 1
    return 128 - code if code < 0 else code


def _foreground(group: int) -> bool:
    """Makes `group` the foreground of the terminal on stdin, if there is one we lead."""
    try:
        if not os.isatty(0) or os.tcgetpgrp(0) not in (os.getpgrp(), group):
            return False
        # From the background, taking the terminal back would stop us (SIGTTOU) unless blocked.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
        try:
            os.tcsetpgrp(0, group)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        return True
    except OSError:
        return False


def _signal(process: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(sig)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
