"""Where every output file goes: checked before work starts, written whole or not at all.

An output never replaces what is not an ordinary file: renaming a new file over `/dev/null`,
a FIFO, a socket or a symbolic link would destroy it (as root `/dev/null` itself), so such a
target is refused with the reason. A file is written beside its target under a temporary
name, flushed to disk and renamed, so a full disk, a crash or Ctrl-C leave the old file (or
none) and never half a new one. A fresh name (a run's default trace) is published with a
hard link, which fails when the name exists, so runs started at the same moment never
overwrite each other. A temporary name carries its writer's process id: one left by a
writer that was killed (SIGKILL mid-save) is removed by the next write of that output, and by
`workbench recover`.
"""

from __future__ import annotations

import errno
import glob
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import BinaryIO

# Read once at import (reading it means setting it), not while other threads create files.
_UMASK = os.umask(0o022)
os.umask(_UMASK)
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


TEMPORARY_SUFFIX = ".tmp"


class OutputError(ValueError):
    """An output path that cannot or must not be written; the message names path and reason."""


def _where(path: str | os.PathLike[str], flag: str | None) -> str:
    return f"{flag} {os.fspath(path)}" if flag else os.fspath(path)


def _not_regular(path: Path) -> str | None:
    """Why an existing `path` must not be replaced, or None (missing, or an ordinary file)."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # the folder's own check says why
        return None
    if stat.S_ISLNK(info.st_mode):
        return f"is a symbolic link to {os.readlink(path)}, not a regular file (give the target itself)"
    for test, kind in _KINDS:
        if test(info.st_mode):
            return f"is {kind}, not a regular file"
    return None if stat.S_ISREG(info.st_mode) else "is not a regular file"


def check(path: str | os.PathLike[str] | None, flag: str | None = None) -> Path:
    """`path` as a Path when a file can be written there; OutputError naming flag, path and
    reason otherwise: the folder must exist and be writable, the name fit the file system,
    and the target, if there, be an ordinary file."""
    text = "" if path is None else os.fspath(path)
    where = _where(text, flag)
    if not text.strip():
        raise OutputError(f"{flag or 'output path'} is empty: give a file name")
    if text.endswith(os.sep):
        raise OutputError(f"{where}: ends with {os.sep}, a folder; give a file name")
    target = Path(text)
    limit = _name_max(target)
    if len(os.fsencode(target.name)) > limit:
        raise OutputError(f"{where}: file name is {len(os.fsencode(target.name))} bytes, longer than the "
                          f"{limit} this file system allows")
    if len(os.fsencode(os.path.abspath(target))) >= 4096:
        raise OutputError(f"{where}: path is longer than the 4096 bytes a path may have")
    reason = _not_regular(target)
    if reason:
        raise OutputError(f"{where}: {reason}")
    if target.exists() and not os.access(target, os.W_OK):
        raise OutputError(f"{where}: exists and is not writable")
    check_folder(target.parent, where)
    return target


def check_folder(folder: Path, where: str, *, created: bool = False) -> None:
    """A folder files can be written into; with `created`, one the writer will create, so a
    missing one is fine where the folder above it can take it."""
    if created and not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not os.path.lexists(folder):
        raise OutputError(f"{where}: folder {folder} does not exist")
    if not folder.is_dir():
        raise OutputError(f"{where}: {folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{where}: folder {folder} is not writable")


def check_all(outputs: Sequence[tuple[str, str | os.PathLike[str] | None]],
              inputs: Iterable[str | os.PathLike[str]] = ()) -> list[Path | None]:
    """Each (flag, path) checked (None: that output is not asked for), and no two outputs, nor
    an output and an input, naming one file."""
    checked = [None if path is None else check(path, flag) for flag, path in outputs]
    seen: dict[str, str] = {os.path.realpath(p): "the input" for p in inputs}
    for (flag, _), path in zip(outputs, checked, strict=True):
        if path is None:
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise OutputError(f"{flag} {path}: the same file as {seen[key]}; give each output its own path")
        seen[key] = f"{flag} {path}"
    return checked


def check_beside(path: str | os.PathLike[str], flag: str, inputs: Iterable[str | os.PathLike[str]]) -> Path:
    """One output checked, and not one of the command's inputs (a report written over its trace)."""
    (target,) = check_all([(flag, path)], inputs)
    assert target is not None
    return target


def write(path: str | os.PathLike[str], fill: Callable[[BinaryIO], object], *,
          fresh: bool = False) -> Path:
    """Write `path` whole through `fill(handle)`, or leave it as it was. With `fresh`, an
    existing `path` is never replaced: the next free name (`name-2.ext`, ...) is taken.
    Returns the path written."""
    target = Path(path)
    reason = _not_regular(target)
    if reason:
        raise OutputError(f"{target}: {reason}")
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=temporary_prefix(target), suffix=TEMPORARY_SUFFIX)
    try:
        try:
            with os.fdopen(fd, "wb") as handle:
                fill(handle)
                handle.flush()
                os.fsync(handle.fileno())
            # A temporary file is private; the output itself is an ordinary file to share.
            os.chmod(tmp, 0o666 & ~_UMASK)
            written = _publish_fresh(tmp, target) if fresh else _publish(tmp, target)
        except OSError as err:
            if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO):
                raise OSError(err.errno, f"cannot write ({err.strerror}); nothing written",
                              os.fspath(target)) from None
            raise
    finally:
        _remove(tmp)
    _sync_folder(written.parent)
    return written


def temporary_prefix(target: Path, pid: int | None = None) -> str:
    # Short (the target's own name may be as long as the file system allows), and naming the
    # writing process, so a temporary file whose writer was killed can be told from one being
    # written.
    return f".{target.name[:40]}.{os.getpid() if pid is None else pid}-"


def remove_stale_temporaries(target: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files a killed writer of `target` left beside it (SIGKILL mid-save):
    those whose process id names no running process. Returns what was removed."""
    target = Path(target)
    removed: list[Path] = []
    try:
        found = list(target.parent.glob(f".{glob.escape(target.name[:40])}.*-*{TEMPORARY_SUFFIX}"))
    except OSError:
        return removed
    for path in found:
        pid = path.name[len(target.name[:40]) + 2:].partition("-")[0]
        if pid.isdigit() and pid.isascii() and not process_running(int(pid)) and path.is_file():
            try:
                path.unlink()
            except OSError:
                continue
            removed.append(path)
    return removed


def process_running(pid: int) -> bool:
    """Whether a process of this id runs (another user's counts: it may be writing)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:
        return True  # another user's process
    return True


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    return write(path, lambda handle: handle.write(text.encode("utf-8")))


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    return write(path, lambda handle: handle.write(data))


def fresh_run_path(folder: str | os.PathLike[str] = "runs", prefix: str = "run", suffix: str = ".wbtrace",
                   ) -> Path:
    """A default run name: the time to the microsecond and the process id, so runs started at
    the same moment get different names (`write(..., fresh=True)` settles any clash left)."""
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return Path(folder) / f"{prefix}-{stamp}.{int(now % 1 * 1e6):06d}-{os.getpid()}{suffix}"


def create_fresh(path: str | os.PathLike[str], keep: str = "") -> tuple[int, Path]:
    """A new, empty file at `path`, or at the next free name beside it (`name-2.ext`, ...; the
    number goes before a `keep` suffix: `t.wbtrace.wbjournal`, `t-2.wbtrace.wbjournal`),
    opened for appending: (file descriptor, path). Created exclusively, so it never replaces
    or follows what is there (a file, a symbolic link, a device)."""
    target = Path(path)
    keep = keep if keep and target.name.endswith(keep) and target.name != keep else ""
    inner = Path(target.name[:len(target.name) - len(keep)])
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for number in range(1, 10_000):
        name = target if number == 1 else target.with_name(f"{inner.stem}-{number}{inner.suffix}{keep}")
        try:
            return os.open(name, flags, 0o666), name
        except FileExistsError:
            continue
    raise OutputError(f"{target}: no free name beside it (tried 9999)")


def _publish(tmp: str, target: Path) -> Path:
    # Checked again just before the rename: the target may have changed while we wrote.
    reason = _not_regular(target)
    if reason:
        raise OutputError(f"{target}: {reason}")
    os.replace(tmp, target)
    return target


def _publish_fresh(tmp: str, target: Path) -> Path:
    for number in range(1, 10_000):
        name = target if number == 1 else target.with_name(f"{target.stem}-{number}{target.suffix}")
        try:
            os.link(tmp, name)  # fails if the name exists: exclusive, and whole from the start
            return name
        except FileExistsError:
            continue
        except OSError as err:
            if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
                raise
        try:  # a file system without hard links: claim the name empty, then rename over it
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            continue
        os.replace(tmp, name)
        return name
    raise OutputError(f"{target}: no free name beside it (tried 9999)")


def _remove(tmp: str) -> None:
    """Remove a temporary file even if Ctrl-C arrives again meanwhile (it is raised after)."""
    interrupted: KeyboardInterrupt | None = None
    while True:
        try:
            Path(tmp).unlink(missing_ok=True)
            break
        except KeyboardInterrupt as again:
            interrupted = again
    if interrupted is not None:
        raise interrupted


def _sync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems do not sync folders; the rename stands regardless
        pass
    finally:
        os.close(fd)


def _name_max(path: Path) -> int:
    try:
        return int(os.pathconf(path.parent if path.parent.is_dir() else ".", "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255
