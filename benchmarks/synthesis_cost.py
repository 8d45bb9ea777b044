"""Synthesis cost per constraint, by synth_terms, and its scaling with threads.

    python benchmarks/synthesis_cost.py [--log2 16] [--terms 1 4 16] [--threads 1 2] [--repeats 3]

Threads scaling near the core count is the evidence that synthesis releases the interpreter
lock (numpy over chunks) and so really runs in parallel and contends for memory bandwidth.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import numpy as np

from workbench.prover.circuit import SyntheticCircuit


class Target:
    def __init__(self, n: int) -> None:
        self.witness, self.a, self.b, self.c = (np.zeros((n, 4), np.uint64) for _ in range(4))


def throughput(circuit: SyntheticCircuit, threads: int, per_thread: int) -> float:
    """Constraints per second with `threads` threads each synthesising `per_thread` partitions."""
    targets = [Target(circuit.n) for _ in range(threads)]

    def work(t: int) -> None:
        for p in range(per_thread):
            circuit.synthesize(t * per_thread + p, targets[t])

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return threads * per_thread * circuit.n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log2", type=int, default=16)
    parser.add_argument("--terms", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--per-thread", type=int, default=2)
    parser.add_argument("--code", choices=("native", "numpy"), default="native",
                        help="the compiled synthesis code (default) or the numpy reference")
    args = parser.parse_args()
    print(f"synthesis of 2^{args.log2} constraints, {args.code} code, median of {args.repeats}")
    print(f"{'terms':>5} {'threads':>7} {'ns/constraint':>14} {'Mconstraints/s':>15} {'vs 1 thread':>12}")
    for terms in args.terms:
        circuit = SyntheticCircuit(args.log2, 0.9, terms, seed=1, native_code=args.code == "native")
        base = None
        for threads in args.threads:
            rates = [throughput(circuit, threads, args.per_thread) for _ in range(args.repeats)]
            rate = statistics.median(rates)
            base = base or rate
            print(f"{terms:5d} {threads:7d} {threads * 1e9 / rate:14.0f} {rate / 1e6:15.2f} "
                  f"{rate / base:12.2f}")


if __name__ == "__main__":
    main()
