"""Where a watched run's CPU goes, thread by thread: one watched run of benchmarks/live_cost.py,
with each thread's CPU seconds (from /proc) and a sampled profile of the threads that are
not the run's own (the poller, the Bokeh server's loop).

    python benchmarks/live_profile.py [--viewer websocket|chromium|none] [--partitions N] [--top 25]

The sampler wakes every `--every-ms` (default 10), reads the stacks of the view's
threads (sys._current_frames) and counts, per thread, each function on the stack (inclusive) and
the one on top (self); it shares the interpreter like any other thread, so its own CPU is
said too. Counts are samples, so a function's share of a thread is its count over the
thread's samples while the thread was running Python (waiting threads sit in one frame).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import sys
import threading
import time
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent))

import live_cost  # the benchmark's own run, from its folder

TICK = os.sysconf("SC_CLK_TCK")
WATCHED = ("workbench-live", "bokeh-server")  # the threads the view adds to the run's process
IDLE = ("wait", "select", "poll", "epoll", "sleep", "_wait_for_tstate_lock", "acquire")


def task_cpu() -> list[tuple[int, str, float]]:
    """(thread id, the kernel's name for it, CPU seconds) of each live thread of this process."""
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            text = open(f"/proc/self/task/{tid}/stat").read()  # noqa: SIM115 - read at once
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        out.append((int(tid), text[text.index("(") + 1:text.rindex(")")],
                    (int(fields[11]) + int(fields[12])) / TICK))
    return out


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each live thread of this process, keyed by name (same names summed)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = collections.defaultdict(float)
    for tid, comm, cpu_s in task_cpu():
        out[group(names.get(tid, "?" + comm))] += cpu_s
    return out


def group(name: str) -> str:
    """Threads of one kind under one name (synthesis-3 and synthesis-7 both 'synthesis')."""
    return name.rstrip("0123456789-_ ") or name


class Sampler:
    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.inclusive: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.top: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.samples: collections.Counter[str] = collections.Counter()
        self.cpu: dict[int, tuple[str, float]] = {}  # the last reading of each thread, dead ones kept
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)

    def _loop(self) -> None:
        last_cpu = 0.0
        while not self._stop.wait(self.every_s):
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                name = names.get(ident, "?")
                if name in WATCHED:
                    self._count(name, frame)
            now = time.monotonic()
            if now - last_cpu > 0.5:
                self._read_cpu()
                last_cpu = now

    def _read_cpu(self) -> None:
        names = {t.native_id: t.name for t in threading.enumerate()}
        for tid, _comm, cpu_s in task_cpu():
            name = names.get(tid) or self.cpu.get(tid, ("?",))[0]
            self.cpu[tid] = (group(name), cpu_s)

    def _count(self, thread: str, frame: FrameType | None) -> None:
        if frame is None:
            return
        top = f"{frame.f_code.co_name} ({Path(frame.f_code.co_filename).name}:{frame.f_lineno})"
        if frame.f_code.co_name in IDLE:
            return  # a thread waiting: not a cost
        self.samples[thread] += 1
        self.top[thread][top] += 1
        seen: set[str] = set()
        while frame is not None:
            key = f"{frame.f_code.co_name} ({Path(frame.f_code.co_filename).name})"
            if key not in seen:
                self.inclusive[thread][key] += 1
                seen.add(key)
            frame = frame.f_back

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._read_cpu()

    def cpu_by_thread(self) -> dict[str, float]:
        out: dict[str, float] = collections.defaultdict(float)
        for name, seconds in self.cpu.values():
            out[name] += seconds
        return dict(out)


PROFILES: dict[str, cProfile.Profile] = {}


def profile_view_threads() -> None:
    """Run the view's threads under cProfile (deterministic: every call counted and timed,
    Python-heavy code slowed the most), one profile per thread name."""
    run = threading.Thread.run

    def profiled(self: threading.Thread) -> None:
        if self.name not in WATCHED:
            return run(self)
        profile = PROFILES.setdefault(self.name, cProfile.Profile(time.thread_time))
        profile.runcall(run, self)
        return None

    threading.Thread.run = profiled  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--viewer", choices=("websocket", "chromium", "none"), default="websocket")
    parser.add_argument("--partitions", type=int, default=1020)
    parser.add_argument("--log2", type=int, default=6)
    parser.add_argument("--every-ms", type=float, default=10.0)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--cprofile", action="store_true", help="cProfile the view's threads instead")
    parser.add_argument("--unwatched", action="store_true", help="profile the run nobody watches")
    args = parser.parse_args()
    args.backend, args.gpu_trace = "cpu", None
    live_cost.one_run(live_cost.run_config(args, 8), False, "none")  # key, builds: once
    if args.cprofile:
        profile_view_threads()
    sampler = Sampler(1e9 if args.cprofile else args.every_ms / 1e3)
    before = thread_cpu()
    sampler.start()
    r = live_cost.one_run(live_cost.run_config(args, args.partitions), not args.unwatched, args.viewer)
    sampler.stop()
    print(live_cost.line(0, not args.unwatched, r))
    print(f"load average {os.getloadavg()[0]:.2f}")
    cpu = sampler.cpu_by_thread()
    print("\nCPU seconds by thread (during the run):")
    for name, seconds in sorted(cpu.items(), key=lambda kv: -kv[1]):
        print(f"  {name:32s} {seconds - before.get(name, 0.0):7.2f}")
    for thread, profile in PROFILES.items():
        print(f"\n{thread}: cProfile, thread CPU time, by cumulative time")
        pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)
    for thread in WATCHED:
        n = sampler.samples[thread]
        if not n:
            continue
        print(f"\n{thread}: {n} busy samples; inclusive (share of busy samples)")
        for key, count in sampler.inclusive[thread].most_common(args.top):
            print(f"  {100 * count / n:5.1f}%  {key}")
        print(f"{thread}: on top")
        for key, count in sampler.top[thread].most_common(12):
            print(f"  {100 * count / n:5.1f}%  {key}")


if __name__ == "__main__":
    main()
