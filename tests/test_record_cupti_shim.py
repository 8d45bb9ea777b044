"""The CUDA shim without a GPU: a C harness of ours includes workbench/attach/cupti_injection.c.
Kernel names: its `take()` gets fabricated kernel records (CUPTI's own record layout, from the
toolkit's headers), the same names at several addresses and more addresses than the shim's
by-pointer table has slots; each record's name id must lead to its own name, and each name be
sent once. The pool of zeroed buffers (WORKBENCH_RECORD_BUFFER_POOL): a buffer given back with
bytes written comes out again zeroed, and no more than the pool's size are kept. Kernels by
their launches (`--cuda-mode launches`, `sampled`): the shim against a fake CUPTI of ours
(tests/programs/fake_cupti.c), which plays a program's launches through the callbacks the shim
enabled and fails the calls it is told to."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

from workbench.attach.build import HERE, _record_layouts, cupti_paths

HARNESS = r"""
#include SHIM
#include <stdio.h>

static int pool_check(void) {
    buffer_bytes = 1u << 16;
    pool_size = 2;
    uint8_t *a = pool_take(), *b = pool_take(), *c = pool_take();
    for (size_t i = 0; i < buffer_bytes; i++)
        if (a[i] || b[i] || c[i]) return printf("fresh buffer not zeroed\n"), 1;
    memset(a, 0xab, 1000);
    memset(b, 0xcd, buffer_bytes);
    memset(c, 0xef, 10);
    pool_give(a, 1000);
    pool_give(b, buffer_bytes);
    pool_give(c, 10); /* the pool is full: freed */
    printf("kept %u\n", pool_count);
    uint8_t *d = pool_take(), *e = pool_take();
    int reused = (d == a || d == b) && (e == a || e == b) && d != e;
    for (size_t i = 0; i < buffer_bytes; i++)
        if (d[i] || e[i]) return printf("reused buffer not zeroed at %zu\n", i), 1;
    printf("reused %d\n", reused);
    return 0;
}

int main(int argc, char **argv) {
    if (strcmp(argv[1], "pool") == 0) return pool_check();
    int distinct = atoi(argv[1]), copies = atoi(argv[2]), passes = atoi(argv[3]);
    size_t cap = 1u << 16, tcap = 1u << 13;
    size_t size = WB_DATA_OFFSET + cap * sizeof(struct wb_event) + tcap * sizeof(struct wb_text);
    struct wb_header *h = aligned_alloc(4096, size);
    memset(h, 0, size);
    h->magic = WB_MAGIC; h->version = WB_VERSION; h->capacity = cap; h->text_capacity = tcap;
    h->event_bytes = sizeof(struct wb_event); h->text_bytes = sizeof(struct wb_text);
    wb_attach(h, 0);
    int n = distinct * copies + 1;
    char (*text)[96] = calloc((size_t)n, sizeof *text);
    WB_KERNEL_T *records = calloc((size_t)n, sizeof *records);
    for (int i = 0; i < n; i++) { /* name k at `copies` addresses, interleaved; the last has none */
        records[i].kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        records[i].correlationId = (uint32_t)i;
        if (i < n - 1) {
            snprintf(text[i], sizeof text[i], "void kernel_%d<float>(float*, int)", i % distinct);
            records[i].name = text[i];
        }
    }
    for (int pass = 0; pass < passes; pass++)
        for (int i = 0; i < n; i++) take((CUpti_Activity *)&records[i]);
    for (uint64_t p = 0; p < atomic_load(&h->head); p++)
        printf("E %u %llu\n", wb_events[p].tid, (unsigned long long)wb_events[p].obj);
    for (uint64_t p = 0; p < atomic_load(&h->text_head); p++)
        printf("T %llu %.*s\n", (unsigned long long)wb_texts[p].id, (int)wb_texts[p].len, wb_texts[p].text);
    printf("dropped %llu %llu\n", (unsigned long long)h->dropped, (unsigned long long)h->text_dropped);
    return 0;
}
"""


def _build_inputs() -> tuple[list[Path], Path, list[str]]:
    """CUPTI's include and library folders and the record layouts' defines, or a skip."""
    found = cupti_paths()
    if found is None or shutil.which("gcc") is None:
        pytest.skip("no CUPTI headers and library, or no gcc")
    includes, libs = found
    layouts = _record_layouts(includes[0] / "cupti_activity.h")
    assert not isinstance(layouts, str), layouts
    return includes, libs, list(layouts)


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    includes, libs, layouts = _build_inputs()
    work = tmp_path_factory.mktemp("cupti")
    source, exe = work / "harness.c", work / "harness"
    source.write_text(HARNESS)
    shim = HERE / "cupti_injection.c"
    subprocess.run(["gcc", "-O1", "-std=gnu11", f'-DSHIM="{shim}"', f"-I{HERE}",
                    *(f"-I{i}" for i in includes), *layouts, str(source), "-o", str(exe), f"-L{libs}",
                    "-lcupti", f"-Wl,-rpath,{libs}", "-lpthread", "-ldl"], check=True, timeout=120)
    return exe


def test_kernel_names_by_pointer_and_by_text(harness: Path) -> None:
    distinct, copies, passes = 1500, 3, 2  # 4,501 addresses: more than the 4,096 slots by pointer
    out = subprocess.run([str(harness), str(distinct), str(copies), str(passes)], capture_output=True,
                         text=True, check=True, timeout=60).stdout.splitlines()
    assert out[-1] == "dropped 0 0"
    events = [tuple(int(v) for v in line.split()[1:]) for line in out if line.startswith("E ")]
    texts: dict[int, list[str]] = {}
    for line in out:
        if line.startswith("T "):
            _, said, name = line.split(" ", 2)
            texts.setdefault(int(said), []).append(name)
    records = distinct * copies + 1
    assert [c for c, _ in events] == list(range(records)) * passes
    for correlation, ident in events:
        last = correlation == records - 1  # the record without a name
        name = "?" if last else f"void kernel_{correlation % distinct}<float>(float*, int)"
        assert texts.get(ident) == [name], (correlation, ident, texts.get(ident))
    assert len(texts) == distinct + 1  # each name sent once, under one id


def test_buffers_zeroed_for_cupti_and_kept_up_to_the_pool_size(harness: Path) -> None:
    done = subprocess.run([str(harness), "pool"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
    assert done.stdout.split() == ["kept", "2", "reused", "1"]


# -- kernels by their launches (launches.h), against a fake CUPTI -----------------------------
# tests/programs/fake_cupti.c defines every CUPTI call the shim makes and plays a program that
# launches kernels through the callbacks the shim enabled; it prints what it did and what the
# shim sent, so each count is checked against the program's own account.
LAUNCH, WINDOW, KERNEL, NOTE = 23, 24, 16, 5
RUNTIME_LAUNCH, RUNTIME_GRAPH, DRIVER_LAUNCH = (0, 211), (0, 311), (1, 307)  # cupti_*_cbid.h


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    includes, _, layouts = _build_inputs()
    exe = tmp_path_factory.mktemp("fake_cupti") / "fake_cupti"
    source = Path(__file__).parent / "programs" / "fake_cupti.c"
    subprocess.run(["gcc", "-O1", "-std=gnu11", f'-DSHIM="{HERE / "cupti_injection.c"}"', f"-I{HERE}",
                    *(f"-I{i}" for i in includes), *layouts, str(source), "-o", str(exe), "-rdynamic",
                    "-lpthread", "-ldl"], check=True, timeout=120)
    return exe


@dataclass
class Played:
    launches: list[tuple[int, int, int, str]]  # (tid, correlation, sampled, kernel) as the program made them
    events: list[tuple[int, ...]]  # (kind, flags, tid, obj, aux, t0, t1) as the shim sent them
    strings: dict[int, str]
    notes: list[str]
    callbacks: set[tuple[int, int]]
    kernel_enables: int

    def of(self, kind: int) -> list[tuple[int, ...]]:
        return [e for e in self.events if e[0] == kind]


def play(exe: Path, mode: str, threads: int, launches: int, names: int, spin_us: float, sample: str = "",
         fail: str = "") -> Played:
    env = {"PATH": "/usr/bin:/bin", "WORKBENCH_RECORD_CUDA_MODE": mode, "WORKBENCH_RECORD_SAMPLE_MS": sample,
           "FAKE_FAIL": fail, "WORKBENCH_RECORD_CUDA_KINDS": "kernel,memcpy"}
    done = subprocess.run([str(exe), str(threads), str(launches), str(names), str(spin_us)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "dropped 0 0"
    played = Played([], [], {}, [], set(), -1)
    for line in lines:
        tag, _, rest = line.partition(" ")
        if tag == "L":
            tid, correlation, sampled, kernel = rest.split(" ", 3)
            played.launches.append((int(tid), int(correlation), int(sampled), kernel))
        elif tag == "E":
            played.events.append(tuple(int(v) for v in rest.split()))
        elif tag == "T":
            kind, ident, text = [*rest.split(" ", 2), ""][:3]
            if int(kind) == NOTE:
                played.notes.append(text)
            else:
                played.strings[int(ident)] = text
        elif tag == "C":
            domain, cbid = rest.split()
            played.callbacks.add((int(domain), int(cbid)))
        elif tag == "K":
            played.kernel_enables = int(rest)
    return played


def test_launches_counted_by_kernel_and_thread_with_no_kernel_record(fake: Path) -> None:
    from workbench.attach import ring as rg
    from workbench.attach.convert import Converter, as_array
    from workbench.clock import FakeClock
    from workbench.model import roles as rl
    from workbench.trace.container import Trace
    from workbench.trace.recorder import Recorder

    played = play(fake, "launches", threads=3, launches=400, names=5, spin_us=0)
    assert len(played.launches) == 1200
    sent = played.of(LAUNCH)
    # Each launch once, the driver's launch inside every other runtime one not sent again.
    assert sorted(e[4] & 0xFFFFFFFF for e in sent) == sorted(c for _, c, _, _ in played.launches)
    assert Counter(e[2] for e in sent) == Counter(t for t, _, _, _ in played.launches)
    assert Counter(played.strings[e[3]] for e in sent) == Counter(k for _, _, _, k in played.launches)
    assert {played.strings[e[4] >> 32] for e in sent} == {"cudaLaunchKernel_v7000"}
    assert all(e[1] == 0 and e[5] <= e[6] for e in sent)  # runtime calls, each timed
    assert not played.of(KERNEL) and played.kernel_enables == 0
    # The launch calls' callbacks alone: not host functions, copies or allocations.
    assert played.callbacks == {RUNTIME_LAUNCH, RUNTIME_GRAPH, DRIVER_LAUNCH}
    assert not played.notes

    # The recorder's side: a launch call on its thread's CUDA track, role launch, never a kernel.
    recorder = Recorder(FakeClock(), nvtx=False)
    converter = Converter(recorder, main_pid=0)
    texts = [rg.Text(rg.T_STRING, 0, 0, i, 0, s) for i, s in played.strings.items()]
    converter.feed(rg.Drained(as_array([(e[0], e[1], e[2], 0, *e[3:]) for e in played.events]), texts))
    trace = Trace.from_recorder(recorder)
    assert rl.role_counts(trace) == {"launch": 1200}
    assert converter.counts["kernel launches"] == 1200
    assert converter.launches == Counter(k for _, _, _, k in played.launches)
    tid, correlation, _, kernel = played.launches[0]
    attrs = [a or {} for a in trace.spans.attrs]
    first = [i for i, a in enumerate(attrs) if a["correlation"] == correlation]
    assert len(first) == 1 and attrs[first[0]]["kernel"] == kernel
    assert trace.strings.values[trace.spans.track[first[0]]] == f"cuda/thread/{tid}"


def test_sampled_windows_say_when_kernels_were_recorded(fake: Path) -> None:
    from workbench.attach import ring as rg
    from workbench.attach.convert import Converter, as_array
    from workbench.clock import FakeClock
    from workbench.model import roles as rl
    from workbench.model import tracks as tr
    from workbench.trace.container import Trace
    from workbench.trace.recorder import Recorder

    # One launching thread (the machine's other core is the duty cycle's): ~80 ms of launches.
    played = play(fake, "sampled", threads=1, launches=4000, names=3, spin_us=20, sample="2/5")
    windows = played.of(WINDOW)
    assert len(windows) >= 3 and [w[3] for w in windows] == list(range(len(windows)))
    assert all(w[5] < w[6] for w in windows) and all(a[6] <= b[5] for a, b in pairwise(windows))
    sampled = {c for _, c, s, _ in played.launches if s}
    assert 0 < len(sampled) < len(played.launches)
    assert {e[2] for e in played.of(KERNEL)} == sampled  # a kernel record of each launch made while on
    assert len(played.of(LAUNCH)) == len(played.launches)  # every launch counted, sampled or not
    assert played.kernel_enables == len(windows)
    by_correlation = {e[4] & 0xFFFFFFFF: e for e in played.of(LAUNCH)}
    for _, correlation, was_sampled, _ in played.launches:
        start, end = by_correlation[correlation][5:7]
        inside = any(w[5] <= start and end <= w[6] for w in windows)
        # Records are switched on and off inside the CUPTI calls, whose time the window's aux holds.
        near = any(end >= w[5] - w[4] and start <= w[6] + w[4] for w in windows)
        assert (not inside or was_sampled) and (not was_sampled or near), (correlation, was_sampled)

    recorder = Recorder(FakeClock(), nvtx=False)
    converter = Converter(recorder, main_pid=0)
    texts = [rg.Text(rg.T_STRING, 0, 0, i, 0, s) for i, s in played.strings.items()]
    converter.feed(rg.Drained(as_array([(e[0], e[1], e[2], 0, *e[3:]) for e in played.events]), texts))
    trace = Trace.from_recorder(recorder)
    counts = rl.role_counts(trace)
    assert counts["kernel"] == len(sampled) and counts["launch"] == len(played.launches)
    assert int(trace.span_mask(track=tr.SAMPLED_TRACK).sum()) == len(windows)
    assert converter.counts["sampling windows"] == len(windows)


@pytest.mark.parametrize(("mode", "fail", "said"), [
    ("launches", "subscribe", "kernel launches not recorded: cuptiSubscribe"),
    ("launches", "enable_callback", "no launch callback could be enabled"),
    ("sampled", "kernel_enable", "cuptiActivityEnable (sampling stopped)"),
    ("sampled", "kernel_disable", "cuptiActivityDisable (kernel records stay on to the end)"),
])
def test_cupti_refusing_is_noted_and_nothing_crashes(fake: Path, mode: str, fail: str, said: str) -> None:
    played = play(fake, mode, threads=2, launches=300, names=2, spin_us=20, sample="1/3", fail=fail)
    assert len(played.launches) == 600
    assert any(said in n and "fake CUPTI error" in n for n in played.notes), played.notes
    launches, windows, kernels = played.of(LAUNCH), played.of(WINDOW), played.of(KERNEL)
    if fail in ("subscribe", "enable_callback"):
        assert not launches and not kernels
    else:
        assert len(launches) == 600
    if fail == "kernel_enable":
        assert not windows and not kernels
    if fail == "kernel_disable":  # switched on once, never off: one window, to the end
        (window,) = windows
        assert window[6] >= max(e[6] for e in launches)
        assert {e[2] for e in kernels} == {c for _, c, s, _ in played.launches if s}
        first = min(e[5] for e in launches if e[5] >= window[5])
        assert all(s for _, c, s, _ in played.launches
                   if next(e for e in launches if e[4] & 0xFFFFFFFF == c)[5] >= first)


def test_the_default_mode_subscribes_to_nothing_and_an_unknown_mode_is_noted(fake: Path) -> None:
    played = play(fake, "activity", threads=1, launches=50, names=2, spin_us=0)
    assert not played.callbacks and not played.of(LAUNCH) and played.kernel_enables == 1
    assert {e[2] for e in played.of(KERNEL)} == {c for _, c, _, _ in played.launches}
    odd = play(fake, "sometimes", threads=1, launches=50, names=2, spin_us=0)
    assert odd.kernel_enables == 1 and not odd.of(LAUNCH)
    assert any("sometimes is not one of activity, launches, sampled" in n for n in odd.notes)


def test_a_sampled_recording_end_to_end_through_the_recorder(fake: Path, tmp_path: Path) -> None:
    """The fake as the recorded program: the recorder's ring, drained while it runs, into a trace
    whose counts are the program's own, with its notes and a verdict judged in the windows."""
    from workbench.analysis.verdict import diagnose
    from workbench.attach.build import Shims
    from workbench.attach.session import Session
    from workbench.model import roles as rl
    from workbench.model import tracks as tr

    shims = Shims(tmp_path / "no-lock-shim.so", False, tmp_path / "the-fake-is-its-own-cupti.so")
    session = Session([str(fake), "2", "1500", "3", "20"], shims, preload=False, cuda_mode="sampled",
                      sample=(2, 5), cuda_kinds=("kernel",), env={"PATH": "/usr/bin:/bin"})
    out = tmp_path / "out.txt"
    try:
        with out.open("w") as sink:
            session.start(stdout=sink)
            assert session.wait() == 0
        trace = session.trace()
    finally:
        session.close()
    launches = [line.split(" ", 4) for line in out.read_text().splitlines() if line.startswith("L ")]
    assert len(launches) == 3000
    record = trace.meta["record"]
    assert record["cuda_mode"] == "sampled" and record["dropped"] == 0 and record["lost"] == 0
    assert record["launches_by_kernel"] == dict(Counter(k for *_, k in launches))
    counts = rl.role_counts(trace)
    sampled = sum(1 for _, _, _, s, _ in launches if s == "1")
    assert counts["launch"] == 3000 and counts["kernel"] == sampled > 0
    threads = Counter(f"cuda/thread/{t}" for _, t, *_ in launches)
    text = trace.strings.values
    on = Counter(text[t] for t in trace.spans.track[rl.role_mask(trace, "launch")].tolist())
    assert on == threads
    windows = int(trace.span_mask(track=tr.SAMPLED_TRACK).sum())
    (said,) = [n for n in record["notes"] if "--cuda-mode sampled" in n]
    assert f"{sampled} kernels recorded on the GPU in {windows} windows" in said
    assert "3000 kernel launches (3 kernels) timed on the host" in said
    verdict = diagnose(trace)
    assert "sampled in" in verdict.headline and verdict.device[0].sampled_windows > 0
