"""A `.wbtrace` from anyone: bounded cost, every field checked, only TraceFormatError out."""

import contextlib
import io
import json
import time
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.cli import main
from workbench.config import RunConfig
from workbench.pipeline.run import run_pipeline
from workbench.trace import TraceFormatError, load, save, store_read


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """A small CPU run saved by the workbench, as the members of its archive."""
    trace = run_pipeline(RunConfig(backend="cpu", partitions=2, log2_constraints=5, synth_terms=3)).trace
    path = save(trace, tmp_path_factory.mktemp("real") / "run.wbtrace")
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


def npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def write(path, entries, compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in entries.items():  # a fixed date: the same entries give the same bytes
            z.writestr(zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0)), data, compression)
    return path


def header_of(entries):
    return json.loads(np.load(io.BytesIO(entries["header.npy"])).tobytes())


def with_header(entries, header):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return {**entries, "header.npy": npy(np.frombuffer(text, np.uint8))}


def test_the_real_run_loads(real, tmp_path):
    trace = load(write(tmp_path / "t.wbtrace", real))
    assert len(trace.spans) == len(np.load(io.BytesIO(real["spans.start_ns.npy"])))


def test_a_column_declaring_more_than_the_file_holds_is_refused_unread(real, tmp_path, monkeypatch):
    monkeypatch.setattr(store_read, "FLOOR", 1 << 20)
    zeros = np.zeros(2**21, np.int64)  # 16 MiB of zeros deflate to about 16 KiB
    bomb = write(tmp_path / "bomb.wbtrace", {**real, "spans.partition.npy": npy(zeros)})
    with pytest.raises(TraceFormatError, match=r"bomb\.wbtrace is damaged: its members declare \d+ bytes"):
        load(bomb)
    # The npy header may claim 2^30 rows while the zip member holds a few bytes: believed by neither.
    header = np.lib.format.header_data_from_array_1_0(np.zeros(2**30, np.int32))
    fake = io.BytesIO()
    np.lib.format.write_array_header_1_0(fake, header)
    started = time.monotonic()
    with pytest.raises(TraceFormatError, match=r"column spans\.worker declares 1073741824 rows of <i4 but"):
        load(write(tmp_path / "lying.wbtrace", {**real, "spans.worker.npy": fake.getvalue() + b"\0" * 16}))
    assert time.monotonic() - started < 1


def _header_case(mutate):
    def apply(entries):
        header = header_of(entries)
        mutate(header)
        return with_header(entries, header)
    return apply


def _column_case(name, value):
    return lambda entries: {**entries, f"{name}.npy": npy(value(np.load(io.BytesIO(entries[f"{name}.npy"]))))}


def _deep(depth):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


CRAFTED = {
    "version null": (_header_case(lambda h: h.update(version=None)), r"'version' is None"),
    "version a string": (_header_case(lambda h: h.update(version="1")), r"'version' is '1'"),
    "strings not strings": (_header_case(lambda h: h["strings"].__setitem__(0, 7)),
                            r"'strings' is not a list"),
    "config a list": (_header_case(lambda h: h.update(config=[1])), r"'config' is list"),
    "thread name a number": (_header_case(lambda h: h.update(thread_names={"t": 3})), r"'thread_names'"),
    "attrs missing": (_header_case(lambda h: h.pop("attrs")), r"'attrs' is missing"),
    "attr entry no key": (_header_case(lambda h: h["attrs"]["spans"].insert(0, {"kind": "int"})),
                          r"'attrs\.spans\[0\]' has no string 'key'"),
    "attr kind unknown": (_header_case(lambda h: h["attrs"]["spans"].insert(0, {"key": "k", "kind": "blob"})),
                          r"'attrs\.spans\[0\]' has kind 'blob'"),
    "meta nested deep": (_header_case(lambda h: h.update(meta={"x": _deep(100)})), r"header nests deeper"),
    "header nested past the recursion limit": (
        lambda e: with_header(e, b"[" * 100_000 + b"]" * 100_000), r"header nests deeper than 64 levels"),
    "short column": (_column_case("spans.worker", lambda c: c[:-1]),
                     r"column spans\.worker has \d+ rows, not"),
    "string dtype": (_column_case("spans.track", lambda c: c.astype("U3")), r"column spans\.track is <U3"),
    "floats for indices": (_column_case("spans.name", lambda c: c.astype(np.float64)),
                           r"column spans\.name holds float64, not int32"),
    "index past the string table": (_column_case("spans.track", lambda c: c + 10**6),
                                    r"column spans\.track holds \d+, outside 0\.\.\d+"),
    "end before start": (_column_case("spans.end_ns", lambda c: c - 10**15), r"span 0 ends before it starts"),
    "time near 2^63": (_column_case("spans.end_ns", lambda c: np.full_like(c, 2**63 - 5)),
                       r"column spans\.end_ns holds 9223372036854775803, outside"),
    "one time far away": (_column_case("instants.ts_ns", lambda c: c + 2**60), r"its times run from .* days"),
    "two-dimensional": (_column_case("spans.start_ns", lambda c: c.reshape(1, -1)),
                        r"column spans\.start_ns"),
    "column missing": (lambda e: {k: v for k, v in e.items() if k != "instants.ts_ns.npy"},
                       r"no column instants\.ts_ns"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_traces_are_refused_naming_the_field(case, real, tmp_path, capsys):
    mutate, message = CRAFTED[case]
    path = write(tmp_path / "crafted.wbtrace", mutate(dict(real)))
    with pytest.raises(TraceFormatError, match=r"crafted\.wbtrace .*" + message):
        load(path)
    assert main(["summary", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "crafted.wbtrace" in err and "Traceback" not in err


def _only_format_errors(path):
    with contextlib.suppress(TraceFormatError):
        load(path)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_real_traces_load_or_raise_only_trace_format_error(real, tmp_path, data):
    name = data.draw(st.sampled_from(sorted(real)))
    member = bytearray(real[name])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(member) - 1))
        member[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        member = member[: data.draw(st.integers(0, len(member)))]
    path = write(tmp_path / "m.wbtrace", {**real, name: bytes(member)}, zipfile.ZIP_STORED)
    _only_format_errors(path)
    whole = bytearray(path.read_bytes())
    at = data.draw(st.integers(0, len(whole) - 1))
    whole[at] ^= data.draw(st.integers(1, 255))
    path.write_bytes(bytes(whole))
    _only_format_errors(path)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                max_size=3), max_leaves=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["version", "strings", "config", "meta", "thread_names", "attrs", "format"]),
       value=JSON,
       column=st.sampled_from(["spans.start_ns", "instants.track", "counters.value", "spans.attr0.present"]),
       dtype=st.sampled_from(["i1", "u8", "f4", "?", "U2", "i8"]), rows=st.integers(0, 50))
def test_mutated_fields_and_columns_raise_only_trace_format_error(
    real, tmp_path, field, value, column, dtype, rows,
):
    header = header_of(real)
    header[field] = value
    _only_format_errors(write(tmp_path / "h.wbtrace", with_header(real, header)))
    values = np.arange(rows).astype(dtype)
    _only_format_errors(write(tmp_path / "c.wbtrace", {**real, f"{column}.npy": npy(values)}))


def test_a_hold_ending_far_past_the_run_counts_only_within_the_wall_time(real, tmp_path):
    from workbench.analysis.summary import summarize

    trace = load(write(tmp_path / "t.wbtrace", real))
    names = trace.strings.values
    holds = [i for i in range(len(trace.spans)) if names[trace.spans.name[i]] == "hold"
             and names[trace.spans.track[i]].startswith("mutex/")]
    assert holds
    trace.spans.end_ns[holds[0]] = trace.spans.start_ns[holds[0]] + 2**52  # within the limits, far past
    held = summarize(load(save(trace, tmp_path / "late.wbtrace"))).mutex_held_fraction
    assert 0 < held <= 1  # was 1.9e7: "mutex held 1939678604% of wall time"
