"""Names and metadata from a foreign trace never reach a terminal as control sequences."""

import json

import pytest

from workbench.analysis.whatif import Change, WhatIfError
from workbench.cli import main
from workbench.render.safe import terminal_text

CLEAR, TITLE, BIDI = "\x1b[2J", "\x1b]0;owned\x07", "\u202e"


def test_control_characters_come_out_visible():
    assert terminal_text(f"a{CLEAR}b\tc\nd{BIDI}\x9b") == "a\\x1b[2Jb\tc\nd\\u202e\\x9b"
    assert terminal_text("plain ✓ text") == "plain ✓ text"


def test_a_hostile_trace_prints_no_escape_from_any_command(tmp_path, capsys):
    events = [{"name": f"kernel{CLEAR}", "ph": "X", "ts": 10 * i, "dur": 5, "pid": 1, "tid": 7,
               "cat": "kernel", "args": {"note": TITLE}} for i in range(20)]
    events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": 7, "args": {"name": f"t{TITLE}{BIDI}"}})
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"traceEvents": events, "otherData": {"host": CLEAR}}))
    printed = ""
    for argv in (["summary"], ["diagnose"], ["import", "--show-roles"]):
        assert main([*argv, str(path)]) in (0, 1), argv
        out = capsys.readouterr()
        printed += out.out + out.err
    assert "kernel\\x1b[2J" in printed  # shown, escaped
    assert "\x1b" not in printed and BIDI not in printed and "\x07" not in printed


def test_whatif_factors_are_bounded_in_the_library_too():
    with pytest.raises(WhatIfError, match=r"synthesis_speedup=1e-300 is not allowed"):
        Change(synthesis_speedup=1e-300)
    assert Change(compute_speedup=1000).compute_speedup == 1000
