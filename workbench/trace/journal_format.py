"""The journal's framing: records that say where they end and whether they arrived whole.

A journal (`.wbjournal`) is `MAGIC` followed by records, each

    length  u32 little-endian   bytes of the payload
    crc     u32 little-endian   CRC-32 of the payload
    payload kind byte, then the body

appended one whole `write` at a time, so a process killed mid-write leaves at most its last
record cut short, which its length gives away; a changed byte anywhere changes its CRC. The
reader keeps every record before the first that is cut off or fails its check and drops that
one and all after it: nothing from after damage is ever returned.

Kinds: `HEADER` (first record, once: JSON of format, version, target trace, process id,
recorder origin, config and facts at the start), `ROWS` (what was recorded since the record
before; see journal.py for its body).
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

MAGIC = b"\x89WBJRNL\n"  # not text, not a zip: never mistaken for a trace, a log or an export
FORMAT = "workbench-journal"
VERSION = 1
SUFFIX = ".wbjournal"
HEADER, ROWS = b"H", b"R"
FRAME = struct.Struct("<II")
# The columns of a ROWS record's body, in order, after its JSON part (journal.py).
I32, I64, F64 = np.dtype("<i4"), np.dtype("<i8"), np.dtype("<f8")
# spans: track, name, start_ns, end_ns, partition, worker; instants: track, name, ts_ns,
# partition, worker; counters: track, name, ts_ns, value. Track and name number strings.
SPAN_COLUMNS: tuple[np.dtype, ...] = (I32, I32, I64, I64, I32, I32)
INSTANT_COLUMNS: tuple[np.dtype, ...] = (I32, I32, I64, I32, I32)
COUNTER_COLUMNS: tuple[np.dtype, ...] = (I32, I32, I64, F64)
# A flush holds at most a second of records; a length beyond this is damage, not data.
MAX_RECORD = 1 << 30


def frame(kind: bytes, body: bytes) -> bytes:
    payload = kind + body
    return FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def write_all(fd: int, data: bytes) -> None:
    """Write `data` whole to a pipe or file (a write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@dataclass(frozen=True)
class Record:
    number: int  # 0 is the header
    offset: int  # of its frame in the file
    kind: bytes
    body: bytes


@dataclass
class Ending:
    """How reading stopped: at the end of the file, or at a record cut off or damaged."""

    offset: int = 0  # where the kept records end
    size: int = 0  # of the file
    torn: bool = False  # the last record was cut short (a write killed half way)
    damaged: str | None = None  # what is wrong with the record at `offset`

    @property
    def dropped(self) -> int:
        return self.size - self.offset


def records(handle: BinaryIO, size: int, ending: Ending) -> Iterator[Record]:
    """The whole, checked records after MAGIC (the caller checked it); `ending` says how it stopped."""
    offset = len(MAGIC)
    ending.size = size
    number = 0
    while True:
        ending.offset = offset
        head = handle.read(FRAME.size)
        if not head:
            return
        if len(head) < FRAME.size:
            ending.torn = True
            return
        length, crc = FRAME.unpack(head)
        if length == 0 or length > MAX_RECORD:
            ending.damaged = f"declares {length} bytes"
            return
        if offset + FRAME.size + length > size:
            ending.torn = True
            return
        payload = handle.read(length)
        if len(payload) < length:
            ending.torn = True
            return
        if zlib.crc32(payload) != crc:
            ending.damaged = "fails its checksum"
            return
        yield Record(number, offset, payload[:1], payload[1:])
        offset += FRAME.size + length
        number += 1
