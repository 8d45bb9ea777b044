"""`workbench summary` of a program that is not our pipeline: spans by role, checked with SQL
over a real nsys export, and no pipeline words."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from workbench.analysis.role_summary import is_pipeline, role_summary
from workbench.cli import main
from workbench.importers import load_any

EXPORT = Path(__file__).parent / "data" / "nsys" / "pipit_perlmutter-cloverleaf-cuda.sqlite"


def _sql(query: str):
    with sqlite3.connect(f"file:{EXPORT}?mode=ro", uri=True) as conn:
        return conn.execute(query).fetchall()


def test_role_summary_counts_and_times_agree_with_the_export():
    trace = load_any(EXPORT)
    assert not is_pipeline(trace)
    summary = role_summary(trace)
    kernels = next(r for r in summary.roles if r.role == "kernel")
    (count, total), = _sql("SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert kernels.spans == count
    assert abs(kernels.total_ms - total / 1e6) < 1e-6 * total
    (top, top_ns, top_n), = _sql(
        "SELECT s.value, sum(k.end - k.start) AS t, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.shortName GROUP BY s.value ORDER BY t DESC LIMIT 1")
    assert kernels.longest[0][0] == top and kernels.longest[0][1] == top_n
    assert abs(kernels.longest[0][2] - top_ns / 1e6) < 1e-3
    copies = next(r for r in summary.roles if r.role == "copy")
    assert copies.spans == _sql("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0][0]


def test_summary_command_on_a_foreign_trace_speaks_of_roles(capsys):
    assert main(["summary", str(EXPORT)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("nsys SQLite export: ") and "(no proving pipeline)" in out
    assert "partitions" not in out and "mutex" not in out


def test_report_of_a_foreign_trace_speaks_of_its_trace_not_a_run():
    import html
    import re

    from workbench.viz.report import render_report

    page = render_report(load_any(EXPORT))
    text = re.sub(r"<(script|style).*?</\1>", " ", page, flags=re.S)
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text)))
    assert "nsys SQLite export: 7,779 spans" in text[:200]
    for word in ("partition", "worker", "mutex", " p-1 ", "of the run", "outcome"):
        assert word not in text, word
    assert "(no proving pipeline)" in text and "of the trace)" in text


def test_notebook_load_reads_any_input_and_takes_a_role_mapping(tmp_path):
    import workbench.notebook as wb
    from workbench.model.roles import role_counts

    waits = _sql("SELECT count(*) FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId "
                 "WHERE s.value = 'sem_timedwait'")[0][0]
    plain = role_counts(wb.load(EXPORT))
    assert plain["cond_wait"] == waits and "lock_hold" not in plain
    mapped = role_counts(wb.load(EXPORT, roles=[{"role": "lock_hold", "name": "sem_timedwait"}]))
    assert mapped["lock_hold"] == waits and "cond_wait" not in mapped
    mapping = tmp_path / "roles.toml"
    mapping.write_text('[[role]]\nname = "sem_timedwait"\nrole = "lock_hold"\nlock = "queue"\n')
    assert role_counts(wb.load(EXPORT, roles=mapping)) == mapped
