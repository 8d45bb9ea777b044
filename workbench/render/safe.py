"""Text from a trace made safe for a terminal.

Names, thread names and metadata come from files anyone may write; a terminal obeys the
control sequences they may hold (clear the screen, set the window title, hide text with
bidirectional overrides). Every renderer's text passes here: control characters other than
newline and tab come out as visible escapes (`\\x1b`), so what is printed is what was recorded.

Contract: `terminal_text(text) -> str`, `terminal_safe(renderer)` (a decorator).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import ParamSpec

_P = ParamSpec("_P")
# C0 and C1 controls but newline and tab, DEL, and the bidirectional embeddings and isolates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: str) -> str:
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def terminal_safe(renderer: Callable[_P, str]) -> Callable[_P, str]:
    @functools.wraps(renderer)
    def safe(*args: _P.args, **kwargs: _P.kwargs) -> str:
        return terminal_text(renderer(*args, **kwargs))

    return safe
