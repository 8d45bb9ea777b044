"""What every command that reads a trace shares: one reader entry and the role mapping.

Every command takes any input the importers read (the format is sniffed from the file's
first bytes) and `--roles FILE`, which is read before the input so a bad mapping is refused
before a long import.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.model.roles import ROLE_NAMES, RoleRule

if TYPE_CHECKING:
    from workbench.trace.container import Trace

INPUTS = ("a workbench trace (.wbtrace), an nsys SQLite export, Chrome or Kineto trace JSON "
          "(.json, .json.gz) or a cuzk daemon log")
ROLES_HELP = ("role mapping file, TOML ([[role]] tables) or JSON: each rule has role, name and/or track "
              "(regular expressions) and, for lock roles, lock; it overrides the roles found automatically. "
              f"Roles: {', '.join(ROLE_NAMES)}")


def add_input(parser: argparse.ArgumentParser, name: str = "path", what: str = "") -> None:
    parser.add_argument(name, type=Path, help=(what + ": " if what else "") + INPUTS)


def add_roles(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--roles", type=Path, metavar="FILE", help=ROLES_HELP)


def read_rules(args: argparse.Namespace) -> tuple[RoleRule, ...]:
    from workbench.model.roles import load_rules

    path = getattr(args, "roles", None)
    return load_rules(path) if path is not None else ()


def load_input(path: Path, rules: tuple[RoleRule, ...] = ()) -> Trace:
    from workbench.importers import load_any
    from workbench.model.roles import with_rules

    trace = load_any(path)
    if rules:
        with_rules(trace, rules)
    return trace


def load_inputs(args: argparse.Namespace, *names: str) -> list[Trace]:
    """The traces named by the given arguments, with the mapping applied to each."""
    rules = read_rules(args)
    return [load_input(getattr(args, name), rules) for name in names]
