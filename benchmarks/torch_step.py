"""A tiny PyTorch training loop for `benchmarks/record_gpu.py` (run on a GPU machine).

    python torch_step.py plain|profile|kineto|alternate STEPS [chrome.json | cuda | cpu,cuda | ROUNDS]

Each timed step is one NVTX range `step` around forward, backward and the optimiser step,
synchronised at its end, so the step's kernels run inside it. `plain` prints the steps' wall
time (and each fifth's); `profile` runs the same steps under torch.profiler and writes its
Chrome trace, whose kernels, copies and memsets record_gpu.py counts; `kineto` times the steps
under torch.profiler with the activities named (CUDA alone, or CPU and CUDA), the cost of
another CUPTI client on the same loop (the profiler started and warmed before the timed steps);
`alternate` does ROUNDS rounds of plain steps, steps under torch.profiler with CUDA activity,
and with CPU and CUDA activities, in one process (the same placement and clocks for all three).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F


def main() -> None:
    mode, steps = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(256, 512, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")

    def step() -> None:
        torch.cuda.nvtx.range_push("step")
        optimiser.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimiser.step()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()

    for _ in range(3):  # warm-up: allocator, cuBLAS handles and heuristics
        step()
    if mode == "profile":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step()
        prof.export_chrome_trace(sys.argv[3])
        return
    if mode == "kineto":
        from torch.profiler import ProfilerActivity, profile

        chosen = {"cpu": ProfilerActivity.CPU, "cuda": ProfilerActivity.CUDA}
        with profile(activities=[chosen[a] for a in sys.argv[3].split(",")]):
            for _ in range(3):
                step()
            timed(step, steps)
            os._exit(0)  # timed: the profiler's processing of what it collected is not waited for
    if mode == "alternate":
        from torch.profiler import ProfilerActivity, profile

        found: dict[str, list[float]] = {"plain_ms": [], "cuda_ms": [], "cpu_cuda_ms": []}
        for _ in range(int(sys.argv[3])):
            found["plain_ms"].append(timed(step, steps, quiet=True))
            for key, activities in (("cuda_ms", [ProfilerActivity.CUDA]),
                                    ("cpu_cuda_ms", [ProfilerActivity.CPU, ProfilerActivity.CUDA])):
                with profile(activities=activities):
                    for _ in range(3):
                        step()
                    found[key].append(timed(step, steps, quiet=True))
        print(" ".join(f"{k}={','.join(f'{v:.4f}' for v in vs)}" for k, vs in found.items()), flush=True)
        return
    timed(step, steps)


def timed(step: Callable[[], None], steps: int, quiet: bool = False) -> float:
    fifths = []
    began = time.perf_counter()
    for b in range(5):
        at = time.perf_counter()
        n = steps // 5 + (b < steps % 5)
        for _ in range(n):
            step()
        fifths.append((time.perf_counter() - at) * 1e3 / max(n, 1))
    ms = (time.perf_counter() - began) * 1e3 / steps
    if not quiet:
        print(f"steps={steps} step_ms={ms:.4f} block_ms={','.join(f'{b:.4f}' for b in fifths)}", flush=True)
    return ms


if __name__ == "__main__":
    main()
