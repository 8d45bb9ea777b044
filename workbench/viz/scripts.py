"""The Gantt's JavaScript, kept in js/*.js beside this module (package data) so it reads and
lints as JavaScript; a callback's code is its file, after js/common.js where it shares state."""

from __future__ import annotations

import functools
from importlib import resources


@functools.cache
def script(name: str, shared: bool = True) -> str:
    folder = resources.files("workbench.viz") / "js"
    code = (folder / f"{name}.js").read_text(encoding="utf-8")
    return (folder / "common.js").read_text(encoding="utf-8") + "\n" + code if shared else code
