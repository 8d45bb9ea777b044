"""Arbitrary and mutated input never crashes an importer: it gives a trace or a clear error."""

import json
import os

from cuzk_writer import daemon_log
from golden import case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.analysis import DiagnoseOptions, diagnose
from workbench.export.chrome import to_chrome_json
from workbench.importers import ImportFailed, load_any, parse_chrome, parse_cuzk_log
from workbench.trace.container import Trace

# WB_EXAMPLES=3000 for a longer hunt than CI's.
SETTINGS = settings(max_examples=int(os.environ.get("WB_EXAMPLES", 120)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
LOG = daemon_log(case("prep_bound"), noise=1, seed=5)
LOG_LINES = LOG.splitlines()
CHROME = to_chrome_json(case("prep_bound"))

cuzk_fragments = st.sampled_from([
    "CUZK_TIMING: ", "CUZK_NTT_H: ", "TIMELINE,", "prep_msm_ms=", "gpu_tid=0 ", "ntt_msm_h_ms=",
    "mutex_held_ms=", "total_start_fn_ms=", "tail_msm_ms=", "gpu_total_ms=", "batch_add_ms=",
    "barrier_wait_ms=", "pre_lock_cpu_ms=", "mutex_wait_ms=", "b_g2_msm_ms=", "GPU_END,", "GPU_START,",
    "SYNTH_START,", "partition=", "worker=", "gpu_ms=", "ms", "=", ",", " ", "\n", "-1", "0", "7",
    "99999999999", "job0,",
])


def _survives_cuzk(text: str) -> None:
    try:
        trace = parse_cuzk_log(text)
    except ImportFailed as err:
        assert "lines" in str(err)
        return
    assert isinstance(trace, Trace)
    diagnose(trace, DiagnoseOptions(whatif=False))


@SETTINGS
@given(st.text())
def test_arbitrary_text_as_a_cuzk_log(text):
    _survives_cuzk(text)


@SETTINGS
@given(st.lists(cuzk_fragments, max_size=60).map("".join))
def test_cuzk_shaped_garbage(text):
    _survives_cuzk(text)


@SETTINGS
@given(st.data())
def test_mutated_daemon_logs(data):
    lines = list(LOG_LINES)
    for _ in range(data.draw(st.integers(0, 12))):
        action = data.draw(st.sampled_from(["drop", "swap", "dup", "flip", "cut"]))
        i = data.draw(st.integers(0, len(lines) - 1))
        if action == "drop":
            del lines[i]
        elif action == "swap":
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "dup":
            lines.insert(i, lines[i])
        elif action == "flip" and lines[i]:
            k = data.draw(st.integers(0, len(lines[i]) - 1))
            lines[i] = lines[i][:k] + data.draw(st.characters()) + lines[i][k + 1:]
        elif action == "cut":
            lines = lines[:i]
        if not lines:
            break
    _survives_cuzk("\n".join(lines))
    # With whatif on as well: the replay must cope with whatever the grouping produced.
    try:
        trace = parse_cuzk_log("\n".join(lines))
    except ImportFailed:
        return
    diagnose(trace)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: (st.lists(children, max_size=5)
                      | st.dictionaries(st.text(max_size=6), children, max_size=5)),
    max_leaves=30,
)
events = st.fixed_dictionaries(
    {"ph": st.sampled_from(list("XBEbeiInRCMsfP")) | st.text(max_size=2)},
    optional={"ts": json_values | st.floats(-1e20, 1e20), "dur": json_values | st.floats(-1e20, 1e20),
              "pid": json_values, "tid": json_values, "name": json_values, "cat": json_values,
              "id": json_values, "args": json_values},
)


def _survives_chrome(text: str) -> None:
    try:
        trace = parse_chrome(text)
    except ImportFailed as err:
        assert str(err)
        return
    assert isinstance(trace, Trace)
    diagnose(trace, DiagnoseOptions(whatif=False))


@SETTINGS
@given(json_values)
def test_arbitrary_json(value):
    _survives_chrome(json.dumps(value))


@SETTINGS
@given(st.lists(events | json_values, max_size=25), st.booleans())
def test_arbitrary_trace_events(items, wrapped):
    _survives_chrome(json.dumps({"traceEvents": items} if wrapped else items))


@SETTINGS
@given(st.integers(0, len(CHROME)), st.text(max_size=3), st.integers(0, len(CHROME)))
def test_mutated_chrome_exports(at, insert, cut):
    _survives_chrome((CHROME[:at] + insert + CHROME[at:])[: max(cut, at)])


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_files(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("any") / "input"
    path.write_bytes(content)
    try:
        load_any(path)
    except ValueError as err:  # every importer's refusal is a ValueError with a message
        assert str(err)
