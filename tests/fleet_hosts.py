"""A fleet of cuzk daemons' logs with a bottleneck planted in each, for the fleet tests and
benchmarks/fleet_speed.py.

Each host's partitions are written by tests/cuzk_writer.py from the daemon's own format
strings, with durations drawn for the bottleneck planted there; the planting is the truth
the verdict is checked against:
- copy-bound: the copy of a, b, c (the part of ntt_msm_h CUZK_NTT_H's parts do not name)
  takes 2-8 s, 1.6-6 GB/s on a 55 GB/s link, so ntt_msm_h swings while the kernels stay;
- lock-serialised: ntt_msm_h constant, the copy at link speed, but the device allocation
  inside it (CUZK_NTT_H d_b_alloc) or the MSM context's teardown (msm_dtor), work that is not
  GPU compute, takes 1.5-2.5 s a partition under the mutex: holds back to back, workers waiting;
- synthesis-starved: synthesis takes 20-40 s a partition on 4 threads against a 2 s hold;
- prep-bound: prep_msm takes 4-6 s against ntt_msm_h's 1.4 s, so the GPU thread waits at
  the barrier holding the mutex;
- healthy: everything at speed; the mutex's holds back to back are GPU compute (GPU-bound).
"""

from __future__ import annotations

import gzip
import random
from dataclasses import dataclass
from pathlib import Path

from cuzk_writer import CallSpec, production_log

BOUND = {"copy": "copy_bound", "lock": "lock_serialised", "synth": "synthesis_starved",
         "prep": "prep_bound", "healthy": "gpu_bound"}
MIX = ("copy",) * 16 + ("lock",) * 12 + ("synth",) * 10 + ("prep",) * 6 + ("healthy",) * 6
LINK_GBPS, COPY_BYTES = 55.0, 12.5e9  # a Filecoin partition's a, b, c over PCIe Gen5 x16
PARTITIONS = 14
NAMED = 300 + 150 + 2 + 500 + 1  # CUZK_NTT_H's parts at their defaults below (d_b_alloc apart)
LINK_COPY_MS = int(COPY_BYTES / LINK_GBPS / 1e6) + 1  # the copy at link speed


def _call(kind: str, r: random.Random, severity: float) -> CallSpec:
    base = {"ntt_kernels": 300, "coset_intt_sync": 150, "msm_init": 2, "msm_invoke": 500, "msm_dtor": 1,
            "d_b_alloc": 1, "prep_msm": 800, "synthesis": 2500}
    copy = LINK_COPY_MS + r.randint(0, 60)
    if kind == "copy":
        copy = int((2000 + 6000 * severity) * r.uniform(0.35, 1.0))
        base["prep_msm"] = r.randint(1400, 2500)
    elif kind == "lock":
        slow = "d_b_alloc" if severity < 0.5 else "msm_dtor"
        base[slow] = int(1500 + 1000 * severity) + r.randint(-20, 20)
    elif kind == "synth":
        base["synthesis"] = int(20000 + 20000 * severity) + r.randint(0, 2000)
    elif kind == "prep":
        base["prep_msm"] = int(4000 + 2000 * severity) + r.randint(0, 300)
    named = NAMED - 1 - 1 + base["d_b_alloc"] + base["msm_dtor"]
    return CallSpec(ntt_msm_h=named + copy, **base)


@dataclass(frozen=True)
class Planted:
    bound: str  # the finding id the planting calls for
    file: Path
    calls: tuple[CallSpec, ...]  # each partition's durations, as written


def plant(folder: Path, mix: tuple[str, ...] = MIX, seed: int = 0) -> dict[str, Planted]:
    """Write one log per host into `folder`; returns what was planted on each host."""
    rng = random.Random(seed)
    truth = {}
    for i, kind in enumerate(mix):
        host = f"prover-{i:02d}"
        severity = rng.random()
        calls = tuple(_call(kind, rng, severity) for _ in range(PARTITIONS))
        log = production_log(calls, workers=2, synth_threads=4, noise=1, seed=seed + i, host=host)
        # The file's name is not the host's: the log's own lines name it.
        file = folder / f"cuzk-{i:02d}.log"
        file.write_text(log.text)
        truth[host] = Planted(BOUND[kind], file, calls)
    return truth


def plant_garbage(folder: Path) -> list[Path]:
    """Files that are no host's log: text without a timing line, a gzip cut short, an empty file."""
    files = [folder / "notes.txt", folder / "broken.json.gz", folder / "empty.log"]
    files[0].write_text("rotated logs moved to /var/log/old\n" * 20)
    files[1].write_bytes(gzip.compress(b'{"traceEvents": [' + b'{"ph":"X"},' * 500)[:200])
    files[2].write_bytes(b"")
    return files
