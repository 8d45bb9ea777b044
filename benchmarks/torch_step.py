"""A tiny PyTorch training loop for `benchmarks/record_gpu.py` (run on a GPU machine).

    python torch_step.py plain|profile STEPS [chrome.json]

Each timed step is one NVTX range `step` around forward, backward and the optimiser step,
synchronised at its end, so the step's kernels run inside it. `plain` prints the steps' wall
time; `profile` runs the same steps under torch.profiler and writes its Chrome trace, whose
kernels, copies and memsets record_gpu.py counts.
"""

from __future__ import annotations

import sys
import time

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
    began = time.perf_counter()
    for _ in range(steps):
        step()
    print(f"steps={steps} step_ms={(time.perf_counter() - began) * 1e3 / steps:.4f}")


if __name__ == "__main__":
    main()
