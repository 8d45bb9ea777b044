"""What watching a run live in the notebook costs the run: the panel's run watched through a
real kernel's widget comm, and the same run unwatched in the same kernel.

    python benchmarks/live_cost_notebook.py [--view process|kernel] [--backend cpu|gpu]
                                            [--partitions N] [--spans 20000] [--log2 K]
                                            [--rounds 2] [--[no-]gpu-trace] [--budget-s S]
                                            [--json FILE]

This process starts a Jupyter kernel (ipykernel, of this interpreter, importing this
checkout) and is its front end, as a notebook's page is: it listens on the kernel's iopub
channel, and for each widget comm of the model "BokehModel" it builds the document from the
widget's render bundle and applies every patch the kernel sends over the comm, the pieces put
together as the page's bokeh receiver does (header, metadata, content, then for each buffer
its header and its bytes), and sends the kernel back every change each patch made, the data
streamed included, as the page's front end does (its echoes: the kernel takes them in, and
passes none of the data on). It does not draw: in real use the browser runs on the user's
machine, so what costs the run is the kernel's side (the view's updates, serialised and sent
over the comm). Its own CPU seconds are given apart.

Watched: in the kernel, the panel (viz/panel.py) is built with the run's settings and the
live view asked for (`--view`: `process`, the panel's default, made in a process of its own
whose patches the kernel passes on over the widget's comm; `kernel`, made in the kernel), Run
is pressed and the cell returns, as a user's does; a short cell every POLL_S asks whether the
run has ended (the kernel takes the front end's messages between cells). Unwatched:
the panel's own kind of run (viz/runner.py's BackgroundRun: the pipeline on a thread, no
trace file) in the same kernel, nobody looking and no panel built, started and asked after
in the same way. Rounds alternate
(watched, then unwatched) so a change in the host's load hits both. Warm-ups first, not
counted: an unwatched run (proving key, kernel builds; it also gives the spans a partition
makes, from which `--partitions` is set to reach `--spans`) and a short watched one (the
view's first use). `--backend gpu` runs the case study's cell as benchmarks/live_cost.py
does (its run_config).

Each run's line gives its throughput (the run summary's), the kernel's CPU seconds (its own
process: the run and whatever watching it costs the interpreter) and its child processes'
(a view's process; a GPU run's synthesis processes), and, watched, what the front end
received: the bars streamed into the Gantt's sources (live_bars_0..2) against the run's
spans, the bars its copy holds at the end, the comm messages and bytes. Then the medians,
the ratio watched/unwatched against the target (the live view costs the run at most 5% of
its throughput at 20,000 spans and 10 Hz), and the host's load. benchmarks/live_cost.py
measures the same with a served document instead of the notebook.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import queue
import resource
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULT = "live_cost_notebook:"  # the kernel's result line on its stdout: this, then JSON
TAG = "WORKBENCH_NOTEBOOK_BENCH"  # in the kernel's environment: finds what it left behind
VIEWS = {"process": "a process of its own (the panel's default), its patches passed on by the kernel over "
                    "a widget comm",
         "kernel": "in the kernel (a bokeh widget, patches sent over its comm)"}
MODEL = "BokehModel"  # the bokeh widget's model name (its comm_open's state)
POLL_S = 0.5  # between the front end's cells that ask whether the run has ended


# -- the kernel's side: called by the cells this process sends ------------------------------------

def _descendants(pid: int) -> dict[int, float]:
    """The CPU seconds of every live process under `pid`, by pid (from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    mine: set[int] = {pid}
    grew = True
    while grew:
        grew = False
        for child, (parent, _) in stats.items():
            if parent in mine and child not in mine:
                mine.add(child)
                grew = True
    return {p: stats[p][1] for p in mine - {pid} if p in stats}


def _cpu() -> tuple[float, float]:
    """The kernel's own CPU seconds, and its child processes' (ended and reaped, or still running)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    running = sum(_descendants(os.getpid()).values())
    return me.ru_utime + me.ru_stime, ended.ru_utime + ended.ru_stime + running


def _numbers(source: Any, names: tuple[str, ...]) -> dict[str, float]:
    """What a view says of itself, where it says it: the figures it has among `names`."""
    out: dict[str, float] = {}
    for name in names:
        value = getattr(source, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def _say(result: dict[str, Any]) -> None:
    print(RESULT + json.dumps(result), flush=True)


_BACKGROUND: dict[str, Any] = {}


def in_background(what: str, *args: Any) -> None:
    """Start `what` (in_kernel_watched or in_kernel_unwatched) on a thread and return, as a
    notebook's cell that presses Run does: the kernel is then free to take the front end's
    messages (the browser's changes and its echoes of every patch) while the run goes on."""
    import threading

    _BACKGROUND.clear()

    def body() -> None:
        try:
            _BACKGROUND["result"] = globals()[what](*args)
        except BaseException as err:  # said by `collect`, in the cell that asks
            _BACKGROUND["error"] = err

    thread = threading.Thread(target=body, name="bench-run", daemon=True)
    _BACKGROUND["thread"] = thread
    thread.start()
    _say({"started": True})


def collect() -> None:
    """Whether the run started by `in_background` has ended: its result once it has."""
    thread = _BACKGROUND.get("thread")
    if thread is None:
        raise RuntimeError("no run was started")
    if thread.is_alive():
        _say({"done": False})
        return
    if "error" in _BACKGROUND:
        raise _BACKGROUND["error"]
    _say({"done": True, **_BACKGROUND["result"]})


def in_kernel_watched(config_json: str, view: str, timeout_s: float) -> dict[str, Any]:
    """The panel built, Run pressed, the end waited for: as a user's cell and click do."""
    import ipywidgets

    from workbench.config import RunConfig
    from workbench.viz.panel import ControlPanel

    config = RunConfig.from_json(config_json)
    panel = ControlPanel(config, live_view=view)
    asked = panel.knobs.check().config
    if asked != config:  # the unwatched run must do the same work
        raise RuntimeError(f"the panel would run {asked}, not {config}")
    began_cpu, began_children = _cpu()
    began = time.perf_counter()
    panel.run()
    run = panel.current
    # Counted to the run's end, as the unwatched run is: what the panel does after it (the
    # record, the verdict) is given apart.
    ended = run is not None and run.join(timeout_s)
    wall_s = time.perf_counter() - began
    cpu, children = _cpu()
    if not ended or not panel.wait(60):
        panel.stop()
        panel.wait(60)
        raise TimeoutError(f"the watched run had not ended after {timeout_s:.0f} s")
    finish_cpu_s = _cpu()[0] - cpu
    record = panel.last
    if record is None or record.outcome != "completed":
        raise RuntimeError(f"the watched run did not complete: {panel.status.value} {panel.message.value}")
    result: dict[str, Any] = {
        "rate": record.summary.throughput_per_min, "spans": len(record.trace.spans),
        "run_s": record.summary.wall_s, "wall_s": wall_s, "kernel_cpu_s": cpu - began_cpu,
        "children_cpu_s": children - began_children, "finish_cpu_s": finish_cpu_s, "view": view,
        # The panel's poller: the status line and the progress bar (and the view, in the kernel).
        "poller_cpu_s": panel._poller.cpu_s if panel._poller is not None else 0.0}
    if panel.live is not None:  # the view in the kernel: its own account of its updates
        stats = panel.live.stats
        result.update(updates=stats.updates, deferred=stats.deferred, update_mean_ms=stats.mean_ms,
                      update_max_ms=stats.max_ms, update_cpu_ms=stats.cpu_mean_ms,
                      view_held=panel.live.gantt.bar_count())  # what the page's copy should hold
    if panel.view_process is not None:  # a view's process: what it says, where it says it
        result.update({f"process_{k}": v for k, v in _numbers(
            panel.view_process, ("shipped", "batches", "cpu_s", "relayed", "relay_cpu_s")).items()})
        said = panel.view_process.report
        if said is not None and said.get("views"):  # the relayed view is its first
            first = said["views"][0]
            result.update(updates=first["updates"], deferred=first["deferred"],
                          update_mean_ms=first["update_mean_ms"], update_max_ms=first["update_max_ms"],
                          update_cpu_ms=first["update_cpu_ms"], view_held=first["bars"],
                          process_own_cpu_s=said["cpu_s"])
    panel.close_view()
    ipywidgets.Widget.close_all()  # the front end drops its documents, as on a cell re-run
    del panel, record
    gc.collect()
    return result


def in_kernel_unwatched(config_json: str, timeout_s: float) -> dict[str, Any]:
    """The panel's kind of run (a BackgroundRun), with no panel and nobody watching."""
    from workbench.config import RunConfig
    from workbench.viz.runner import BackgroundRun

    run = BackgroundRun(RunConfig.from_json(config_json), fresh=True)
    began_cpu, began_children = _cpu()
    began = time.perf_counter()
    run.start()
    if not run.join(timeout_s):
        run.stop("past the benchmark's time")
        run.join(60)
        raise TimeoutError(f"the unwatched run had not ended after {timeout_s:.0f} s")
    wall_s = time.perf_counter() - began
    cpu, children = _cpu()
    record = run.record()  # the watched run's is made after its end too, by the panel
    if record.outcome != "completed":
        raise RuntimeError(f"the unwatched run did not complete: {record.error}")
    import workbench

    result = {"rate": record.summary.throughput_per_min, "spans": len(record.trace.spans),
              "run_s": record.summary.wall_s, "wall_s": wall_s, "kernel_cpu_s": cpu - began_cpu,
              "children_cpu_s": children - began_children,
              "workbench_at": str(Path(workbench.__file__).resolve().parents[1])}
    del run, record
    gc.collect()
    return result


# -- this process's side: the front end -----------------------------------------------------------

class Widget:
    """One bokeh widget's document as the page holds it, kept current by the comm's patches."""

    def __init__(self, state: dict[str, Any]) -> None:
        from bokeh.protocol import Protocol
        from bokeh.protocol.receiver import Receiver

        self.receiver = Receiver(Protocol())
        self.loop = asyncio.new_event_loop()  # the receiver's consume is a coroutine
        self.bars_received = 0
        self.patches = 0
        self.buffers = 0  # binary pieces (arrays sent as bytes)
        self.ignored = 0  # pieces that came before the widget had a document (the page drops them)
        self.echoed = 0  # changes sent back, as the page's front end does after each patch
        self._made: list[Any] = []  # the changes the patch being applied makes
        self.doc: Any = None
        self.live = False
        self.build(state.get("render_bundle") or "{}")

    def build(self, bundle_json: str) -> None:
        """The document from a render bundle; an empty bundle (no document yet) leaves none."""
        from bokeh.document import Document, events
        from live_client import BARS

        docs = json.loads(bundle_json).get("docs_json") or {}
        if not docs:
            return
        (doc_json,) = docs.values()
        self.doc = Document.from_json(doc_json)
        sources = {id(self.doc.get_model_by_name(name)) for name in BARS} - {id(None)}
        self.live = bool(sources)

        def streamed(event: Any) -> None:
            self._made.append(event)
            if isinstance(event, events.ColumnsStreamedEvent) and id(event.model) in sources:
                self.bars_received += len(event.data.get("left", ()))

        self.doc.on_change(streamed)

    def consume(self, content: dict[str, Any], buffers: list[Any]) -> list[dict[str, Any]]:
        """A piece of a patch; once the patch is whole and made, the changes it made, as the
        page's front end sends them back to the kernel (its "jsevent"s): it reports every
        change made on its document, a patch's included, the data streamed among them."""
        if self.doc is None:  # as the page does: no document, nothing to patch
            self.ignored += 1
            return []
        # A text piece comes as the payload, a binary one as the message's one buffer.
        piece = content["payload"] if "payload" in content else bytes(buffers[0])
        self.buffers += isinstance(piece, bytes)
        message: Any = self.loop.run_until_complete(self.receiver.consume(piece))  # a PATCH-DOC
        if message is None or not message.content:
            return []
        from bokeh.core.serialization import Serializer
        from live_client import apply_as_the_page

        self._made = []
        try:
            apply_as_the_page(self.doc, message, self)
        except Exception as err:  # which change of which model, to find the view's defect by
            raise CellFailed(f"the front end could not make patch {self.patches + 1}: "
                             f"{type(err).__name__}: {err}; {self._describe(message.content)}") from None
        self.patches += 1
        serializer = Serializer(references=set(self.doc.models), deferred=False)
        echoes = [{**serializer.encode(event), "event": "jsevent"} for event in self._made]
        self.echoed += len(echoes)
        return echoes

    def _describe(self, content: dict[str, Any]) -> str:
        said = []
        for event in content.get("events", []):
            ref = event.get("model") or {}
            model = self.doc.get_model_by_id(ref["id"]) if "id" in ref else None
            name = (f"{type(model).__name__} {getattr(model, 'name', '')!r}" if model is not None
                    else "an unknown model")
            columns = sorted(model.data) if model is not None and hasattr(model, "data") else None
            new = event.get("data", {})
            streamed = [k for k, _ in new.get("entries", [])] if isinstance(new, dict) else None
            said.append(f"{event.get('kind')} {event.get('attr', '')} of {name}"
                        + (f" (holds {columns}, streamed {streamed})" if streamed is not None else ""))
        return "; ".join(said)[:4000]

    def held(self) -> int:
        from live_client import held

        return held(self.doc)

    def close(self) -> None:
        self.loop.close()


class FrontEnd:
    """What a notebook's page does with the kernel's iopub messages, less the drawing."""

    def __init__(self) -> None:
        self.widgets: dict[str, Widget] = {}
        self.closed: list[Widget] = []  # widgets closed since the last reset (counted still)
        self.messages = 0  # comm messages, of every widget
        self.bytes = 0  # their content and buffers, as sent

    def handle(self, msg: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """An iopub message; the widget messages to send back (comm id, content)."""
        kind = msg["header"]["msg_type"]
        if not kind.startswith("comm_"):
            return []
        content = msg["content"]
        comm = content.get("comm_id", "")
        self.messages += 1
        self.bytes += len(json.dumps(content)) + sum(len(b) for b in msg.get("buffers") or ())
        if kind == "comm_open":
            state = (content.get("data") or {}).get("state") or {}
            if state.get("_model_name") == MODEL:
                self.widgets[comm] = Widget(state)
        elif kind == "comm_msg" and comm in self.widgets:
            data = content.get("data") or {}
            if data.get("method") == "custom" and (data.get("content") or {}).get("msg") == "patch":
                echoes = self.widgets[comm].consume(data["content"], msg.get("buffers") or [])
                return [(comm, echo) for echo in echoes]
            elif data.get("method") == "update" and "render_bundle" in (data.get("state") or {}):
                self.widgets[comm].build(data["state"]["render_bundle"])
        elif kind == "comm_close" and comm in self.widgets:
            widget = self.widgets.pop(comm)
            widget.close()
            self.closed.append(widget)  # what it received and holds is counted at the end of the run
        return []

    def figures(self) -> dict[str, float]:
        """The live views' widgets since the last reset: bars received (rows streamed into the
        Gantt's sources) and held at the end, patches applied; the comm messages of every widget."""
        every = list(self.widgets.values()) + self.closed
        live = [w for w in every if w.live]
        return {"bars_received": float(sum(w.bars_received for w in live)),
                "held": float(sum(w.held() for w in live)), "patches": float(sum(w.patches for w in live)),
                "buffers": float(sum(w.buffers for w in live)),
                "ignored": float(sum(w.ignored for w in every)),
                "echoed": float(sum(w.echoed for w in live)),
                "live_widgets": float(len(live)), "comm_messages": float(self.messages),
                "comm_bytes": float(self.bytes)}

    def reset(self) -> None:
        self.messages = self.bytes = 0
        self.closed = []


class CellFailed(RuntimeError):
    pass


class Notebook:
    """A kernel of this interpreter with this process as its front end."""

    def __init__(self, tag: str) -> None:
        from jupyter_client import KernelManager
        from jupyter_client.kernelspec import KernelSpecManager

        self.tag = tag
        self.front = FrontEnd()
        # A kernel spec of our own: this interpreter, whatever else is installed as "python3".
        self.spec_dir = tempfile.TemporaryDirectory(prefix="wb-kernelspec-")
        spec = Path(self.spec_dir.name) / "wbbench"
        spec.mkdir()
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "workbench benchmark", "language": "python"}))
        # Its connection file beside the spec: no runtime folder of the user's is needed (a GPU
        # host's may not be writable), and nothing is left there.
        self.manager = KernelManager(kernel_name="wbbench", connection_file=str(spec / "connection.json"),
                                     kernel_spec_manager=KernelSpecManager(kernel_dirs=[self.spec_dir.name]))
        path = os.pathsep.join(p for p in (str(ROOT), str(HERE), os.environ.get("PYTHONPATH")) if p)
        try:
            self.manager.start_kernel(env={**os.environ, "PYTHONPATH": path, TAG: tag})
            self.client = self.manager.client()
            self.client.start_channels()
            self.client.wait_for_ready(timeout=120)
        except BaseException:  # Ctrl-C, or a kernel that never came up: leave nothing behind
            self.manager.shutdown_kernel(now=True)
            self.spec_dir.cleanup()
            sweep(tag)
            raise

    @property
    def pid(self) -> int:
        provisioner = self.manager.provisioner
        process = getattr(provisioner, "process", None)
        return int(process.pid) if process is not None else -1

    def execute(self, code: str, timeout_s: float) -> dict[str, Any]:
        """Run `code` in the kernel, handling every iopub message meanwhile; its result line."""
        msg_id = self.client.execute(code, store_history=False)
        deadline = time.monotonic() + timeout_s
        text, error = "", None
        while True:
            try:
                msg = self.client.get_iopub_msg(timeout=1)
            except queue.Empty:
                if not self.manager.is_alive():
                    raise CellFailed("the kernel died") from None
                if time.monotonic() > deadline:
                    raise CellFailed(f"no answer from the kernel after {timeout_s:.0f} s") from None
                continue
            self.answer(msg)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind == "stream" and content.get("name") == "stdout":
                text += content["text"]
            elif kind == "error":
                error = f"{content['ename']}: {content['evalue']}"
            elif kind == "status" and content.get("execution_state") == "idle":
                break  # iopub keeps its order: every comm message the cell caused came before
        self.client.get_shell_msg(timeout=30)
        if error is not None:
            raise CellFailed(error)
        lines = [line for line in text.splitlines() if line.startswith(RESULT)]
        if not lines:
            raise CellFailed(f"the cell said no result: {text[-300:]!r}")
        return dict(json.loads(lines[-1][len(RESULT):]))

    def answer(self, msg: dict[str, Any]) -> None:
        """Hand an iopub message to the front end; send the kernel what it sends back."""
        for comm, content in self.front.handle(msg):
            self.client.shell_channel.send(self.client.session.msg(
                "comm_msg", {"comm_id": comm, "data": {"method": "custom", "content": content}}))

    def pump(self, seconds: float) -> None:
        """Be the front end for `seconds`, no cell running (the kernel takes what it is sent)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                self.answer(self.client.get_iopub_msg(timeout=left))
            except queue.Empty:
                return

    def close(self) -> list[int]:
        """Shut the kernel down; the pids of what it left behind, killed (none, if all is well)."""
        try:
            self.client.stop_channels()
            self.manager.shutdown_kernel(now=True)  # its process group, killed at once
        finally:
            self.spec_dir.cleanup()
        return sweep(self.tag)


def tagged(tag: str) -> list[int]:
    """Processes that carry the kernel's tag in their environment: the kernel's and their children's."""
    found = []
    needle = f"{TAG}={tag}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry))
    return found


def sweep(tag: str, patience_s: float = 10.0) -> list[int]:
    """Wait for the kernel's processes to leave (a view's process goes with its parent); kill
    those still there after `patience_s`, and say which they were."""
    deadline = time.monotonic() + patience_s
    while (left := tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        with contextlib.suppress(OSError):  # it left meanwhile
            os.kill(pid, signal.SIGKILL)
    return left


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one_run(notebook: Notebook, config_json: str, watched: bool, view: str,
            timeout_s: float) -> dict[str, float]:
    front = notebook.front
    front.reset()
    began = cpu_s()
    what = (f"'in_kernel_watched', {config_json!r}, {view!r}, {timeout_s!r}" if watched
            else f"'in_kernel_unwatched', {config_json!r}, {timeout_s!r}")
    notebook.execute(f"import live_cost_notebook as bench; bench.in_background({what})", 120)
    # The cell has returned, as a notebook's does once Run is pressed; asked now and then
    # whether the run has ended (a cell of a few milliseconds), the front end meanwhile.
    deadline = time.monotonic() + timeout_s + 120
    while not (result := notebook.execute("bench.collect()", 120)).pop("done"):
        if time.monotonic() > deadline:
            raise CellFailed(f"the run had not ended after {timeout_s + 120:.0f} s")
        notebook.pump(POLL_S)
    result.pop("view", None)
    if watched:
        result["frontend_cpu_s"] = cpu_s() - began
        result.update(front.figures())
    return result


def line(k: int, watched: bool, r: dict[str, float]) -> str:
    text = (f"round {k + 1} {'watched  ' if watched else 'unwatched'}: {r['rate']:.1f} partitions/min, "
            f"{r['spans']:.0f} spans, {r['run_s']:.1f} s run ({r['wall_s']:.1f} s from the cell's start), "
            f"kernel {r['kernel_cpu_s']:.2f} CPU s, its child processes {r['children_cpu_s']:.2f}")
    if not watched:
        return text
    text += (f"; front end: {r['bars_received']:.0f} bars received of {r['spans']:.0f} spans, holds "
             f"{r['held']:.0f}" + (f" of the view's {r['view_held']:.0f}" if "view_held" in r else "")
             + f", {r['patches']:.0f} patches ({r['buffers']:.0f} binary buffers; {r['echoed']:.0f} "
             f"changes echoed back), "
             f"{r['comm_messages']:.0f} comm messages ({r['comm_bytes'] / 1e6:.2f} MB), "
             f"{r['frontend_cpu_s']:.2f} CPU s"
             + (f", {r['ignored']:.0f} pieces dropped (no document yet)" if r.get("ignored") else "")
             + f"; the panel's poller (status line, progress bar; with --view kernel the view too) "
             f"{r['poller_cpu_s']:.2f} CPU s"
             + f"; the panel's end (record, verdict) {r['finish_cpu_s']:.2f} "
             f"CPU s of the kernel, not counted above")
    if "updates" in r:
        text += (f"; the view: {r['updates']:.0f} updates, {r['deferred']:.0f} polls deferred (mean "
                 f"{r['update_mean_ms']:.1f} ms, {r['update_cpu_ms']:.1f} ms CPU, "
                 f"max {r['update_max_ms']:.1f} ms)")
    if "process_cpu_s" in r or "process_shipped" in r:
        text += "; the view's process: " + ", ".join(f"{k[8:]} {v:g}" for k, v in r.items()
                                                      if k.startswith("process_"))
    return text


class Refused(SystemExit):
    """Bad input: one line, exit 2."""

    def __init__(self, text: str) -> None:
        print(f"live_cost_notebook: {text}", file=sys.stderr)
        super().__init__(2)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, not the usage and the line
        raise Refused(message)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--view", choices=tuple(VIEWS), default="process",
                        help="the panel's live view: a process of its own (the panel's default), "
                             "or in the kernel")
    parser.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--partitions", type=int, help="default: enough for --spans (from the warm-up)")
    parser.add_argument("--spans", type=int, default=20_000, help="spans a run should make (default 20000)")
    parser.add_argument("--log2", type=int, help="constraints per partition, log2 (cpu 6, gpu 22)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gpu-trace", action=argparse.BooleanOptionalAction,
                        help="record the device's activity (gpu: on unless --no-gpu-trace)")
    parser.add_argument("--budget-s", type=float, help="start no round that would end past this")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="the most one run may take (600)")
    parser.add_argument("--json", help="the runs and medians, written after each run")
    parser.add_argument("--unpaced", action="store_true",
                        help="with --view process: the view updates at every poll, ten a second, "
                             "however many bars it holds and whatever an update costs (unpaced, the "
                             "view's own pacing left out of what is measured)")
    args = parser.parse_args(argv)
    for name in ("partitions", "spans", "rounds", "log2", "budget_s", "timeout_s"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise Refused(f"--{name.replace('_', '-')} is {value}: it must be above 0")
    if args.unpaced and args.view != "process":
        raise Refused("--unpaced: only the view in a process of its own (--view process) is unpaced")
    if args.json and not Path(args.json).resolve().parent.is_dir():
        raise Refused(f"--json {args.json}: no folder {Path(args.json).resolve().parent}")
    return args


def interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    if str(ROOT) not in sys.path:  # this checkout's settings, as the kernel imports its code
        sys.path.insert(1, str(ROOT))
    from live_cost import TARGET, WARMUP_PARTITIONS, run_config

    from workbench.config import ConfigError

    try:
        warm_config = run_config(args, WARMUP_PARTITIONS)
    except ConfigError as err:
        raise Refused(str(err)) from None
    os.environ.setdefault("WORKBENCH_CACHE", tempfile.mkdtemp(prefix="wb-srs-"))
    if args.unpaced:  # the kernel's environment, and so its view's process's
        from workbench.viz.view_child import UNPACED_ENV

        os.environ[UNPACED_ENV] = "1"
    started = time.perf_counter()
    signal.signal(signal.SIGTERM, interrupted)  # a stop from outside cleans up as Ctrl-C does
    try:
        # The tag may be given (a test looks for what is left by it); else a fresh one.
        notebook = Notebook(os.environ.get(TAG) or uuid.uuid4().hex)
    except KeyboardInterrupt:
        print("interrupted while the kernel started: it is shut down", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    try:
        measure(args, notebook, warm_config, started, TARGET, WARMUP_PARTITIONS, run_config)
    except KeyboardInterrupt:
        left = notebook.close()
        print("interrupted: the kernel is shut down"
              + (f" (killed what it left: pids {left})" if left else ", nothing of it left running"),
              file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    except CellFailed as err:
        notebook.close()
        if str(err).startswith(("BackendUnavailable:", "ConfigError:")):
            raise Refused(str(err)) from None
        raise SystemExit(f"live_cost_notebook: {err}") from None
    left = notebook.close()
    if left:
        print(f"the kernel left processes running at its shutdown, killed: pids {left}", flush=True)


def measure(args: argparse.Namespace, notebook: Notebook, warm_config: Any, started: float, target: float,
            warmup_partitions: int, run_config: Any) -> None:
    timeout_s = args.timeout_s
    warm = one_run(notebook, warm_config.to_json(), False, args.view, timeout_s)  # key, builds: once
    imported = warm.pop("workbench_at")
    if imported != str(ROOT):  # an installed copy would measure other code
        raise CellFailed(f"the kernel imports workbench from {imported}, not {ROOT}")
    per_partition = warm["spans"] / warmup_partitions
    partitions = args.partitions or max(warmup_partitions, math.ceil(args.spans / per_partition))
    config = run_config(args, partitions)
    config_json = config.to_json()
    seen = one_run(notebook, warm_config.to_json(), True, args.view, timeout_s)  # the view's first use
    print(f"kernel pid {notebook.pid}; {args.backend} backend, {partitions} partitions of "
          f"2^{config.log2_constraints}{', device activity recorded' if config.gpu_trace else ''}; warm-up: "
          f"{per_partition:.1f} spans a partition, {warm['rate']:.1f} partitions/min, "
          f"{warm['wall_s']:.1f} s, so a run of about {60 * partitions / warm['rate']:.0f} s; watched "
          f"warm-up: {seen['bars_received']:.0f} bars received of {seen['spans']:.0f} spans; the view: "
          f"{VIEWS[args.view]}; the front end: this process, applying every patch of the comm to its copy "
          f"of the document", flush=True)
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    loads = [os.getloadavg()[0]]
    report: dict[str, Any] = {"backend": args.backend, "view": args.view, "paced": not args.unpaced,
                              "partitions": partitions,
                              "log2": config.log2_constraints, "cores": os.cpu_count(),
                              "gpu_trace": config.gpu_trace, "warmup": warm, "warmup_watched": seen,
                              "runs": []}

    from live_cost import play_rounds, write_report

    def run(watched: bool) -> dict[str, float]:
        r = one_run(notebook, config_json, watched, args.view, timeout_s)
        r.pop("workbench_at", None)
        return r

    play_rounds(args, started, report, runs, loads, run, line)

    def med(watched: bool, key: str) -> float:
        return statistics.median(r[key] for r in runs[watched] if key in r)

    rounds = len(runs[False])
    ratio = med(True, "rate") / med(False, "rate")
    cpu_ratio = med(True, "kernel_cpu_s") / med(False, "kernel_cpu_s")
    received = med(True, "bars_received") / med(True, "spans")
    print(f"\nmedian of {rounds}: watched {med(True, 'rate'):.1f} vs unwatched {med(False, 'rate'):.1f} "
          f"partitions/min = {ratio:.1%} ({'meets' if ratio >= target else 'misses'} the "
          f"{target:.0%} target)")
    print(f"CPU: the kernel {med(True, 'kernel_cpu_s'):.2f} s watched vs {med(False, 'kernel_cpu_s'):.2f} s "
          f"unwatched = {cpu_ratio:.1%}; its child processes {med(True, 'children_cpu_s'):.2f} s vs "
          f"{med(False, 'children_cpu_s'):.2f} s; the front end (the browser's stand-in, not the run's) "
          f"{med(True, 'frontend_cpu_s'):.2f} s")
    print(f"the front end received {med(True, 'bars_received'):.0f} bars of {med(True, 'spans'):.0f} spans "
          f"({received:.1%}), holds {med(True, 'held'):.0f}, in {med(True, 'comm_messages'):.0f} comm "
          f"messages ({med(True, 'comm_bytes') / 1e6:.2f} MB); host load average (1 min) "
          f"{min(loads):.2f}-{max(loads):.2f} on {os.cpu_count()} cores")
    if med(True, "live_widgets") == 0:
        print("no live view came over the comm: the front end had no bokeh widget holding the Gantt's "
              "sources (a view shown some other way, such as a frame of its own page, is not seen here)")
    report.update(ratio=ratio, target=target, rounds=rounds, loads=[min(loads), max(loads)],
                  cpu_watched_s=med(True, "kernel_cpu_s"), cpu_unwatched_s=med(False, "kernel_cpu_s"),
                  cpu_ratio=cpu_ratio, bars_received=med(True, "bars_received"), spans=med(True, "spans"),
                  frontend_cpu_s=med(True, "frontend_cpu_s"))
    write_report(args, report)


if __name__ == "__main__":
    main()
