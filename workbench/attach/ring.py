"""The recorder's end of the shared-memory ring (layout in ring.h, which the shim writes).

The ring lives in a memory file of the recorder's (`memfd`), named to the program by a path
under /proc/<recorder>/fd, so nothing is left on disk or in /dev/shm however the recorder
ends; where memory files are missing it is a temporary file, removed at `close()`.

`drain()` copies the events published since the last call (a vectorised check of the slots'
sequence words) and the text records, then frees their slots. Events come first: a text an
event names is always published before the event, so it is in the same drain or an earlier one.

Contract: `Ring.create(capacity, text_capacity)`, `.path`, `.drain(final) -> Drained`, `.close()`.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
from dataclasses import dataclass, field

import numpy as np

MAGIC = 0x31304752494E4257
VERSION = 1
DATA_OFFSET = 4096
HEAD, TAIL, DROPPED, TEXT_HEAD, TEXT_TAIL, TEXT_DROPPED, NEXT_ID = 64, 128, 192, 256, 320, 384, 448
FEATURES = 36
UNRECORDED, UNTRACKED = 40, 48  # holds the shim did not send (uncontended mutexes); mutexes past its set
FEATURE_NAMES = {1: "locks", 2: "nvtx", 4: "cupti"}
TEXT_MAX = 224

EVENT = np.dtype([("seq", "<u4"), ("kind", "<u2"), ("flags", "<u2"), ("tid", "<u4"), ("pid", "<u4"),
                  ("obj", "<u8"), ("aux", "<u8"), ("t0", "<u8"), ("t1", "<u8")])
TEXT = np.dtype([("seq", "<u4"), ("kind", "<u2"), ("len", "<u2"), ("pid", "<u4"), ("tid", "<u4"),
                 ("id", "<u8"), ("ref", "<u8"), ("text", f"S{TEXT_MAX}")])
assert EVENT.itemsize == 48 and TEXT.itemsize == 256

# Event kinds and flags (ring.h)
LOCK, UNLOCK, COND, SEM, PUSH, POP, START, END, MARK = 1, 2, 3, 4, 5, 6, 7, 8, 9
KERNEL, MEMCPY, MEMSET, SYNC, API, CLOCK, OVERHEAD = 16, 17, 18, 19, 20, 21, 22
LAUNCH, WINDOW = 23, 24  # host-timed kernel launches and sampling windows (launches.h)
T_STRING, T_DOMAIN, T_OBJECT, T_THREAD, T_NOTE = 1, 2, 3, 4, 5
F_TRY, F_TIMED, F_TIMEOUT, F_COND, F_WAITED = 1, 2, 4, 8, 16


@dataclass(frozen=True)
class Text:
    kind: int
    pid: int
    tid: int
    id: int
    ref: int
    text: str


@dataclass
class Drained:
    events: np.ndarray  # of EVENT, in ring order
    texts: list[Text] = field(default_factory=list)
    lost: int = 0  # slots reserved by a program that never published them (it died meanwhile)


class Ring:
    def __init__(self, fd: int, path: str, size: int, capacity: int, text_capacity: int,
                 remove: str | None) -> None:
        self.path = path  # what the program opens (WORKBENCH_RECORD_RING)
        self.capacity = capacity
        self.text_capacity = text_capacity
        self._remove = remove
        self._map = mmap.mmap(fd, size)
        os.close(fd)
        self._words = np.frombuffer(self._map, dtype="<u8", count=DATA_OFFSET // 8)
        self._events = np.frombuffer(self._map, dtype=EVENT, count=capacity, offset=DATA_OFFSET)
        self._texts = np.frombuffer(self._map, dtype=TEXT, count=text_capacity,
                                    offset=DATA_OFFSET + capacity * EVENT.itemsize)
        self.lost = 0
        self._fd: int | None = None

    @classmethod
    def create(cls, capacity: int = 1 << 19, text_capacity: int = 1 << 14) -> Ring:
        for n, what in ((capacity, "capacity"), (text_capacity, "text capacity")):
            if n < 2 or n & (n - 1):
                raise ValueError(f"ring {what} must be a power of two, not {n}")
        size = DATA_OFFSET + capacity * EVENT.itemsize + text_capacity * TEXT.itemsize
        remove = None
        if hasattr(os, "memfd_create") and os.path.isdir(f"/proc/{os.getpid()}/fd"):
            fd = os.memfd_create("workbench-record-ring")
            path = f"/proc/{os.getpid()}/fd/{fd}"
        else:
            fd, path = tempfile.mkstemp(prefix="workbench-ring-")
            remove = path
        os.ftruncate(fd, size)
        header = np.zeros(8, "<u8")
        header[0] = MAGIC
        header[1] = VERSION | (EVENT.itemsize << 32)
        header[2], header[3], header[4] = capacity, text_capacity, TEXT.itemsize
        os.pwrite(fd, header.tobytes(), 0)
        ring = cls(os.dup(fd), path, size, capacity, text_capacity, remove)
        ring._fd = fd  # kept open: /proc/<pid>/fd/<fd> is the name the program opens (or `fd`, inherited)
        return ring

    @property
    def fd(self) -> int:
        assert self._fd is not None
        return self._fd

    def _word(self, offset: int) -> int:
        return int(self._words[offset // 8])

    @property
    def dropped(self) -> int:
        """Events and texts the program dropped because the ring was full."""
        return self._word(DROPPED) + self._word(TEXT_DROPPED)

    @property
    def unrecorded(self) -> int:
        """Holds of mutexes no thread waited for, counted by the shim and not sent (`--locks
        contended`; a thread's last < 256 are lost when it ends before the program does)."""
        return self._word(UNRECORDED)

    @property
    def untracked(self) -> int:
        """Contended mutexes past the shim's set of them: their holds are not all recorded."""
        return self._word(UNTRACKED)

    @property
    def features(self) -> set[str]:
        """What attached: locks (the preloaded shim), nvtx (the injection), cupti."""
        bits = int(np.frombuffer(self._map, "<u4", 1, FEATURES)[0])
        return {name for bit, name in FEATURE_NAMES.items() if bits & bit}

    def drain(self, final: bool = False) -> Drained:
        """What was published since the last drain. `final` (the program has ended): a slot
        that was reserved but never published is skipped and counted in `lost`."""
        events, lost = self._take(self._events, HEAD, TAIL, self.capacity, final)
        texts, lost_texts = self._take(self._texts, TEXT_HEAD, TEXT_TAIL, self.text_capacity, final)
        self.lost += lost + lost_texts
        return Drained(events, [_text(t) for t in texts], lost + lost_texts)

    def _take(self, slots: np.ndarray, head_at: int, tail_at: int, capacity: int,
              final: bool) -> tuple[np.ndarray, int]:
        head, tail = self._word(head_at), self._word(tail_at)
        if head == tail:
            return slots[:0].copy(), 0
        positions = np.arange(tail, head, dtype=np.uint64)
        index = (positions & np.uint64(capacity - 1)).astype(np.int64)
        ready = slots["seq"][index] == ((positions + np.uint64(1)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        lost = 0
        if final:
            taken = slots[index[ready]].copy()
            lost = int((~ready).sum())
            count = len(positions)
        else:
            count = int(np.argmin(ready)) if not ready.all() else len(positions)
            taken = slots[index[:count]].copy()
        self._words[tail_at // 8] = tail + count  # frees the slots: copied above
        return taken, lost

    def close(self) -> None:
        self._words = self._events = self._texts = None  # type: ignore[assignment]
        with contextlib.suppress(BufferError):  # a view still out there: the memory goes with it
            self._map.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._remove:
            os.unlink(self._remove)
            self._remove = None


def _text(row: np.void) -> Text:
    raw = bytes(row["text"])[: int(row["len"])]
    return Text(int(row["kind"]), int(row["pid"]), int(row["tid"]), int(row["id"]), int(row["ref"]),
                raw.decode("utf-8", errors="replace"))
