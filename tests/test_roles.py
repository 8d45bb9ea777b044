"""Span roles: the defaults from the track grammar, rules that override them, bad mappings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workbench.model import roles
from workbench.model.roles import RolesError, load_rules, parse_rules, role_counts, role_mask, span_roles
from workbench.model.tracks import (
    copy_track,
    cuda_track,
    gpu_track,
    lock_track,
    mutex_track,
    os_track,
    stream_track,
    sync_track,
)
from workbench.trace.container import Trace

CASES = [
    (stream_track(0, 7), "gemm_kernel", "kernel"),
    (copy_track(1), "h2d", "copy"),
    (cuda_track("thread/12"), "cudaDeviceSynchronize", "sync"),
    (cuda_track("thread/12"), "cudaStreamSynchronize", "sync"),
    (cuda_track("thread/12"), "cuStreamSynchronize_ptsz", "sync"),
    (cuda_track("thread/12"), "cudaMemcpy", "sync"),
    (cuda_track("thread/12"), "cudaMemcpyAsync", "runtime"),
    (cuda_track("thread/12"), "cudaEventQuery", "runtime"),  # returns at once
    (cuda_track("thread/12"), "cudaStreamWaitEvent", "runtime"),  # the stream waits, not the host
    (cuda_track("thread/12"), "cudaLaunchKernel", "launch"),
    (cuda_track("thread/12"), "cuLaunchKernelEx", "launch"),
    (cuda_track("thread/12"), "cudaMalloc", "runtime"),
    (os_track("thread/12"), "pthread_mutex_lock", "lock_wait"),
    (os_track("thread/12"), "pthread_cond_timedwait", "cond_wait"),
    (os_track("thread/12"), "sem_wait", "cond_wait"),
    (os_track("thread/12"), "read", "os_call"),
    (mutex_track(0), "hold", "lock_hold"),
    (mutex_track(0), "wait", "lock_wait"),
    (lock_track("queue"), "hold", "lock_hold"),
    ("barrier/worker1", "wait", "barrier_wait"),
    ("synth/3", "synthesis", "producer"),
    ("worker/0/prep", "prep_msm", "prep"),
    ("worker/0", "ntt_msm_h", "consumer"),
    ("thread/5", "ProfilerStep#12", "unit"),
    ("thread/5", "aten::mm", "host"),
    # The activity collector's records of host waits for the GPU (gpu<n>/sync) are waits too.
    (sync_track(0), "stream_synchronize", "sync"),
    (gpu_track(1, "sync"), "context_synchronize", "sync"),  # as the collector names it
    (gpu_track(0, "ranges"), "forward", "other"),
]


@pytest.mark.parametrize(("track", "name", "role"), CASES)
def test_default_roles_follow_the_track_grammar(track: str, name: str, role: str) -> None:
    assert roles.default_role(track, name) == role


def _trace(rows: list[tuple[str, str]], meta: dict | None = None) -> Trace:
    spans = [(t, n, 10 * i, 10 * i + 5, -1, -1, None) for i, (t, n) in enumerate(rows)]
    return Trace.from_rows(spans, meta=meta)


def test_span_roles_are_per_span_and_counted() -> None:
    rows = [(t, n) for t, n, _ in CASES] * 3
    trace = _trace(rows)
    codes = span_roles(trace)
    assert [roles.ROLE_NAMES[c] for c in codes] == [r for _, _, r in CASES] * 3
    expected: dict[str, int] = {}
    for _, _, r in CASES:
        expected[r] = expected.get(r, 0) + 3
    assert role_counts(trace) == expected
    assert role_mask(trace, "kernel", "copy").sum() == 6


def test_rules_override_defaults_and_the_users_go_first() -> None:
    trace = _trace([("thread/1", "gpu_lock_held"), ("thread/1", "other"), ("thread/2", "gpu_lock_held")])
    roles.with_rules(trace, parse_rules([{"role": "producer", "name": "gpu_lock_held"}]))
    roles.with_rules(trace, parse_rules({"role": [{"role": "lock_hold", "name": "gpu_lock_.*",
                                                   "track": "thread/1", "lock": "gpu0"}]}))
    names = [roles.ROLE_NAMES[c] for c in span_roles(trace)]
    assert names == ["lock_hold", "host", "producer"]
    rules = roles.trace_rules(trace)
    assert roles.lock_identity("thread/1", "gpu_lock_held", rules) == "gpu0"
    assert roles.lock_identity(mutex_track(3), "hold") == "gpu3"


def test_rules_survive_a_save_and_load(tmp_path) -> None:
    from workbench.trace import store

    trace = _trace([("thread/1", "step")])
    roles.with_rules(trace, parse_rules([{"role": "unit", "name": "step"}]))
    back = store.load(store.save(trace, tmp_path / "t.wbtrace"))
    assert roles.ROLE_NAMES[span_roles(back)[0]] == "unit"


@pytest.mark.parametrize(("data", "message"), [
    ({"rules": []}, "expected a list of rules"),
    ([{"role": "kernal", "name": "x"}], "rule 1: role 'kernal' is not one of"),
    ([{"role": "kernel"}], "give 'name' or 'track'"),
    ([{"role": "kernel", "name": "("}], "is not a regular expression"),
    ([{"role": "kernel", "name": "x", "colour": "red"}], "unknown key 'colour'"),
    ([{"role": "kernel", "name": 3}], "name must be a string"),
    (["kernel"], "a rule is a table"),
])
def test_bad_rules_name_the_rule_and_the_fault(data: object, message: str) -> None:
    with pytest.raises(RolesError, match=message.replace("(", r"\(")):
        parse_rules(data, "m.toml")


def test_mapping_files_in_toml_and_json(tmp_path) -> None:
    toml = tmp_path / "roles.toml"
    toml.write_text('[[role]]\nname = "lock_held"\nrole = "lock_hold"\nlock = "gpu0"\n')
    jsn = tmp_path / "roles.json"
    jsn.write_text(json.dumps([{"name": "lock_held", "role": "lock_hold", "lock": "gpu0"}]))
    assert load_rules(toml) == load_rules(jsn)
    bad = tmp_path / "bad.toml"
    bad.write_text("[[role]\n")
    with pytest.raises(RolesError, match=r"bad\.toml: not valid TOML"):
        load_rules(bad)
    with pytest.raises(RolesError, match="cannot read"):
        load_rules(tmp_path / "missing.toml")


def test_an_empty_trace_has_no_roles() -> None:
    trace = Trace.from_rows([])
    assert span_roles(trace).dtype == np.int8 and len(span_roles(trace)) == 0
    assert role_counts(trace) == {}


def test_roles_follow_new_rules_and_new_columns():
    from workbench.trace.container import SpanTable

    trace = _trace([(stream_track(0, 1), "k"), ("thread/1", "step")])
    assert [roles.ROLE_NAMES[c] for c in span_roles(trace)] == ["kernel", "host"]
    roles.with_rules(trace, parse_rules([{"role": "unit", "name": "step"}]))
    assert [roles.ROLE_NAMES[c] for c in span_roles(trace)] == ["kernel", "unit"]
    s = trace.spans
    swapped = np.array([s.track[1], s.track[0]], dtype=s.track.dtype)
    trace.spans = SpanTable(swapped, s.name.copy(), s.start_ns, s.end_ns, s.partition, s.worker, s.attrs)
    assert [roles.ROLE_NAMES[c] for c in span_roles(trace)] == ["host", "unit"]  # the rule matches any track
