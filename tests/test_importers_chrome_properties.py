"""Whatever a Chrome trace file holds, the importer gives a trace or ImportFailed, nothing else."""

import gzip
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.importers import ImportFailed, parse_chrome
from workbench.importers.chrome import load_chrome
from workbench.model import tracks as tr
from workbench.model.roles import role_counts

SETTINGS = settings(max_examples=int(os.environ.get("WB_EXAMPLES", 80)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
KINETO = Path(__file__).parent / "data" / "kineto" / "critical_path_cuda_event_sync_event_sync_trace.json.gz"

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)
times = st.one_of(st.integers(-(2**64), 2**64), st.floats(allow_nan=True, allow_infinity=True),
                  st.floats(1.6e15, 1.8e15), st.sampled_from([0, 1, 1.5, "3", None, [], 1e17, 1.0000001e17]))
phases = st.one_of(st.sampled_from([*"XBEbenSTpFstfiIRPCMOND", "", "xx"]), values)
cats = st.sampled_from(["kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cpu_op",
                        "gpu_user_annotation", "cuda_sync", "ac2g", "user_annotation", None, 3, ["a"]])
names = st.one_of(st.sampled_from(["Memcpy HtoD (Pageable -> Device)", "Memcpy XtoY", "Memset (Device)",
                                   "ProfilerStep#1", "thread_name", "process_name", "thread_sort_index",
                                   "cudaLaunchKernel", "k"]), values)
args = st.one_of(values, st.fixed_dictionaries({}, optional={
    "device": values | st.integers(-2, 3), "stream": values | st.integers(-2, 9), "correlation": values,
    "name": values, "sort_index": values, "partition": values, "worker": values, "bytes": values}))
events = st.one_of(values, st.fixed_dictionaries({"ph": phases}, optional={
    "ts": times, "dur": times, "pid": st.integers(-2, 3) | values, "tid": st.integers(-2, 3) | values,
    "name": names, "cat": cats, "id": st.integers(0, 3) | values, "id2": values, "args": args, "bp": values,
    "scope": values, "s": values}))
documents = st.tuples(st.lists(events, max_size=25), st.booleans(), st.dictionaries(
    st.sampled_from(["otherData", "baseTimeNanoseconds", "displayTimeUnit", "x"]), values, max_size=2))


def _survives(text: str, source: str = "prop.json") -> None:
    try:
        trace = parse_chrome(text, source)
    except ImportFailed as err:
        assert str(err).startswith(source)
        return
    n = len(trace.spans)
    assert len(trace.spans.track) == len(trace.spans.attrs) == n
    assert (trace.spans.end_ns >= trace.spans.start_ns).all()
    role_counts(trace)
    for track in trace.tracks():
        assert tr.build(tr.parse(track)) == track


@SETTINGS
@given(documents, st.integers(0, 10**6))
def test_random_event_lists(doc, cut):
    items, wrapped, members = doc
    text = json.dumps({**members, "traceEvents": items} if wrapped else items)
    _survives(text)
    _survives(text[: cut % (len(text) + 1)])


@SETTINGS
@given(st.binary(max_size=300), st.booleans())
def test_random_bytes(data, zipped):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "random.json"
        path.write_bytes(gzip.compress(data) if zipped else data)
        try:
            load_chrome(path)
        except ImportFailed as err:
            assert str(path) in str(err)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 3000), st.binary(min_size=1, max_size=3))
def test_broken_real_gzip(at, junk):
    raw = KINETO.read_bytes()
    with tempfile.TemporaryDirectory() as folder:
        for i, data in enumerate((raw[:at], raw[:at] + junk + raw[at + len(junk):])):
            path = Path(folder) / f"broken{i}.json.gz"
            path.write_bytes(data)
            try:
                load_chrome(path)
            except ImportFailed as err:
                assert str(path) in str(err)
