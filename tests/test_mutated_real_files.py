"""The real files of tests/data, mutated, fed to `load_any` and to the commands.

Each file is damaged the way files get damaged or crafted (bytes flipped, cut off; JSON
events with fields deleted or of another type; SQLite rows set to NULL or to the wrong type,
columns and tables dropped; log lines shuffled, garbled, cut; a trace's header fields and
column values swapped). The only outcomes allowed: a trace that meets the container's
invariants (tests/trace_checks.py) and that every command reads with exit 0, or our own
refusal (ImportFailed, TraceFormatError) naming the file in one line, exit 2.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import sqlite3
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import trace_members
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trace_checks import trace_faults

from workbench.cli import main
from workbench.importers import ImportFailed, load_any
from workbench.trace import TraceFormatError

DATA = Path(__file__).parent / "data"
NSYS = DATA / "nsys" / "pipit_perlmutter-cloverleaf-cuda.sqlite"
CHROME = sorted((DATA / "chrome").glob("*.json"))  # Chrome tracing, viztracer, hand-written edge cases
KINETO = sorted((DATA / "kineto").glob("*.json.gz"))
CUZK = DATA / "cuzk_seed" / "daemon.log"
WBTRACE = sorted((DATA / "whatif").glob("*.wbtrace"))  # written by real CPU runs
REFUSALS = (ImportFailed, TraceFormatError)
# WB_EXAMPLES=500 for a longer hunt than CI's.
EXAMPLES = int(os.environ.get("WB_EXAMPLES", 0))


def _settings(examples: int) -> settings:
    return settings(max_examples=EXAMPLES or examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


ODD = [None, True, False, "", "x", "12", "\x1b[31mred", -1, 0, 1.5, -(2**63), 2**63, 2**64, 10**30,
       1e308, -1e308, float("inf"), float("nan"), [], [1, 2], {}, {"a": {"b": [None]}}]
odd_values = st.sampled_from(ODD)


def settle(path: Path, commands: tuple[tuple[str, ...], ...] = ()) -> bool:
    """Load the file and run the commands on it; True when it loaded."""
    try:
        trace = load_any(path)
    except REFUSALS as err:
        said = str(err)
        assert said.strip() and "\n" not in said.strip(), said
        assert str(path) in said, said  # the message names the file
        loaded = False
    else:
        assert trace_faults(trace) == [], trace_faults(trace)
        loaded = True
    for command in commands:
        run(path, command, loaded)
    return loaded


def run(path: Path, command: tuple[str, ...], loaded: bool) -> None:
    argv = [*command, str(path)]
    if command[0] in ("export", "report"):
        argv += ["-o",
                 str(path.with_name(f"out-{command[-1]}.{'html' if command[0] == 'report' else 'out'}"))]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    said = err.getvalue()
    assert "internal error" not in said and "Traceback" not in said, (argv, said)
    if not loaded or rc == 2:  # a refusal is ours, in one line (export cuzk of a trace of no pipeline)
        assert rc == 2 and said.count("\n") == 1 and said.startswith("workbench: error: "), (argv, rc, said)
        if not loaded:
            assert str(path) in said, said
    else:
        assert rc == 0, (argv, rc, said)


COMMANDS = (("summary",), ("diagnose",), ("export", "chrome"), ("export", "cuzk"))


def _scratch(name: str) -> tuple[tempfile.TemporaryDirectory, Path]:
    folder = tempfile.TemporaryDirectory(prefix="wb-mutated-")
    return folder, Path(folder.name) / name


def _flip(data: bytes, draw) -> bytes:
    raw = bytearray(data)
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(raw) - 1))
        raw[at] ^= draw(st.integers(1, 255))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(raw)))
        raw[at:at] = draw(st.binary(min_size=1, max_size=8))
    if draw(st.booleans()):
        raw = raw[: draw(st.integers(1, len(raw)))]
    return bytes(raw)


# -- bytes of every file, flipped and cut ------------------------------------------------------

@_settings(15)
@given(st.data())
def test_any_real_file_with_bytes_flipped_or_cut(data):
    source = data.draw(st.sampled_from([NSYS, CUZK, *CHROME, *KINETO, *WBTRACE]))
    folder, path = _scratch(source.name)
    with folder:
        path.write_bytes(_flip(source.read_bytes(), data.draw))
        settle(path, COMMANDS[:2])


# -- Chrome, viztracer and Kineto JSON: events edited -------------------------------------------

def _events(doc):
    if isinstance(doc, dict):
        return doc.setdefault("traceEvents", [])
    return doc


def _mutate_json(doc, draw):
    events = _events(doc)
    for _ in range(draw(st.integers(1, 8))):
        if not events:
            break
        i = draw(st.integers(0, len(events) - 1))
        event = events[i]
        action = draw(st.sampled_from(["delete field", "swap type", "drop event", "duplicate", "swap events",
                                       "end before start", "top level"]))
        if action == "drop event":
            del events[i]
        elif action == "duplicate":
            events.insert(i, json.loads(json.dumps(event)))
        elif action == "swap events":
            j = draw(st.integers(0, len(events) - 1))
            events[i], events[j] = events[j], events[i]
        elif action == "top level" and isinstance(doc, dict):
            key = draw(st.sampled_from(sorted(doc.keys() - {"traceEvents"}) or ["otherData"]))
            doc[key] = draw(odd_values)
        elif isinstance(event, dict) and event:
            key = draw(st.sampled_from(sorted(event)))
            if action == "delete field":
                del event[key]
            elif action == "end before start" and isinstance(event.get("ts"), (int, float)):
                dur = event.get("dur")
                event["dur"] = -abs(dur) if isinstance(dur, (int, float)) and dur else -1
            elif isinstance(event[key], dict) and event[key] and draw(st.booleans()):
                inner = draw(st.sampled_from(sorted(event[key])))
                event[key][inner] = draw(odd_values)  # args: device, stream, correlation, ...
            else:
                event[key] = draw(odd_values)
    return doc


@_settings(20)
@given(st.data())
def test_chrome_and_viztracer_json_with_events_edited(data):
    source = data.draw(st.sampled_from(CHROME))
    try:
        doc = json.loads(source.read_text())
    except ValueError:  # the trailing-comma edge case is not JSON to Python: bytes only
        return
    folder, path = _scratch(source.name)
    with folder:
        path.write_text(json.dumps(_mutate_json(doc, data.draw)))
        settle(path, COMMANDS[:2] if data.draw(st.booleans()) else ())


@_settings(12)
@given(st.data())
def test_kineto_json_gz_with_events_edited(data):
    source = data.draw(st.sampled_from(KINETO))
    doc = _mutate_json(json.loads(gzip.decompress(source.read_bytes())), data.draw)
    folder, path = _scratch(source.name)
    with folder:
        raw = gzip.compress(json.dumps(doc).encode())
        path.write_bytes(_flip(raw, data.draw) if data.draw(st.booleans()) else raw)
        settle(path, COMMANDS[:2] if data.draw(st.booleans()) else ())


# -- the nsys export: rows, columns, tables edited ----------------------------------------------

NSYS_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
               "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "OSRT_API", "StringIds", "ThreadNames",
               "TARGET_INFO_GPU", "TARGET_INFO_CUDA_STREAM", "TARGET_INFO_SESSION_START_TIME", "PROCESSES")


def _columns() -> dict[str, list[str]]:
    with contextlib.closing(sqlite3.connect(f"file:{NSYS}?mode=ro", uri=True)) as conn:
        return {t: [row[1] for row in conn.execute(f"PRAGMA table_info({t})")] for t in NSYS_TABLES}


COLUMNS = _columns()
CELLS = st.sampled_from(["NULL", "'text'", "X'00ff'", "''", str(2**63 - 1), str(-(2**63)), "-1", "0", "1.5",
                         "1e300", "'\x1b]0;title\x07'", "CAST(X'ff61' AS TEXT)"])


def _mutate_sqlite(path: Path, draw) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for _ in range(draw(st.integers(1, 6))):
            table = draw(st.sampled_from(NSYS_TABLES))
            column = draw(st.sampled_from(COLUMNS[table]))
            action = draw(st.sampled_from(["cell", "cell", "cell", "column cells", "drop column",
                                           "drop table",
                                           "delete rows", "swap times", "rename column"]))
            row = f"rowid = (SELECT rowid FROM {table} LIMIT 1 OFFSET {draw(st.integers(0, 50))})"
            sql = {
                "cell": f"UPDATE {table} SET {column} = {draw(CELLS)} WHERE {row}",
                "column cells": f"UPDATE {table} SET {column} = {draw(CELLS)} WHERE rowid % 7 = 0",
                "drop column": f"ALTER TABLE {table} DROP COLUMN {column}",
                "drop table": f"DROP TABLE {table}",
                "delete rows": f"DELETE FROM {table} WHERE rowid % {draw(st.integers(2, 5))} = 0",
                "swap times": f"UPDATE {table} SET start = end, end = start WHERE {row}",
                "rename column": f"ALTER TABLE {table} RENAME COLUMN {column} TO {column}_old",
            }[action]
            with contextlib.suppress(sqlite3.Error):  # a dropped table, a column sqlite keeps: next one
                conn.execute(sql)
        conn.commit()


@_settings(8)
@given(st.data())
def test_nsys_export_with_rows_columns_and_tables_edited(data):
    folder, path = _scratch("export.sqlite")
    with folder:
        shutil.copyfile(NSYS, path)
        _mutate_sqlite(path, data.draw)
        settle(path, COMMANDS[:2] if data.draw(st.booleans()) else ())


# -- the cuzk log: lines shuffled, garbled, cut ---------------------------------------------------

LINES = CUZK.read_text().splitlines()


def _mutate_log(draw) -> str:
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 15))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["drop", "swap", "dup", "garble", "number", "field", "shuffle", "cut"]))
        line = lines[i]
        if action == "drop":
            del lines[i]
        elif action == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "dup":
            lines.insert(i, line)
        elif action == "garble" and line:
            k = draw(st.integers(0, len(line) - 1))
            lines[i] = line[:k] + draw(st.text(min_size=1, max_size=3)) + line[k + 1:]
        elif action == "number":  # a figure made huge, negative, or cut
            digits = [k for k, c in enumerate(line) if c.isdigit()]
            if digits:
                k = draw(st.sampled_from(digits))
                lines[i] = line[:k] + draw(st.sampled_from(["9" * 25, "-5", "", "4294967296",
                                                            "1e9"])) + line[k:]
        elif action == "field" and "=" in line:
            at = line.index("=")
            lines[i] = line[: line.rfind(" ", 0, at) + 1] + line[line.find(" ",
                                                                           at) + 1 if " " in line[at:] else
                                                                  len(line):]
        elif action == "shuffle":
            j = min(len(lines), i + draw(st.integers(2, 20)))
            part = lines[i:j]
            lines[i:j] = draw(st.permutations(part))
        elif action == "cut":
            lines = lines[:i]
    return "\n".join(lines) + ("\n" if draw(st.booleans()) else "")


@_settings(20)
@given(st.data())
def test_cuzk_log_with_lines_shuffled_garbled_or_cut(data):
    folder, path = _scratch("daemon.log")
    with folder:
        path.write_text(_mutate_log(data.draw))
        settle(path, COMMANDS if data.draw(st.integers(0, 3)) == 0 else ())


# -- a .wbtrace of a real run: header fields and column values edited ---------------------------

def _set_at(value, path: list, new):
    """The JSON value with the item at path (keys and indices, the last one replaced) swapped."""
    if not path:
        return new
    key, rest = path[0], path[1:]
    value[key] = _set_at(value[key], rest, new)
    return value


def _places(value, prefix=()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            out += _places(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value[:4]):
            out += _places(inner, (*prefix, i))
    return out


COLUMN_VALUES = st.sampled_from([0, -1, 1, 2**31 - 1, -(2**31), 2**40, 2**62, -(2**62), 2**63 - 1, -(2**63)])


@_settings(12)
@given(st.data())
def test_a_real_runs_trace_with_header_fields_and_column_values_edited(data):
    source = data.draw(st.sampled_from(WBTRACE))
    members = trace_members.members(source)
    header = json.loads(np.load(io.BytesIO(members["header.npy"])).tobytes())
    for _ in range(data.draw(st.integers(0, 3))):
        place = data.draw(st.sampled_from(_places(header)[1:]))
        header = _set_at(header, list(place), data.draw(odd_values))
    members["header.npy"] = trace_members.npy(np.frombuffer(json.dumps(header).encode(), np.uint8))
    numeric = sorted(n for n in members if n != "header.npy")
    for _ in range(data.draw(st.integers(0, 3))):
        name = data.draw(st.sampled_from(numeric))
        column = np.load(io.BytesIO(members[name])).copy()
        if len(column):
            at = data.draw(st.integers(0, len(column) - 1))
            value = data.draw(COLUMN_VALUES if column.dtype.kind in "iu" else st.sampled_from(
                [float("nan"), float("inf"), -1e308, 0.0, 1e300]))
            with contextlib.suppress(OverflowError):  # the value does not fit the column's dtype
                column[at] = value
        members[name] = trace_members.npy(column)
    folder, path = _scratch(source.name)
    with folder:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for name, raw in members.items():
                z.writestr(name, raw)
        settle(path, COMMANDS)


# -- the HTML report on a sample of all of them ---------------------------------------------------

@_settings(3)
@given(st.data())
def test_the_report_of_mutated_files(data):
    source = data.draw(st.sampled_from([CUZK, *KINETO[:2], WBTRACE[0], NSYS]))
    folder, path = _scratch(source.name)
    with folder:
        path.write_bytes(_flip(source.read_bytes(), data.draw))
        settle(path, (("report",),))
