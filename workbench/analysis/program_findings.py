"""Findings about any GPU program, from roles alone: what its GPU waited for, its copies, its
repeated units of work and its lock waits. Each sentence speaks of what the trace holds
(kernels, copies, host threads and their calls), never of a pipeline it may not have; the
pipeline's own findings (analysis/detectors.py) read those traces better and supersede these.

Contract: `PROGRAM_DETECTORS` (registered with the roles each needs), `headline(ctx)`.
"""

from __future__ import annotations

from workbench.analysis.detectors import Context, Registered
from workbench.analysis.device_idle import Cause, DeviceIdle, Part
from workbench.analysis.finding import Evidence, Finding
from workbench.model.roles import WAIT_ROLES

IDLE_CAUSE = 0.02  # an idle cause below this share of the trace is left to the table
VARIABLE_CV = 0.25  # a unit varies when its instances' CV reaches this
LOCK_IDLE = 0.01  # lock waits matter once the GPU idles this share of the trace during them
NAMED = 3  # contributors named in a sentence

TITLES = {
    "sync": "The GPU idles while the host waits in synchronisation calls",
    "launch": "Launch gaps: the launching thread does not keep the GPU fed",
    "copy": "The GPU waits on copies, with no kernel running",
    "lock": "The GPU idles while its host thread waits on a lock",
    "host": "The GPU idles while host threads work",
    "nothing": "Nothing queued: the GPU idles with no host activity recorded",
}
SUGGESTIONS = {
    "sync": "Queue the next work before waiting, wait on events instead of the whole device, and use "
            "asynchronous copies: every synchronisation drains the GPU's queue.",
    "launch": "Give the GPU more per launch (fused or larger kernels, CUDA graphs) or move the host work "
              "(allocation, I/O, preparation) off the launching thread or out of its loop.",
    "copy": "Overlap copies with kernels (asynchronous copies from pinned memory on another stream), or "
            "move less data.",
    "lock": "Shorten what other threads do while holding the lock, or let a thread that never takes it "
            "feed the GPU.",
    "host": "Overlap this host work with GPU work, or move it off the path that feeds the GPU.",
    "nothing": "The program waits on something the trace does not show (I/O, another process, a sleep), "
               "or the capture missed host calls: record CUDA API and OS runtime calls.",
}


def gpu_name(ctx: Context, d: DeviceIdle) -> str:
    return f"GPU {d.gpu}" if len(ctx.device) > 1 else "The GPU"


def _pct(ms: float, d: DeviceIdle) -> str:
    return f"{ms / d.window_ms:.0%}" if d.window_ms else "-"


def phrase(cause: Cause, d: DeviceIdle, ms: bool = False) -> str:
    """What the GPU waited for, in words: "while host thread 12 waits in cudaDeviceSynchronize",
    its contributors given as shares of the trace (or, with `ms`, in milliseconds)."""
    parts = cause.parts
    if cause.cause == "nothing" or not parts:
        return "with " + cause.label

    def amount(p: Part) -> str:
        return f"{p.ms:.1f} ms" if ms else _pct(p.ms, d)

    if not ms:
        # Shares that round to nothing say nothing: name the contributors that show, sum the rest.
        shown = tuple(p for p in parts[:NAMED] if p.share >= 0.005) or parts[:1]
        rest = cause.ms - sum(p.ms for p in shown)
        more = f" and others ({_pct(rest, d)})" if rest / d.window_ms >= 0.005 else ""
        parts = shown
    else:
        more = f" and {len(parts) - NAMED} more" if len(parts) > NAMED else ""
    if cause.cause == "copy":
        listed = ", ".join(f"{p.what} {amount(p)}" for p in parts[:NAMED])
        return f"waiting on copies with no kernel running ({listed}{more})"
    top = parts[0]
    verb = {"sync": "waits in", "lock": "waits on", "launch": "is busy in", "host": "is busy in"}[cause.cause]
    who = top.thread + (", which launches the GPU work," if cause.cause == "launch" else "")
    if top.ms >= 0.8 * cause.ms and not ms:
        return f"while {who} {verb} {top.what}"
    if all(p.thread == top.thread for p in parts[:NAMED]):
        listed = ", ".join(f"{p.what} ({amount(p)})" for p in parts[:NAMED])
        return f"while {who} {verb} {listed}{more}"
    listed = ", ".join(f"{p.thread} in {p.what} {amount(p)}" for p in parts[:NAMED])
    plural = {"sync": "host threads wait in synchronisation calls", "lock": "host threads wait on locks",
              "launch": "the launching threads are busy on the host", "host": "host threads are busy"}
    return f"while {plural[cause.cause]} ({listed}{more})"


def _window(d: DeviceIdle) -> str:
    """"2.30 s trace", or for a sampled recording the time judged: "23.1 ms sampled in 12 windows"."""
    seconds = d.window_ms / 1e3
    length = f"{seconds:.2f} s" if seconds >= 0.1 else f"{d.window_ms:.1f} ms"
    if d.sampled_windows:
        return f"{length} sampled in {d.sampled_windows} window{'s' if d.sampled_windows > 1 else ''}"
    return f"{length} trace"


def _of_what(d: DeviceIdle) -> str:
    return "of the sampled time" if d.sampled_windows else "of the trace"


def _before(d: DeviceIdle) -> str:
    if d.before_first_ms < 0.25 * d.idle_ms:
        return ""
    return f", {d.before_first_ms:.0f} ms of it before its first kernel"


def headline(ctx: Context) -> str | None:
    """What the GPU waited for, with numbers; on several GPUs, the GPU that idles most."""
    if not ctx.device:
        return None
    d = max(ctx.device, key=lambda x: x.idle_share)
    name = gpu_name(ctx, d)
    if not d.causes:
        return f"{name} runs kernels all of the {_window(d)}: nothing holds it back."
    top = d.causes[0]
    return (f"{name} idles {d.idle_share:.0%} of the {_window(d)}{_before(d)}; the largest cause: "
            f"{top.share:.0%} {phrase(top, d)}.")


def idle_causes(ctx: Context) -> list[Finding]:
    out = []
    for d in ctx.device:
        for c in d.causes:
            if c.share < IDLE_CAUSE:
                continue
            suffix = f"/gpu{d.gpu}" if len(ctx.device) > 1 else ""
            early = c.before_first_ms
            before = f", {early:.0f} ms of it before the first kernel" if early else ""
            sentence = (f"{gpu_name(ctx, d)} runs no kernel for {c.ms:.0f} ms ({c.share:.0%} {_of_what(d)}, "
                        f"in {c.pieces} gaps{before}) {phrase(c, d, ms=True)}")
            out.append(Finding(
                id=f"idle_{c.cause}{suffix}", title=TITLES[c.cause], sentence=sentence + ".", cost=c.share,
                numbers={"idle_ms": c.ms, "idle_share": c.share, "gpu_idle_share": d.idle_share,
                         "before_first_ms": c.before_first_ms, "gpu": float(d.gpu)},
                evidence=Evidence.of(ctx.trace, (*c.evidence, *(i for p in c.parts[:NAMED]
                                                               for i in p.evidence))),
                suggestion=SUGGESTIONS[c.cause],
            ))
    return out


def pageable_copies(ctx: Context) -> Finding | None:
    k = ctx.copies.pageable_h2d if ctx.copies else None
    if ctx.copies is None or k is None or k.gbps is None:
        return None
    waited = sum(p.ms for d in ctx.device if (c := d.get("copy")) for p in c.parts
                 if p.what.startswith("h2d pageable"))
    link = ctx.copies.link
    share = ctx.copies.link_share(k)
    against = (f", {share:.0%} of the {link.gbps:.1f} GB/s link ({link.source})" if link and share is not None
               else "; no link speed to compare with (no pinned copy in the trace; give --link-gbps)")
    sentence = (f"{k.count} host-to-device copies ({k.bytes / 1e6:.0f} MB, {k.ms:.1f} ms) come from pageable "
                f"memory and move {k.gbps:.1f} GB/s (median copy {k.median_gbps or 0:.1f} GB/s){against}; "
                "the driver stages each through a pinned buffer on the host, so its speed depends on host "
                "memory. "
                f"The GPU runs no kernel for {waited:.1f} ms of them.")
    return Finding(
        id="pageable_copies", title="Host-to-device copies from pageable memory", sentence=sentence,
        cost=ctx.share(waited),
        numbers={"copies": float(k.count), "bytes": float(k.bytes), "gbps": k.gbps,
                 "link_gbps": link.gbps if link else 0.0, "link_share": share or 0.0, "idle_ms": waited},
        evidence=Evidence.of(ctx.trace, k.slowest),
        suggestion="Allocate the host buffers pinned (cudaHostAlloc) or register them (cudaHostRegister) and "
                   "copy asynchronously, so copies run at link speed and overlap kernels.",
    )


def unit_variation(ctx: Context) -> Finding | None:
    u = ctx.units
    if u is None or u.durations.cv < VARIABLE_CV or not u.decomposed:
        return None
    d = u.durations
    carrier = u.carrier
    if carrier is None:
        return None
    constant = [c for c in u.components if c.constant and c.durations.total_ms > 0]
    steady = ""
    if constant:
        names = " and ".join(c.name for c in constant)
        figures = ", ".join(f"~{c.durations.median_ms:.1f} ms" for c in constant)
        steady = f"; {names} {_verb(names, len(constant), 'stay')} constant ({figures})"
    cd = carrier.durations
    sentence = (f"{u.name} ({d.count} instances, {u.source}) takes {d.min_ms:.1f}-{d.max_ms:.1f} ms (median "
                f"{d.median_ms:.1f}, CV {d.cv:.0%}); {carrier.name} {_verb(carrier.name, 1, 'carry')} "
                f"{carrier.variance_share:.0%} of "
                f"the variation ({cd.min_ms:.1f}-{cd.max_ms:.1f} ms an instance){steady}.")
    lost = (d.mean_ms - d.min_ms) * d.count
    return Finding(
        id="unit_variation",
        title=f"{u.name} varies, and {carrier.name} {_verb(carrier.name, 1, 'carry')} the variation",
        sentence=sentence, cost=ctx.share(lost),
        numbers={"instances": float(d.count), "cv": d.cv, "min_ms": d.min_ms, "max_ms": d.max_ms,
                 "carrier_share": carrier.variance_share or 0.0, "lost_ms": lost},
        evidence=Evidence.of(ctx.trace, (u.slowest, u.fastest)),
        suggestion=f"Look at the {carrier.name} of the slowest instances against the fastest: what the slow "
                   "ones wait for is what makes the run uneven.",
    )


def _verb(subject: str, count: int, verb: str) -> str:
    """"kernels stay", "other host time stays": the parts' names are plural nouns but one."""
    singular = count == 1 and not subject.endswith("s")
    return (verb[:-1] + "ies" if verb.endswith("y") else verb + "s") if singular else verb


def lock_contention(ctx: Context) -> Finding | None:
    w = ctx.locks
    if w is None:
        return None
    idle = max((c.ms for d in ctx.device if (c := d.get("lock")) is not None), default=0.0)
    if ctx.share(idle) < LOCK_IDLE:
        return None
    top = w.threads[0]
    lock = max(w.locks, key=lambda g: g.waits.max_ms)
    sentence = (f"Host threads wait {w.waits.total_ms:.1f} ms on locks, conditions or barriers "
                f"({w.waits.count} waits, longest {w.waits.max_ms:.1f} ms, on {lock.key}); {top.key} waits "
                "most "
                f"({top.waits.total_ms:.1f} ms in {top.waits.count}); the GPU runs no kernel for "
                f"{idle:.1f} ms of it.")
    return Finding(
        id="lock_contention", title="Host threads wait on locks while the GPU idles", sentence=sentence,
        cost=ctx.share(idle),
        numbers={"wait_ms": w.waits.total_ms, "waits": float(w.waits.count), "longest_ms": w.waits.max_ms,
                 "idle_ms": idle},
        evidence=Evidence.of(ctx.trace, w.longest),
        suggestion=SUGGESTIONS["lock"],
    )


ANY_PROGRAM = ("consumer",)  # the pipeline's own findings read such traces better
PROGRAM_DETECTORS: tuple[Registered, ...] = (
    Registered(pageable_copies, "copies from pageable memory", needs=("copy",), without=ANY_PROGRAM),
    Registered(unit_variation, "a repeated unit of work that varies", any_of=("unit", "host"),
               without=ANY_PROGRAM),
    Registered(lock_contention, "lock waits on host threads",
               any_of=WAIT_ROLES, without=ANY_PROGRAM),
)
# The idle causes come as several findings at once; gated like the others.
IDLE = Registered(idle_causes, "GPU idle time by cause", needs=("kernel",), without=ANY_PROGRAM)
