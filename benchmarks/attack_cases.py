"""The hostile cases of issue 15, crafted into files under a work folder: see attacks.py.

Every input is made from a real file of tests/data (a run's .wbtrace, the nsys export, a
Kineto trace, the cuzk seed log) or is a special file; every case is a command line and what
it must give: "refuse" (exit 2, one line), "accept" (exit 0) or "either".
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import socket
import sqlite3
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import trace_members  # tests/ is on the path (attacks.py puts it there)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
RUN_TRACE = DATA / "whatif" / "w2.wbtrace"
NSYS = DATA / "nsys" / "pipit_perlmutter-cloverleaf-cuda.sqlite"
KINETO = DATA / "kineto" / "critical_path_cuda_event_sync_event_sync_trace.json.gz"
CUZK = DATA / "cuzk_seed" / "daemon.log"
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
TINY_RUN = ["run", "--backend", "cpu", "--partitions", "1", "--log2-constraints", "4", "--synth-terms", "1",
            "--no-progress"]


@dataclass
class Case:
    group: str
    name: str
    argv: list[str]  # workbench's arguments; with shell=True, one bash line ({wb} is the command)
    expect: str = "refuse"
    precious: list[Path] = field(default_factory=list)  # must be unchanged afterwards
    folders: list[Path] = field(default_factory=list)  # must hold no temporary file afterwards
    shell: bool = False
    timeout: float = 60.0
    check: str = ""  # what a wrong acceptance would look like in stdout: "summary", "text"


# -- .wbtrace files crafted from a real run's ------------------------------------------------------

def _zip(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _header(members: dict[str, bytes]) -> dict:
    return json.loads(np.load(io.BytesIO(members["header.npy"])).tobytes())


def _with_header(members: dict[str, bytes], header: dict | bytes) -> dict[str, bytes]:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return {**members, "header.npy": trace_members.npy(np.frombuffer(text, np.uint8))}


def _column(members: dict[str, bytes], name: str, change) -> dict[str, bytes]:
    return {**members, f"{name}.npy": trace_members.npy(change(np.load(io.BytesIO(members[f"{name}.npy"]))))}


def _deep(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def _huge_declared(rows: int) -> bytes:
    fake = io.BytesIO()
    np.lib.format.write_array_header_1_0(fake, np.lib.format.header_data_from_array_1_0(np.zeros(1, np.int64))
                                         | {"shape": (rows,)})
    return fake.getvalue() + b"\0" * 64


def wbtrace_inputs(work: Path) -> dict[str, Path]:
    real = trace_members.members(RUN_TRACE)
    h = _header(real)

    def header(change) -> dict[str, bytes]:
        copy = json.loads(json.dumps(h))
        change(copy)
        return _with_header(real, copy)

    crafted = {
        "version null": header(lambda x: x.update(version=None)),
        "version a string": header(lambda x: x.update(version="1")),
        "version from the future": header(lambda x: x.update(version=10**6)),
        "format another": header(lambda x: x.update(format="zip")),
        "strings not strings": header(lambda x: x["strings"].__setitem__(0, 7)),
        "strings a dict": header(lambda x: x.update(strings={"a": 1})),
        "config a list": header(lambda x: x.update(config=[1])),
        "config values of the wrong type": header(lambda x: x["config"].update(partitions="8",
                                                                               gpu_workers=-3)),
        "meta outcome a list": header(lambda x: x["meta"].update(outcome=[1], wall_s="fast")),
        "thread names numbers": header(lambda x: x.update(thread_names={"t": 3})),
        "attrs missing": header(lambda x: x.pop("attrs")),
        "attrs kind unknown": header(lambda x: x["attrs"]["spans"].insert(0, {"key": "k", "kind": "blob"})),
        "meta nested 200 deep": header(lambda x: x["meta"].update(x=_deep(200))),
        "header nested 100000 deep": _with_header(real, b"[" * 100_000 + b"]" * 100_000),
        "header not JSON": _with_header(real, b"\xff\xfe{"),
        "header missing": {k: v for k, v in real.items() if k != "header.npy"},
        "short column": _column(real, "spans.worker", lambda c: c[:-1]),
        "string dtype column": _column(real, "spans.track", lambda c: c.astype("U3")),
        "object dtype column": {**real, "spans.name.npy": _npy_object()},
        "float indices": _column(real, "spans.name", lambda c: c.astype(np.float64)),
        "index past the string table": _column(real, "spans.track", lambda c: c + 10**6),
        "negative index": _column(real, "spans.name", lambda c: c - 10**6),
        "end before start": _column(real, "spans.end_ns", lambda c: c - 10**15),
        "times near 2^63": _column(real, "spans.end_ns", lambda c: np.full_like(c, 2**63 - 5)),
        "a time near -2^63": _column(real, "spans.start_ns", lambda c: np.where(np.arange(len(c)) == 0,
                                                                                -(2**63), c)),
        "one time far away": _column(real, "instants.ts_ns", lambda c: c + 2**60),
        "counter values nan and inf": _column(real, "counters.value",
                                              lambda c: np.where(np.arange(len(c)) % 2 == 0, np.nan, np.inf)),
        "two-dimensional column": _column(real, "spans.start_ns", lambda c: c.reshape(1, -1)),
        "column missing": {k: v for k, v in real.items() if k != "instants.ts_ns.npy"},
        "declares 2^30 rows": {**real, "spans.worker.npy": _huge_declared(2**30)},
        "declares 2^62 rows": {**real, "spans.worker.npy": _huge_declared(2**62)},
        "zip bomb of zeros": {**real, "spans.partition.npy": trace_members.npy(np.zeros(2**25, np.int32))},
        "5000 members": {**real, **{f"junk{i}.npy": b"" for i in range(5000)}},
        "partition values extreme": _column(real, "spans.partition", lambda c: np.full_like(c, 2**31 - 1)),
        "escapes in names": header(lambda x: x.update(strings=[s + "\x1b[2J\x1b]0;owned\x07" for s in
                                                                x["strings"]])),
    }
    out = {}
    for name, members in crafted.items():
        out[name] = _zip(work / f"{_slug(name)}.wbtrace", members)
    # Not zip archives inside: the magic without an archive, a cut-off archive, an empty file.
    out["zip magic only"] = _write(work / "magic.wbtrace", b"PK\x03\x04" + b"\0" * 100)
    raw = RUN_TRACE.read_bytes()
    out["archive cut in half"] = _write(work / "half.wbtrace", raw[: len(raw) // 2])
    out["empty file"] = _write(work / "empty.wbtrace", b"")
    return out


def _npy_object() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return buffer.getvalue()


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def _write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


# -- foreign inputs ---------------------------------------------------------------------------------

def chrome_inputs(work: Path) -> dict[str, Path]:
    doc = json.loads(gzip.decompress(KINETO.read_bytes()))
    events = doc["traceEvents"]

    def variant(change) -> str:
        copy = json.loads(json.dumps(doc))
        change(copy["traceEvents"])
        return json.dumps(copy)

    bomb = work / "bomb.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as out:  # 320 MiB of blanks in about 300 KiB
        out.write(b'{"traceEvents": [')
        block = b" " * (1 << 20)
        for _ in range(320):
            out.write(block)
        out.write(b"]}")
    text = json.dumps(doc)
    raw = gzip.compress(text.encode())
    cases = {
        "gzip bomb": bomb,
        "nested 100000 deep": _write(work / "deep.json", "[" * 100_000 + "]" * 100_000),
        "nested in an event": _write(work / "deep_args.json", '[{"ph": "X", "name": "k", "ts": 1, "dur": 1, '
                                     '"pid": 1, "tid": 1, "args": ' + "[" * 5000 + "]" * 5000 + "}]"),
        "numbers of 400 digits": _write(work / "bignum.json", '[{"ph":"X","name":"k","ts":1' + "0" * 400
                                        + ',"dur":1,"pid":1,"tid":1}]'),
        "times near 2^63": _write(work / "t63.json", variant(lambda e: [x.update(ts=2**63 - 1) for x in e
                                                                        if "ts" in x])),
        "negative durations": _write(work / "negdur.json", variant(lambda e: [x.update(dur=-5) for x in e
                                                                              if "dur" in x])),
        "times of the wrong type": _write(work / "tstr.json",
                                          variant(lambda e: [x.update(ts=[1]) for x in e])),
        "ts NaN": _write(work / "nan.json", text.replace('"ts": ', '"ts": NaN, "x": ', 5)),
        "not UTF-8": _write(work / "latin.json",
                            text.encode()[:2000] + b"\xff\xfe\xfa" + text.encode()[2000:]),
        "UTF-16": _write(work / "utf16.json", text.encode("utf-16")),
        "gzip cut off": _write(work / "cut.json.gz", raw[: len(raw) // 2]),
        "gzip of text": _write(work / "text.json.gz", gzip.compress(b"hello world\n" * 100)),
        "two gzip members": _write(work / "two.json.gz", raw + raw),
        "escapes in names": _write(work / "ansi.json", variant(lambda e: [x.update(name="\x1b[2J\x1b]0;o\x07")
                                                                          for x in e])),
        "one event of 20 MB": _write(work / "longname.json", json.dumps(
            [{"ph": "X", "name": "k" * 20_000_000, "ts": 1, "dur": 1, "pid": 1, "tid": 1}])),
        "events empty": _write(work / "noevents.json", json.dumps({"traceEvents": []})),
        "events of null": _write(work / "nulls.json", json.dumps([None] * len(events))),
    }
    return cases


def nsys_inputs(work: Path) -> dict[str, Path]:
    def copy(name: str, *sql: str) -> Path:
        path = work / name
        shutil.copyfile(NSYS, path)
        with sqlite3.connect(path) as conn:
            for statement in sql:
                conn.execute(statement)
        return path

    recursive = (f"CREATE VIEW {KERNELS} AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
                 "SELECT x AS start, x + 1 AS end, 0 AS deviceId, 1 AS streamId, 1 AS shortName, "
                 "1 AS demangledName, 0 AS correlationId FROM r")
    cases = {
        "recursive view named like a CUPTI table": copy("recursive.sqlite", f"DROP TABLE {KERNELS}",
                                                        recursive),
        "recursive view alone": _fresh_db(work / "recursive_alone.sqlite", recursive),
        "a table declaring 2^40 pages": _declared_pages(copy("pages.sqlite"), 2**31 - 1),
        "names in a string of 10 MB": copy("bigstring.sqlite", "UPDATE StringIds SET value = "
                                           "printf('%.*c', 10000000, 'x') WHERE id = (SELECT min(id) FROM "
                                           "StringIds)"),
        "kernel times swapped": copy("swapped.sqlite", f"UPDATE {KERNELS} SET start = end, end = start"),
        "kernel times near 2^63": copy("k63.sqlite", f"UPDATE {KERNELS} SET end = 9223372036854775807"),
        "kernel columns of text": copy("ktext.sqlite",
                                       f"UPDATE {KERNELS} SET deviceId = 'gpu', streamId = x'00'"),
        "kernel table dropped": copy("nokernel.sqlite", f"DROP TABLE {KERNELS}"),
        "every table emptied": copy("emptied.sqlite", *[f"DELETE FROM {t}" for t in (
            KERNELS, "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY", "OSRT_API",
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")]),
        "escapes in names": copy("ansi.sqlite", "UPDATE StringIds SET value = value || char(27) || '[2J'"),
        "the header's magic alone": _write(work / "magic.sqlite", b"SQLite format 3\x00" + b"\xff" * 200),
        "a page zeroed": _zero_page(copy("zeroed.sqlite")),
        "named x#y": copy("x#y.sqlite"),
        "named a%41": copy("a%41.sqlite"),
        "named with ?mode=rwc": copy("q?mode=rwc.sqlite"),
    }
    return cases


def _fresh_db(path: Path, *sql: str) -> Path:
    with sqlite3.connect(path) as conn:
        for statement in sql:
            conn.execute(statement)
    return path


def _declared_pages(path: Path, pages: int) -> Path:
    raw = bytearray(path.read_bytes())
    raw[28:32] = pages.to_bytes(4, "big")  # the header's "database size in pages"
    path.write_bytes(raw)
    return path


def _zero_page(path: Path) -> Path:
    raw = bytearray(path.read_bytes())
    page = int.from_bytes(raw[16:18], "big") or 65536
    middle = len(raw) // page // 2 * page
    raw[middle:middle + page] = bytes(page)
    path.write_bytes(raw)
    return path


def cuzk_inputs(work: Path, dense: str) -> dict[str, Path]:
    text = CUZK.read_text()
    lines = text.splitlines()
    return {
        "dense 8 MB log (was quadratic)": _write(work / "dense.log", dense),
        "one line of 10 MB": _write(work / "longline.log", "CUZK_TIMING: prep_msm_ms=" + "1" * 10_000_000),
        "a million blank lines, then the log": _write(work / "blank.log", "\n" * 1_000_000 + text),
        "figures of 25 digits": _write(work / "digits.log", text.replace("ms=", "ms=9999999999999999999999")),
        "negative figures": _write(work / "neg.log", text.replace("ms=", "ms=-")),
        "NUL bytes": _write(work / "nul.log", text.replace("\n", "\0\n")),
        "CRLF": _write(work / "crlf.log", text.replace("\n", "\r\n")),
        "UTF-16": _write(work / "utf16.log", text.encode("utf-16")),
        "Latin-1 bytes": _write(work / "latin.log", text.encode() + b"\xe9\xff\n" + text.encode()),
        "lines reversed": _write(work / "reversed.log", "\n".join(reversed(lines))),
        "TIMELINE lines only": _write(work / "timeline.log", "\n".join(x for x in lines if "TIMELINE," in x)),
        "escapes in job names": _write(work / "ansi.log", text.replace("job-7", "job\x1b]0;owned\x07")),
        "offsets near 2^63": _write(work / "t63.log", text.replace("TIMELINE,", "TIMELINE,92233720368547")),
    }


def special_inputs(work: Path) -> dict[str, Path]:
    fifo = work / "idle.fifo"
    os.mkfifo(fifo)
    sock = work / "socket"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))  # left bound: the file stays a socket
    return {
        "/dev/zero": Path("/dev/zero"),
        "/dev/urandom": Path("/dev/urandom"),
        "/dev/null (empty)": Path("/dev/null"),
        "a socket": sock,
        "a directory": work,
        "a missing file": work / "missing.wbtrace",
        "/proc/self/status (size 0, not empty)": Path("/proc/self/status"),
        "a name starting with -": _write(work / "-dash.log", CUZK.read_text()),
    }


def private_device(work: Path) -> Path | None:
    """A character device like /dev/null, private to the work folder (so a defect harms nothing)."""
    path = work / "null-device"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except OSError:
        return None
    return path
