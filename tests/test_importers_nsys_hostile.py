"""Malformed and hostile nsys exports: every problem is a skipped row counted with its table and
rowid, or an ImportFailed naming the file and the table; never another exception."""

import os
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nsys_fixture import SCHEMA, Export, foreign_export, global_tid

from workbench.cli import main
from workbench.importers import ImportFailed, load_any, load_nsys
from workbench.model import tracks as tr

KERNELS, OSRT = "CUPTI_ACTIVITY_KIND_KERNEL", "OSRT_API"
# WB_EXAMPLES=2000 for a longer hunt than CI's.
SETTINGS = settings(max_examples=int(os.environ.get("WB_EXAMPLES", 40)), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _edit(path, *statements):
    with sqlite3.connect(path) as conn:
        for sql in statements:
            conn.execute(sql)
    return path


def test_views_in_place_of_tables_are_not_read(tmp_path):
    path = _edit(foreign_export(tmp_path / "views.sqlite"),
                 f"DROP TABLE {KERNELS}", "CREATE TABLE base (x INT)",
                 f"CREATE VIEW {KERNELS} AS SELECT x AS start, x AS end FROM base", "DROP TABLE base",
                 f"DROP TABLE {OSRT}", f"CREATE VIEW {OSRT} AS SELECT 1 AS start")
    with sqlite3.connect(path) as conn, pytest.raises(sqlite3.OperationalError):
        conn.execute(f"SELECT * FROM {KERNELS}")  # reading it would fail
    report = load_nsys(path).meta["import"]
    assert f"table {KERNELS} (no kernel records)" in report["missing"]
    assert f"{KERNELS} is a view: not read (only real tables are)" in report["schema"]
    assert f"{OSRT} is a view: not read (only real tables are)" in report["schema"]


def test_an_export_of_views_alone_is_refused_with_the_file_and_the_views(tmp_path):
    path = _edit(tmp_path / "only_views.sqlite", f"CREATE VIEW {KERNELS} AS SELECT 1 AS start, 2 AS end")
    with pytest.raises(ImportFailed, match=rf"only_views.sqlite: no NVTX_EVENTS, .*{KERNELS} is a view"):
        load_nsys(path)


def test_values_of_the_wrong_type_skip_their_row_counted_with_table_and_rowid(tmp_path):
    path = _edit(
        foreign_export(tmp_path / "types.sqlite"),
        f"INSERT INTO {KERNELS} (start, end, deviceId, streamId, shortName) VALUES ('soon', 5, 0, 1, 1)",
        f"INSERT INTO {KERNELS} (start, end, deviceId, streamId, shortName) VALUES (1, 5, 0, 'x', 1)",
        f"INSERT INTO {KERNELS} (start, end, deviceId, streamId, shortName) VALUES (1, 5, NULL, 1, 1)",
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId, nameId) "
        "VALUES (1, 5, 1, 2.5, 1)",
        f"INSERT INTO {OSRT} (start, end, globalTid, nameId) VALUES (1, 5, 1, X'00ff')",
        f"INSERT INTO {OSRT} (start, end, globalTid, nameId) VALUES (1, {2**63 - 1}, 1, 1)",
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (1, 5, 59, 'r', 'main')",
    )
    report = load_nsys(path).meta["import"]

    def rowid(table, where):
        (found,) = _sql(path, f"SELECT rowid FROM {table} WHERE {where}")
        return f"{table} row {found[0]}"

    expected = {
        f"{KERNELS} row with a non-integer start": rowid(KERNELS, "typeof(start) = 'text'"),
        f"{KERNELS} row with a non-integer streamId": rowid(KERNELS, "typeof(streamId) = 'text'"),
        f"{KERNELS} row without deviceId": rowid(KERNELS, "deviceId IS NULL"),
        "CUPTI_ACTIVITY_KIND_RUNTIME row with a non-integer correlationId":
            rowid("CUPTI_ACTIVITY_KIND_RUNTIME", "typeof(correlationId) = 'real'"),
        f"{OSRT} row with a nameId neither a string id nor text": rowid(OSRT, "typeof(nameId) = 'blob'"),
        f"{OSRT} row without integer times": rowid(OSRT, f"end = {2**63 - 1}"),
        "NVTX_EVENTS row with a non-integer globalTid": rowid("NVTX_EVENTS", "typeof(globalTid) = 'text'"),
    }
    assert report["first_at"] == expected
    assert report["skipped"] == dict.fromkeys(expected, 1)


def _sql(path, query):
    with sqlite3.connect(path) as conn:
        return conn.execute(query).fetchall()


def test_columns_renamed_or_missing_across_exporter_versions_are_named(tmp_path):
    path = tmp_path / "old.sqlite"
    out = Export(path, tables=("StringIds", KERNELS, OSRT),
                 drop_columns={KERNELS: ("gridX", "shortName"), OSRT: ("nameId",)})
    out.insert(KERNELS, start=1, end=9, deviceId=0, streamId=2, demangledName=out.string("k(int)"))
    out.insert(OSRT, start=1, end=9, globalTid=global_tid(7))
    out.close()
    # An older layout: the runtime call's name inline, in a column `name`.
    _edit(path, "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT, name TEXT)",
          f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (2, 3, {global_tid(7)}, 'cudaMalloc')")
    trace = load_nsys(path)
    report = trace.meta["import"]
    assert f"{OSRT} has no column nameId: table skipped" in report["missing"]
    assert {f"column {KERNELS}.shortName", f"column {KERNELS}.gridX", "column CUPTI_ACTIVITY_KIND_RUNTIME."
            "correlationId"} <= set(report["missing"])
    assert "CUPTI_ACTIVITY_KIND_RUNTIME.nameId read from column name (no nameId)" in report["schema"]
    (kernel,) = trace.select(track_prefix="gpu0/")
    assert kernel.name == "k(int)" and not kernel.attrs  # the demangled name; no grid without gridX
    (call,) = trace.select(name="cudaMalloc")
    assert call.track == tr.cuda_track(tr.thread_track(7))


def test_a_damaged_page_fails_naming_the_file_and_the_table(tmp_path, capsys):
    path = foreign_export(tmp_path / "damaged.sqlite")
    with sqlite3.connect(path) as conn:
        conn.executemany(f"INSERT INTO {OSRT} (start, end, globalTid, nameId) VALUES (?, ?, ?, 1)",
                         [(i, i + 1, global_tid(301, 300)) for i in range(20_000)])
        (page,) = conn.execute("PRAGMA page_size").fetchone()
    raw = bytearray(path.read_bytes())
    middle = len(raw) // page // 2 * page  # deep inside the OS runtime table's pages
    raw[middle:middle + page] = bytes(page)
    path.write_bytes(raw)
    with pytest.raises(ImportFailed, match=rf"damaged.sqlite: table {OSRT}: unreadable after row \d+ "):
        load_any(path)
    assert main(["import", str(path), "-o", str(tmp_path / "out.wbtrace")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "damaged.sqlite" in err[0] and OSRT in err[0]


def test_tables_without_rowid_and_text_that_is_not_utf8(tmp_path):
    path = tmp_path / "odd.sqlite"
    out = Export(path, tables=("StringIds",))
    out.close()
    _edit(path, f"CREATE TABLE {OSRT} (start INT, end INT, globalTid INT, nameId INT, PRIMARY KEY (start)) "
                "WITHOUT ROWID",
          f"INSERT INTO {OSRT} VALUES (1, 2, {global_tid(9)}, 1), (3, 2, {global_tid(9)}, 1)",
          "INSERT INTO StringIds VALUES (1, CAST(X'7265ff6164' AS TEXT))")
    trace = load_nsys(path)
    (call,) = trace.iter_spans()
    assert call.name == "re\ufffdad" and call.track == tr.os_track(tr.thread_track(9))
    assert trace.meta["import"]["first_at"] == {f"{OSRT} row ending before it starts": f"{OSRT} row 2"}


cells = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False),
                  st.text(max_size=5), st.binary(max_size=4))


@SETTINGS
@given(rows=st.lists(st.tuples(cells, cells, cells, cells, cells), min_size=1, max_size=6))
def test_any_cells_give_a_trace_or_a_clear_refusal(tmp_path, rows):
    path = tmp_path / "any.sqlite"
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE {KERNELS} ({SCHEMA[KERNELS]})".replace("NOT NULL", ""))
        conn.executemany(f"INSERT INTO {KERNELS} (start, end, deviceId, streamId, shortName) "
                         "VALUES (?, ?, ?, ?, ?)", rows)
    try:
        trace = load_nsys(path)
    except ImportFailed as err:
        assert str(path) in str(err)
        return
    report = trace.meta["import"]
    assert len(trace.spans) + sum(report["skipped"].values()) == len(rows)
    for track in trace.tracks():
        assert tr.parse(track).kind == tr.KERNELS


pipeline_names = st.sampled_from(["synthesis", "buffer_checkout", "prep_msm", "barrier_wait", "ntt_msm_h",
                                  "mutex_wait", "mutex_hold", "batch_add", "tail_msm", "finish", "setup",
                                  "x"])
ranges = st.tuples(st.integers(0, 50), st.integers(0, 50), pipeline_names, st.integers(0, 3),
                   st.sampled_from([59, 60, 34, 61]))


@SETTINGS
@given(rows=st.lists(ranges, min_size=1, max_size=25))
def test_any_ranges_in_the_workbench_domain_give_a_trace_or_a_clear_refusal(tmp_path, rows):
    """The pipeline's roles are inferred from range names: no arrangement of them may crash it."""
    path = tmp_path / "ranges.sqlite"
    path.unlink(missing_ok=True)
    out = Export(path, tables=("StringIds", "NVTX_EVENTS"))
    out.insert("NVTX_EVENTS", start=0, eventType=75, text="workbench", domainId=7)
    for start, length, name, thread, kind in rows:
        out.insert("NVTX_EVENTS", start=start, end=start + length, eventType=kind, text=name,
                   globalTid=global_tid(100 + thread), domainId=7)
    out.close()
    try:
        trace = load_nsys(path)
    except ImportFailed as err:
        assert str(path) in str(err)
        return
    for track in trace.tracks():
        assert tr.build(tr.parse(track)) == track
