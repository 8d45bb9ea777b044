"""The journal's framing read by hand, from its description (trace/journal_format.py and the
ROWS body in trace/journal.py), so tests check the reader against an independent reading."""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"\x89WBJRNL\n"


@dataclass
class Frame:
    offset: int
    end: int
    kind: bytes
    part: dict  # the JSON part (of the header: the header itself)


def frames(path: Path) -> list[Frame]:
    """The whole records with a matching CRC-32, up to the first that is not."""
    data = path.read_bytes()
    if len(data) < len(MAGIC):  # just created: the header is on its way
        return []
    assert data[:len(MAGIC)] == MAGIC
    found, offset = [], len(MAGIC)
    while offset + 8 <= len(data):
        length, crc = struct.unpack_from("<II", data, offset)
        end = offset + 8 + length
        payload = data[offset + 8:end]
        if end > len(data) or length == 0 or zlib.crc32(payload) != crc:
            break
        kind = payload[:1]
        if kind == b"H":
            part = json.loads(payload[1:])
        else:
            size = int.from_bytes(payload[1:5], "little")
            part = json.loads(payload[5:5 + size])
        found.append(Frame(offset, end, kind, part))
        offset = end
    return found


def counts(found: list[Frame]) -> tuple[int, int, int]:
    rows = [f.part for f in found if f.kind == b"R"]
    return tuple(sum(p[key] for p in rows) for key in ("spans", "instants", "counters"))  # type: ignore[return-value]
