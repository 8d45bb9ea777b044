"""What role each kind of span got, and who gave it, for `workbench import --show-roles`.

A user who sees an NVTX range counted as host work that is in fact a lock hold can write
the rule that says so; this table shows, per role, the (track kind, span name) pairs that
carry it, how many spans each has and whether a rule (the user's or the importer's) or the
default from the track grammar assigned it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from workbench.model import tracks as tr
from workbench.model.roles import ROLES, default_role, role_counts, trace_rules
from workbench.render.safe import terminal_safe
from workbench.trace.container import Trace

TOP = 5  # pairs shown per role
NAME_WIDTH = 60


@dataclass(frozen=True)
class RolePair:
    role: str
    track_kind: str
    name: str
    spans: int
    source: str  # "default", "your rule N" (--roles) or "trace rule N" (the importer's, or saved)


def role_pairs(trace: Trace, user_rules: int = 0) -> list[RolePair]:
    """Every (role, track kind, name, source) with its span count, most spans first.

    The trace's rules are the user's `user_rules` first, then those it holds (an importer's, or
    a mapping saved with it)."""
    spans = trace.spans
    if not len(spans):
        return []
    rules = trace_rules(trace)
    text = trace.strings.values
    width = np.int64(len(text) + 1)
    keys, counts = np.unique(spans.track.astype(np.int64) * width + spans.name.astype(np.int64),
                             return_counts=True)
    totals: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for key, count in zip(keys.tolist(), counts.tolist(), strict=True):
        track, name = text[key // int(width)], text[key % int(width)]
        matched = next((i for i, rule in enumerate(rules) if rule.matches(track, name)), None)
        if matched is None:
            role, source = default_role(track, name), "default"
        else:
            role = rules[matched].role
            source = _source(matched, user_rules)
        totals[(role, tr.parse(track).kind, name, source)] += count
    pairs = [RolePair(role, kind, name, n, source) for (role, kind, name, source), n in totals.items()]
    return sorted(pairs, key=lambda p: (-p.spans, p.role, p.track_kind, p.name))


@terminal_safe
def render_roles(trace: Trace, user_rules: int = 0) -> str:
    pairs = role_pairs(trace, user_rules)
    by_role: dict[str, list[RolePair]] = defaultdict(list)
    for pair in pairs:
        by_role[pair.role].append(pair)
    out = [f"roles of {len(trace.spans):,} spans (role, spans, what it means; then the top "
           f"(track kind, span name) pairs and what assigned them):"]
    shown = [p for group in by_role.values() for p in group[:TOP]]
    width = min(NAME_WIDTH, max((len(p.name) for p in shown), default=0))
    counts = role_counts(trace)
    for role in sorted(counts, key=lambda r: -counts[r]):
        group = by_role[role]
        out.append(f"  {role:<12} {counts[role]:>10,}  {ROLES[role]}")
        for pair in group[:TOP]:
            name = pair.name if len(pair.name) <= width else pair.name[:width - 3] + "..."
            out.append(f"      {pair.spans:>10,}  {pair.track_kind:<10} {name:<{width}}  {pair.source}")
        if len(group) > TOP:
            out.append(f"      ... and {len(group) - TOP} more pairs")
    if not pairs:
        out.append("  (no spans)")
    rules = trace_rules(trace)
    if rules:
        out.append("rules, first match wins:")
    for n, rule in enumerate(rules):
        who = _source(n, user_rules)
        fields = " ".join(f"{k}={v!r}" for k, v in rule.as_dict().items() if k != "role")
        out.append(f"  {who:<14} {rule.role:<12} {fields}")
    out.append('to change one: a file with [[role]] tables (role = "lock_hold", name = "<regex>", '
               'track = "<regex>") passed as --roles FILE')
    return "\n".join(out)


def _source(rule: int, user_rules: int) -> str:
    return f"your rule {rule + 1}" if rule < user_rules else f"trace rule {rule - user_rules + 1}"
