"""The verdict on a real nsys export of a plain CUDA program (no pipeline): it names no role
the trace lacks, and its headline says what the GPU waited for, with numbers this test
works out again itself, with SQL over the file and plain interval arithmetic."""

import re
import sqlite3
from pathlib import Path

import pytest

from workbench.analysis import diagnose
from workbench.importers.nsys import load_nsys
from workbench.model.pipeline import CUZK, PROVER
from workbench.render.verdict_text import render_verdict
from workbench.trace.container import Trace

EXPORT = Path(__file__).parent / "data" / "nsys" / "pipit_perlmutter-cloverleaf-cuda.sqlite"
TID = 0xFFFFFF
# Call names as this capture spells them, sorted the way the verdict's causes read them.
SYNC = {"cudaDeviceSynchronize_v3020", "cudaMemcpy_v3020", "cudaFree_v3020"}
LAUNCH = {"cudaLaunchKernel_v7000"}
WAITS = {"pthread_mutex_lock", "pthread_cond_wait", "pthread_cond_timedwait", "sem_wait", "sem_timedwait"}
SLEEPS = {"poll", "ppoll", "select", "epoll_wait", "nanosleep", "clock_nanosleep", "usleep", "sleep"}


@pytest.fixture(scope="module", params=["as imported", "with runtime calls"])
def loaded(request):
    trace = load_nsys(EXPORT)
    if request.param == "with runtime calls":
        trace = _with_runtime(trace)
    verdict = diagnose(trace)
    return trace, verdict, render_verdict(verdict, trace)


def _with_runtime(trace):
    """The export's CUDA runtime calls placed where the track grammar puts them
    (cuda/thread/<tid>), for an importer that does not read that table yet."""
    if any(t.startswith("cuda/") for t in trace.tracks()):
        return trace
    rows = [(s.track, s.name, s.start_ns, s.end_ns, s.partition, s.worker, s.attrs or None)
            for s in trace.iter_spans()]
    rows += [(f"cuda/thread/{tid}", name, start, end, -1, -1, None) for start, end, tid, name in _rows(
        f"SELECT r.start, r.end, r.globalTid & {TID}, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "JOIN StringIds s ON s.id = r.nameId")]
    return Trace.from_rows(rows, meta=trace.meta, thread_names=trace.thread_names)


def _rows(sql):
    with sqlite3.connect(f"file:{EXPORT}?mode=ro", uri=True) as conn:
        return conn.execute(sql).fetchall()


def _merge(pairs):
    out = []
    for s, e in sorted(p for p in pairs if p[1] > p[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [tuple(p) for p in out]


def _cut(a, b):
    """a minus b, both merged."""
    out, j = [], 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k, cur = j, s
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def _total(a):
    return sum(e - s for s, e in a)


def _expected(with_runtime):
    kernels = _rows("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL")
    copies = _rows("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    osrt = _rows(f"SELECT o.start, o.end, o.globalTid & {TID}, s.value FROM OSRT_API o "
                 "JOIN StringIds s ON s.id = o.nameId")
    runtime = _rows(f"SELECT r.start, r.end, r.globalTid & {TID}, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                    "JOIN StringIds s ON s.id = r.nameId") if with_runtime else []
    every = kernels + copies + [r[:2] for r in osrt] + [r[:2] for r in runtime]
    lo, hi = min(r[0] for r in every), max(r[1] for r in every)
    idle = _cut([(lo, hi)], _merge(kernels))
    driving = {r[2] for r in runtime}
    launchers = {r[2] for r in runtime if r[3] in LAUNCH}
    host = [(s, e, t, n) for s, e, t, n in osrt + runtime if t]
    states = [
        ("copy", copies),
        ("sync", [(s, e) for s, e, _, n in host if n in SYNC]),
        ("lock", [(s, e) for s, e, t, n in host if n in WAITS and (not driving or t in driving)]),
        ("launch", [(s, e) for s, e, t, n in host if t in launchers and n not in SYNC | WAITS | SLEEPS]),
        ("host", [(s, e) for s, e, t, n in host if t not in launchers and n not in SYNC | WAITS | SLEEPS]),
    ]
    causes = {}
    for cause, pairs in states:
        left = _cut(idle, _merge(pairs))
        causes[cause] = _total(idle) - _total(left)
        idle = left
    causes["nothing"] = _total(idle)
    return hi - lo, _total(_cut([(lo, hi)], _merge(kernels))), causes


def test_headline_says_what_the_gpu_waited_for(loaded):
    trace, verdict, _ = loaded
    with_runtime = any(t.startswith("cuda/") for t in trace.tracks())
    window, idle, causes = _expected(with_runtime)
    cause, ms = max(causes.items(), key=lambda kv: kv[1])
    m = re.match(r"The GPU idles (\d+)% of the ([\d.]+) s trace.*; the largest cause: (\d+)% (.+)\.$",
                 verdict.headline)
    assert m, verdict.headline
    assert int(m.group(1)) == round(100 * idle / window)
    assert float(m.group(2)) == pytest.approx(window / 1e9, abs=0.005)
    assert int(m.group(3)) == round(100 * ms / window)
    found = verdict.get(f"idle_{cause}")
    assert found is not None and found.numbers["idle_ms"] == pytest.approx(ms / 1e6, abs=1e-3)
    # Every cause the test finds is in the table, with the same milliseconds.
    table = {c.cause: c.ms for c in verdict.idle[0].causes}
    assert table == pytest.approx({k: v / 1e6 for k, v in causes.items() if v}, abs=1e-3)
    if cause in ("host", "launch"):
        # The thread named is the one whose calls the test finds most of the idle time in.
        assert "host thread 1701896" in verdict.headline


def test_verdict_names_no_role_the_trace_lacks(loaded):
    _, verdict, text = loaded
    words = ["worker", "partition", "mutex", "synthesis", *PROVER.phases, *CUZK.phases]
    said = " ".join([text, verdict.headline, *verdict.notes, *(f.sentence + f.title + f.suggestion
                                                              for f in verdict.findings)])
    # A note may name the roles that are absent ("no spans of role consumer, barrier_wait"): only there.
    said = re.sub(r"\brole (?:\w+(?:, | and | or )?)+", "role ", said)
    for word in dict.fromkeys(words):
        assert word not in said.lower(), word
    assert "None" not in said and "unknown:" not in said
    # What was not judged is named by the roles that are absent.
    assert any("role consumer" in n for n in verdict.notes)
    # No what-if: the pipeline replay cannot rebuild a program it knows nothing of.
    assert not verdict.pipeline and verdict.replay_error is None
    assert not any(f.predictions for f in verdict.findings)
    assert any(n.startswith("no what-if predictions: the pipeline replay needs") for n in verdict.notes)


def test_copies_by_kind_from_the_export(loaded):
    _, verdict, _ = loaded
    rows = _rows("SELECT copyKind, srcKind, count(*), sum(bytes), sum(end - start) "
                 "FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2")
    h2d = next(r for r in rows if r[0] == 1 and r[1] == 0)  # host to device from pageable memory
    k = verdict.copies.pageable_h2d
    assert (k.count, k.bytes) == (h2d[2], h2d[3])
    assert k.gbps == pytest.approx(h2d[3] / h2d[4], rel=1e-9)
    pageable = verdict.get("pageable_copies")
    assert pageable is not None and f"{h2d[2]} host-to-device copies" in pageable.sentence
    # No pinned copy and no link given: the verdict says it has nothing to compare with.
    assert verdict.copies.link is None and "--link-gbps" in pageable.sentence
    assert diagnose(load_nsys(EXPORT), _options(link_gbps=25.0)).copies.link_share(k) == pytest.approx(
        h2d[3] / h2d[4] / 25.0)


def test_lock_waits_from_the_export(loaded):
    _, verdict, _ = loaded
    names = ", ".join(f"'{n}'" for n in sorted(WAITS))
    ((count, total, longest),) = _rows("SELECT count(*), sum(o.end - o.start), max(o.end - o.start) "
                                       "FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId "
                                       f"WHERE s.value IN ({names})")
    w = verdict.locks
    assert (w.waits.count, w.waits.total_ms, w.waits.max_ms) == (count, pytest.approx(total / 1e6),
                                                                  pytest.approx(longest / 1e6))


def _options(**kw):
    from workbench.analysis import DiagnoseOptions
    return DiagnoseOptions(**kw)
