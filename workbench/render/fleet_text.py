"""A fleet in the terminal: the hosts per bound in one line, then the ranked table.

Host names, finding titles and reasons come from files anyone may write: the text passes
through render/safe.py like every renderer's.
"""

from __future__ import annotations

from workbench.analysis.fleet import FleetView, HostRecord
from workbench.render.safe import terminal_safe

TITLE_WIDTH = 70
HEADERS = ("#", "host", "input", "bound", "cost", "throughput", "window s", "evidence", "finding")
RIGHT = {0, 4, 5, 6}  # the numeric columns


def _table(rows: list[list[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(HEADERS)]

    def line(cells: list[str] | tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i in RIGHT else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join([line(HEADERS), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _rate(r: HostRecord) -> str:
    return "-" if r.throughput is None else f"{r.throughput:.1f} {r.unit}"


def _row(rank: int, r: HostRecord) -> list[str]:
    if not r.readable:
        return [str(rank), r.host, "-", r.label, "-", "-", "-", "-", _cut(r.error, TITLE_WIDTH)]
    where = r.evidence[0].where(r.source) if r.evidence else "-"
    return [str(rank), r.host, r.kind, r.label, r.cost_text, _rate(r), f"{r.window_s:.1f}", where,
            _cut(r.title, TITLE_WIDTH)]


@terminal_safe
def render_fleet(view: FleetView, interrupted: bool = False, files: int | None = None,
                 details: bool = False) -> str:
    """`details`: under the table each host's headline and evidence, in rank order."""
    out = [view.sentence]
    if interrupted:
        out.append(f"interrupted: {len(view.records)} of {files if files is not None else '?'} hosts read")
    out.append("")
    out.append(_table([_row(i, r) for i, r in enumerate(view.records, start=1)]))
    if details:
        for r in view.records:
            if not r.readable:
                continue
            out += ["", f"{r.host} ({r.source}): {r.headline}"]
            out += [f"  {e.describe(r.source)}" for e in r.evidence]
    return "\n".join(out)
