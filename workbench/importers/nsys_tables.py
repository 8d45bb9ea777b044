"""The tables of an nsys SQLite export, read so that no file can make the reader fail badly.

Only real tables are read: the `type='table'` entries of `sqlite_master` that are not
virtual. A view (which may recurse through other views or fail when read) or a virtual
table (whose module may be absent) under an expected name is named in the report and
treated as absent; each table is read with one plain `SELECT` of named columns, so the
work is bounded by the file's size. The schema drifted between exporter versions (columns
renamed, moved or added), so a column is found by any of the names it has had; a value of
the wrong type skips its row, counted with the table and rowid; an SQLite error while a
table is read becomes an `ImportFailed` naming the file, the table and the last good row.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from workbench.importers.report import ImportFailed, ImportReport

INT, TEXT, STRING = "int", "text", "string"  # STRING: a StringIds id or the text inline
BATCH = 4096
MAX_NS = 2**62  # times beyond this are not nanoseconds of any capture


@dataclass(frozen=True)
class Col:
    """A value a reader wants: under which column names it has been written, and its type."""

    key: str
    names: tuple[str, ...]  # newest schema first
    kind: str = INT
    required: bool = False  # a table without it is skipped; a row without it too

    @classmethod
    def of(cls, spec: str, kind: str = INT, required: bool = False) -> Col:
        names = tuple(spec.split("|"))
        return cls(names[0], names, kind, required)


Row = dict[str, Any]


class Export:
    """An open export: which tables it really has, their columns, its strings."""

    def __init__(self, conn: sqlite3.Connection, report: ImportReport) -> None:
        self.conn, self.report = conn, report
        self.tables: dict[str, str] = {}  # lower-case name -> name as written
        self.columns: dict[str, dict[str, str]] = {}
        self.strings: dict[int, str] = {}
        self.unnamed: Counter[str] = Counter()  # table -> ids StringIds lacks
        self.schema_notes: list[str] = []
        for name, kind, sql in self._master():
            if not isinstance(name, str):
                continue
            real = kind == "table" and not (isinstance(sql, str) and sql.lstrip().upper().startswith(
                "CREATE VIRTUAL"))
            if real:
                self.tables[name.lower()] = name
            elif kind in ("view", "table"):
                what = "a view" if kind == "view" else "a virtual table"
                self.schema_notes.append(f"{name} is {what}: not read (only real tables are)")

    def _master(self) -> list[tuple[Any, Any, Any]]:
        try:
            return self.conn.execute("SELECT name, type, sql FROM sqlite_master").fetchall()
        except sqlite3.Error as err:
            raise ImportFailed(f"{self.report.source}: not a readable nsys SQLite export ({err})") from None

    def has(self, table: str) -> bool:
        return table.lower() in self.tables

    def _columns_of(self, table: str) -> dict[str, str]:
        if table not in self.columns:
            name = self.tables[table.lower()]
            try:
                info = self.conn.execute(f"PRAGMA table_info({_quote(name)})").fetchall()
            except sqlite3.Error as err:
                raise self._failed(table, "columns unreadable", err) from None
            self.columns[table] = {str(r[1]).lower(): str(r[1]) for r in info}
        return self.columns[table]

    def resolve(self, table: str, cols: tuple[Col, ...]) -> dict[str, str | None] | None:
        """Which column holds each value; None when the table is absent or lacks a required one."""
        if not self.has(table):
            return None
        present = self._columns_of(table)
        found: dict[str, str | None] = {}
        for col in cols:
            hit = next((n for n in col.names if n.lower() in present), None)
            found[col.key] = present[hit.lower()] if hit else None
            if hit is None and col.required:
                self.report.missing.append(f"{table} has no column {col.names[0]}: table skipped")
                return None
            if hit is None:
                self.report.missing.append(f"column {table}.{col.names[0]}")
            elif hit != col.names[0]:
                self.schema_notes.append(f"{table}.{col.key} read from column {hit} (no {col.names[0]})")
        return found

    def rows(self, table: str, cols: tuple[Col, ...], found: dict[str, str | None] | None = None,
             ) -> Iterator[Row]:
        """The table's rows whose values have their types; the others are skipped and counted."""
        found = self.resolve(table, cols) if found is None else found
        if found is None:
            return
        name = self.tables[table.lower()]
        select = ", ".join(_quote(found[c.key]) if found[c.key] else "NULL" for c in cols)  # type: ignore[arg-type]
        try:
            cursor = self.conn.execute(f"SELECT rowid, {select} FROM {_quote(name)}")
            numbered = False
        except sqlite3.Error:  # a WITHOUT ROWID table: rows are numbered as read
            try:
                cursor = self.conn.execute(f"SELECT {select} FROM {_quote(name)}")
            except sqlite3.Error as err:
                raise self._failed(table, "unreadable", err) from None
            numbered = True
        last = 0
        while True:
            try:
                batch = cursor.fetchmany(BATCH)
            except sqlite3.Error as err:
                raise self._failed(table, f"unreadable after row {last}", err) from None
            if not batch:
                return
            for raw in batch:
                last = last + 1 if numbered else raw[0]
                values = raw if numbered else raw[1:]
                self.report.read += 1
                row = self._typed(table, cols, found, last, values)
                if row is not None:
                    yield row

    def _failed(self, table: str, what: str, err: sqlite3.Error) -> ImportFailed:
        return ImportFailed(f"{self.report.source}: table {table}: {what} ({err})")

    def _typed(self, table: str, cols: tuple[Col, ...], found: dict[str, str | None], rowid: Any,
               values: tuple[Any, ...]) -> Row | None:
        row: Row = {"rowid": rowid}
        where = f"{table} row {rowid}"
        for col, value in zip(cols, values, strict=True):
            column = found[col.key] or col.names[0]
            if value is None:
                if col.required:
                    self.report.skip(f"{table} row without {column}", where)
                    return None
            elif col.kind == INT and not isinstance(value, int):
                self.report.skip(f"{table} row with a non-integer {column}", where)
                return None
            elif col.kind == TEXT and not isinstance(value, str):
                self.report.skip(f"{table} row with a non-text {column}", where)
                return None
            elif col.kind == STRING:
                if isinstance(value, int):
                    value = self.string(value, table)
                elif not isinstance(value, str):
                    self.report.skip(f"{table} row with a {column} neither a string id nor text", where)
                    return None
            row[col.key] = value
        return row

    def string(self, value: int, table: str) -> str:
        text = self.strings.get(value)
        if text is None:
            self.unnamed[table] += 1
            return f"#{value}"
        return text


def times(export: Export, row: Row, table: str) -> tuple[int, int] | None:
    """A row's (start, end) in nanoseconds, or None (counted) when they cannot be."""
    start, end = row.get("start"), row.get("end")
    where = f"{table} row {row['rowid']}"
    if not isinstance(start, int) or not isinstance(end, int) or abs(start) >= MAX_NS or abs(end) >= MAX_NS:
        export.report.skip(f"{table} row without integer times", where)
        return None
    if end < start:
        export.report.skip(f"{table} row ending before it starts", where)
        return None
    return start, end


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
