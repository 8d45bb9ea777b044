"""How synthesis scales with processes on this machine: partitions per second with 1, 2, 4,
... synthesis processes working at once (each partition also copied into fresh memory, as
the pipeline's synthesis threads do), against one process alone.

    python benchmarks/synthesis_scaling.py [--log2 20] [--counts 1 4 8 14] [--rounds 3]

Also prints the CPU quota the machine's control group allows, which caps the scaling
whatever the core count says.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
import time
from pathlib import Path

import numpy as np

from workbench.pipeline import synth_processes
from workbench.pipeline.synth_processes import ProcessSynthesis
from workbench.prover.circuit import SyntheticCircuit


def cpu_quota() -> str:
    path = Path("/sys/fs/cgroup/cpu.max")
    if not path.exists():
        return "no cgroup v2 cpu.max"
    quota, period = path.read_text().split()
    return "unlimited" if quota == "max" else f"{int(quota) / int(period):.1f} CPUs"


class Target:
    def __init__(self, n: int) -> None:
        self.witness, self.a, self.b, self.c = (np.empty((n, 4), np.uint64) for _ in range(4))


def rate(circuit: SyntheticCircuit, count: int, rounds: int) -> float:
    procs = ProcessSynthesis(circuit, count)
    try:
        def work(i: int) -> None:
            for r in range(rounds):
                procs.synthesize(i, i * rounds + r, Target(circuit.n), lambda: False, contextlib.nullcontext)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return count * rounds / (time.perf_counter() - start)
    finally:
        procs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2", type=int, default=20)
    parser.add_argument("--terms", type=int, default=4)
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 4, 8, 14])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunks", help="FIELD,CIRCUIT numpy chunk sizes inside the processes "
                        "(default: the pipeline's, synth_processes.PROCESS_CHUNKS)")
    args = parser.parse_args()
    if args.chunks:
        os.environ[synth_processes.CHUNKS_VARIABLE] = args.chunks
    chunks = args.chunks or ",".join(map(str, synth_processes.PROCESS_CHUNKS))
    print(f"cpus {os.cpu_count()}, quota {cpu_quota()}, 2^{args.log2} constraints, terms {args.terms}, "
          f"chunks {chunks}")
    circuit = SyntheticCircuit(args.log2, 0.9, args.terms, 1)
    base = None
    for count in args.counts:
        r = rate(circuit, count, args.rounds)
        base = base or r
        print(f"{count:3d} processes: {r:6.2f} partitions/s, {r / base:5.2f}x one process "
              f"({count / r:.2f} s a partition each)", flush=True)


if __name__ == "__main__":
    main()
