"""The package's layering (shared/LAYOUT.md): imports point down, and packages never import
each other in a circle.

Every module of `workbench` is parsed with `ast` (imports inside functions count, and so
do imports made only for type checking: both are dependencies a reader has to follow).
A node of the graph is a top-level piece of the package: a subpackage (`analysis`) or a
module (`config`, `cli`); `workbench` itself is the package's front door (its __init__).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from pathlib import Path

import workbench

ROOT = Path(workbench.__file__).parent

# (layer, row): the layers of LAYOUT.md, and inside a layer its rows, lowest first. An
# import may point to a lower (layer, row); to the same one only when SIDEWAYS says why.
LAYERS: dict[str, tuple[int, int]] = {
    # layer 0: plain values shared by everything
    "config": (0, 0), "events": (0, 0), "clock": (0, 0),
    # C libraries built on first use and cached (the synthesis code, the recording shims)
    "compiled": (0, 0),
    # Ray started or joined for whatever runs on it (a sweep's runs, a fleet's reads)
    "ray_cluster": (0, 0),
    # layer 1: the recording, then the model and the prover, which record through it
    "trace": (1, 0),
    "model": (1, 1), "prover": (1, 1),
    # layer 2: what works on traces and the prover, then what records device activity or
    # writes a trace out, then the runner that puts a backend and collectors together
    "gpu": (2, 0), "analysis": (2, 0), "importers": (2, 0),
    "collectors": (2, 1), "export": (2, 1), "render": (2, 1),
    "pipeline": (2, 2),
    # recording an unmodified program: its device records read as the collectors' are
    "attach": (2, 2),
    # many hosts' files read at once: drives the importers and the analysis
    "fleet": (2, 3),
    # sweeps run pipelines and read their traces' analyses
    "sweep": (2, 3),
    # a growing log followed: drives the importers' incremental reader and the analysis
    "follow": (2, 3),
    # layer 3: the views
    "viz": (3, 0),
    # layer 4: the ways in (the package's own front door re-exports config and trace)
    "cli": (4, 0), "commands": (4, 0), "notebook": (4, 0), "workbench": (4, 0),
    # `python -m workbench`: the command line, above it
    "__main__": (4, 1),
}

SIDEWAYS: dict[tuple[str, str], str] = {
    ("cli", "commands"): "the command line parser hands each subcommand to its module in commands/",
}


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def sources(root: Path = ROOT) -> dict[str, tuple[str, bool]]:
    """Module name -> (source, is a package's __init__)."""
    files = sorted(root.rglob("*.py"))
    return {module_name(p, root): (p.read_text(), p.name == "__init__.py") for p in files}


def imported(module: str, source: str, is_package: bool) -> set[str]:
    """The workbench modules (or their attributes, as dotted names) a module's source imports."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join([*here, *([node.module] if node.module else [])])
            out.update(f"{base}.{a.name}" for a in node.names)
    return {name for name in out if name == "workbench" or name.startswith("workbench.")}


def node_of(name: str, top_level: set[str]) -> str:
    """`workbench.analysis.verdict.diagnose` -> `analysis`; `workbench.RunConfig` -> `workbench`."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in top_level else "workbench"


def package_graph(modules: Mapping[str, tuple[str, bool]]) -> dict[str, set[str]]:
    top_level = {m.split(".")[1] for m in modules if "." in m}
    graph: dict[str, set[str]] = {}
    for module, (source, is_package) in modules.items():
        here = node_of(module, top_level)
        graph.setdefault(here, set())
        for name in imported(module, source, is_package):
            there = node_of(name, top_level)
            if there != here:
                graph[here].add(there)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def violations(graph: Mapping[str, set[str]]) -> list[str]:
    out = []
    for here in sorted(graph):
        for there in sorted(graph[here]):
            if here not in LAYERS or there not in LAYERS:
                out.append(f"{here} -> {there}: add the new part of the package to LAYERS")
            elif LAYERS[there] > LAYERS[here]:
                out.append(f"{here} {LAYERS[here]} -> {there} {LAYERS[there]} points up")
            elif LAYERS[there] == LAYERS[here] and (here, there) not in SIDEWAYS:
                out.append(f"{here} -> {there}: sideways, in the same row, and SIDEWAYS does not say why")
    return out


def test_the_package_has_no_import_circle():
    assert cycles(package_graph(sources())) == []


def test_every_import_points_down_the_layers():
    assert violations(package_graph(sources())) == []


def test_every_part_of_the_package_has_a_layer():
    graph = package_graph(sources())
    assert set(graph) == set(LAYERS), set(graph) ^ set(LAYERS)


def test_an_upward_import_and_a_circle_are_caught():
    # The checks above must be able to fail: inject imports into copies of the real sources.
    real = dict(sources())
    summary, is_package = real["workbench.analysis.summary"]
    injected = dict(real)
    upward = "\n\ndef _f():\n    from workbench.viz import gantt\n"
    injected["workbench.analysis.summary"] = (summary + upward, is_package)
    assert "analysis (2, 0) -> viz (3, 0) points up" in violations(package_graph(injected))
    trace_init, is_package = real["workbench.trace"]
    circle = "\nfrom workbench.analysis.summary import summarize\n"
    injected["workbench.trace"] = (trace_init + circle, is_package)
    assert any({"analysis", "trace"} <= set(c) for c in cycles(package_graph(injected)))


def test_imports_inside_functions_and_relative_imports_count():
    source = ("def f():\n    from ..analysis import summary\n    import workbench.trace.store\n"
              "from . import x\n")
    names = imported("workbench.viz.gantt", source, is_package=False)
    assert names == {"workbench.analysis.summary", "workbench.trace.store", "workbench.viz.x"}
