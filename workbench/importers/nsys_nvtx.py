"""NVTX ranges and marks of an nsys export, split by domain.

`NVTX_EVENTS` holds push/pop (eventType 59) and start/end (60) ranges, marks (34) and the
creation of each named domain (75, its name in `text`). The workbench's own domain,
`workbench`, goes to nsys_roles.py, which puts it back onto the pipeline's tracks; a range of
any other domain stays on its thread, with its domain's name in attrs `domain` (`default`
for the unnamed domain 0). An export without a domainId column cannot tell domains apart:
then every range goes to nsys_roles.py, which keeps threads it does not recognise as
threads.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from workbench.importers.nsys_cuda import Call, thread_key
from workbench.importers.nsys_tables import MAX_NS, STRING, TEXT, Col, Export, times

TABLE = "NVTX_EVENTS"
PUSH_POP, START_END, MARK, DOMAIN_CREATE = 59, 60, 34, 75
OURS = "workbench"
Range = tuple[int, int, str]


@dataclass
class Nvtx:
    ours: dict[int, list[Range]] = field(default_factory=lambda: defaultdict(list))
    foreign: list[Call] = field(default_factory=list)
    marks: list[tuple[Call, bool]] = field(default_factory=list)  # (mark, in our domain)
    domains: set[str] = field(default_factory=set)  # names of the foreign domains seen


def read_nvtx(export: Export) -> Nvtx:
    cols = (Col.of("start", required=True), Col.of("end"), Col.of("eventType", required=True),
            Col.of("text", TEXT), Col.of("textId", STRING), Col.of("globalTid"), Col.of("domainId"))
    found = export.resolve(TABLE, cols)
    out = Nvtx()
    if found is None:
        return out
    rows = list(export.rows(TABLE, cols, found))
    names = {r["domainId"]: r["text"] for r in rows if r["eventType"] == DOMAIN_CREATE
             and isinstance(r["text"], str)}
    ours = {d for d, name in names.items() if name == OURS}
    by_domain = found["domainId"] is not None
    if not by_domain:
        export.report.extra["nvtx_domains"] = "no domainId column: every range read as the workbench's"
    elif not ours:
        export.report.extra["nvtx_domains"] = "no workbench domain: every range kept on its thread"
    for r in rows:
        kind, where = r["eventType"], f"{TABLE} row {r['rowid']}"
        if kind == DOMAIN_CREATE:
            continue
        domain = r["domainId"] or 0
        mine = not by_domain or domain in ours
        name = r["text"] if r["text"] is not None else r["textId"] if r["textId"] is not None else "range"
        thread = thread_key(r["globalTid"])
        attrs = None if mine else {"domain": names.get(domain, "default" if domain == 0 else f"#{domain}")}
        if kind == MARK:
            if abs(r["start"]) >= MAX_NS:
                export.report.skip(f"{TABLE} row without integer times", where)
                continue
            out.marks.append((Call(thread, name, r["start"], r["start"], attrs), mine))
            continue
        if kind not in (PUSH_POP, START_END):
            export.report.skip(f"NVTX event type {kind}", where)
            continue
        if r["end"] is None or r["end"] == -1:
            export.report.skip("NVTX range never closed", where)
            continue
        span = times(export, r, TABLE)
        if span is None:
            continue
        if mine:
            out.ours[thread].append((*span, name))
        else:
            out.foreign.append(Call(thread, name, *span, attrs))
            out.domains.add(attrs["domain"])  # type: ignore[index]
    return out

