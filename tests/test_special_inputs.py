"""Inputs that are not regular files, or that grow without bound when read: refused or read once."""

import gzip
import importlib
import os
import re
import threading
import time
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.importers import ImportFailed, chrome_stream, load_any
from workbench.trace import TraceFormatError, load

SEED_LOG = Path(__file__).parent / "data" / "cuzk_seed" / "daemon.log"
KINETO = Path(__file__).parent / "data" / "kineto"


def test_a_device_is_refused_in_one_line_at_once(capsys):
    started = time.monotonic()
    with pytest.raises(ImportFailed, match=r"^/dev/zero: a device or socket, not a trace"):
        load_any("/dev/zero")
    with pytest.raises(TraceFormatError, match=r"/dev/zero is not a regular file"):
        load("/dev/zero")
    assert main(["summary", "/dev/zero"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "/dev/zero" in err
    assert time.monotonic() - started < 5


def _fifo_fed_with(tmp_path, data: bytes) -> tuple[Path, threading.Thread]:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as writer:  # in small writes, as `cat` does, so a short read would lose data
            for at in range(0, len(data), 4096):
                writer.write(data[at:at + 4096])
                writer.flush()

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    return fifo, writer


def test_a_pipe_is_read_once_and_keeps_every_span(tmp_path):
    data = SEED_LOG.read_bytes()
    assert len(data) > 4096 * 4  # more than the sniffer's look: the loss was past it
    fifo, writer = _fifo_fed_with(tmp_path, data)
    piped = load_any(fifo)
    writer.join(5)
    whole = load_any(SEED_LOG)
    assert len(whole.spans) > 0
    assert list(piped.iter_spans()) == list(whole.iter_spans())
    assert piped.meta["import"]["source"] == str(fifo)


def test_a_pipe_of_a_gzipped_trace_and_a_bad_pipe_are_named_by_the_pipe(tmp_path):
    gz = next(KINETO.glob("*.json.gz"))
    fifo, writer = _fifo_fed_with(tmp_path, gz.read_bytes())
    assert len(load_any(fifo).spans) == len(load_any(gz).spans) > 0
    writer.join(5)
    os.unlink(fifo)
    fifo, writer = _fifo_fed_with(tmp_path, b"PK\x03\x04 not a zip")
    with pytest.raises(TraceFormatError, match=re.escape(str(fifo)) + " is not a workbench trace"):
        load_any(fifo)
    writer.join(5)


def test_a_pipe_past_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(importlib.import_module("workbench.importers.sniff"), "PIPE_LIMIT", 10_000)
    fifo, writer = _fifo_fed_with(tmp_path, SEED_LOG.read_bytes())
    with pytest.raises(ImportFailed, match=r"a pipe holding more than"):
        load_any(fifo)
    writer.join(5)


def test_a_gzip_bomb_is_refused_while_streaming(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(chrome_stream, "GZIP_FLOOR", 1 << 16)
    event = b'{"name": "k", "ph": "X", "ts": 1, "dur": 1, "pid": 1, "tid": 1},'
    text = b"[" + event * 200_000 + b"{}]"
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(text))  # 13 MB of text in about 40 KB: 350 times
    limit = chrome_stream.gzip_limit(bomb.stat().st_size)
    assert limit == chrome_stream.GZIP_RATIO * bomb.stat().st_size < len(text)
    with pytest.raises(ImportFailed, match=rf"bomb\.json\.gz: decompresses to more than {limit} bytes"):
        load_any(bomb)
    assert main(["summary", str(bomb)]) == 2
    assert "bomb.json.gz: decompresses" in capsys.readouterr().err
    assert chrome_stream.gzip_limit(10**12) == 8 << 30
