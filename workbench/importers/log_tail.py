"""A log read as it grows: a file that may be rotated or truncated, or a pipe (stdin).

`FileTail` reads what is appended to a file. When nothing new comes it looks at the path:
another file there (a new inode: the log was renamed away and a new one made) means the old
file, read to its end, is done and the new one is read from its start; a file shorter than
what was read (truncated in place, as copy-and-truncate rotation does) is read again from its
start. A path that is gone for a while (between the rename and the new file) is waited for.
`PipeTail` reads a pipe until it ends. Both say when they found nothing within the time
given, so the reader can tell a quiet log from a growing one.
"""

from __future__ import annotations

import os
import select
import stat
import time
from collections.abc import Callable
from pathlib import Path

CHUNK = 1 << 20  # bytes read at a time

Sleep = Callable[[float], object]


class FileTail:
    """`read(timeout)` -> (bytes, why the file before ended or "")."""

    def __init__(self, path: str | os.PathLike[str], from_start: bool = True,
                 sleep: Sleep = time.sleep) -> None:
        self.path = Path(path)
        self.sleep = sleep
        self._file = open(self.path, "rb")  # noqa: SIM115 (held open across reads, closed by close())
        info = os.fstat(self._file.fileno())
        if stat.S_ISDIR(info.st_mode):
            self._file.close()
            raise IsADirectoryError(21, "Is a directory", str(self.path))
        self._identity = (info.st_dev, info.st_ino)
        self.position = 0
        self.mid_line = False  # reading began inside a line (--from-end while one was being written)
        if not from_start and stat.S_ISREG(info.st_mode) and info.st_size:
            self._file.seek(info.st_size - 1)
            self.mid_line = self._file.read(1) != b"\n"
            self.position = info.st_size

    def read(self, timeout: float) -> tuple[bytes, str]:
        data = self._file.read(CHUNK)
        if data:
            self.position += len(data)
            return data, ""
        try:
            info = os.stat(self.path)
        except OSError:  # renamed away, the new one not there yet
            self.sleep(timeout)
            return b"", ""
        if (info.st_dev, info.st_ino) != self._identity:
            try:
                replacement = open(self.path, "rb")  # noqa: SIM115
            except OSError:
                self.sleep(timeout)
                return b"", ""
            self._file.close()
            self._file = replacement
            fresh = os.fstat(replacement.fileno())
            self._identity = (fresh.st_dev, fresh.st_ino)
            self.position = 0
            return b"", f"{self.path} was replaced by a new file (rotated): read from its start"
        if stat.S_ISREG(info.st_mode) and info.st_size < self.position:
            was = self.position
            self._file.seek(0)
            self.position = 0
            return b"", f"{self.path} was truncated ({was} to {info.st_size} bytes): read from its start"
        self.sleep(timeout)
        return b"", ""

    @property
    def ended(self) -> bool:
        return False  # a file can always grow

    def close(self) -> None:
        self._file.close()


class PipeTail:
    """A pipe or terminal (stdin) read until it ends."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.ended = False
        self.mid_line = False
        self.position = 0

    def read(self, timeout: float) -> tuple[bytes, str]:
        if self.ended:
            return b"", ""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return b"", ""
        data = os.read(self.fd, CHUNK)
        if not data:
            self.ended = True
        self.position += len(data)
        return data, ""

    def close(self) -> None:
        pass
