"""What the CUDA shim costs CUPTI's delivering thread a kernel record, in ns, without a GPU.

    python benchmarks/cupti_take_cost.py [--source workbench/attach/cupti_injection.c ...]
        [--records 2000000] [--rounds 3]

A C harness of ours includes the shim's source (each `--source` in turn: an older version of
the file can be timed beside the current one) and calls its `take()` on fabricated kernel
records of 24 kernels with long mangled-looking names, into a ring in ordinary memory (the
recorder's side not run; the ring's tail is moved on every 1024 records). Needs the CUPTI
headers and library (build.py finds them) and gcc.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.attach.build import HERE, _record_layouts, cupti_paths  # noqa: E402

HARNESS = r"""
#include SHIM
#include <stdio.h>
#include <time.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    size_t cap = 1u << 16, tcap = 1u << 10;
    size_t size = WB_DATA_OFFSET + cap * sizeof(struct wb_event) + tcap * sizeof(struct wb_text);
    struct wb_header *h = aligned_alloc(4096, size);
    memset(h, 0, size);
    h->magic = WB_MAGIC; h->version = WB_VERSION; h->capacity = cap; h->text_capacity = tcap;
    h->event_bytes = sizeof(struct wb_event); h->text_bytes = sizeof(struct wb_text);
    wb_attach(h, 0);
    enum { KERNELS = 24 };
    static char names_buf[KERNELS][256];
    static WB_KERNEL_T records[KERNELS];
    for (int i = 0; i < KERNELS; i++) {
        snprintf(names_buf[i], sizeof names_buf[i], "void at::native::vectorized_elementwise_kernel<4, "
                 "at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, "
                 "at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)_%d", i);
        memset(&records[i], 0, sizeof records[i]);
        records[i].kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        records[i].name = names_buf[i];
        records[i].start = 1000;
        records[i].end = 2000;
    }
    for (int round = 0; round < rounds; round++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++) {
            take((CUpti_Activity *)&records[i % KERNELS]);
            if ((i & 1023) == 0) atomic_store(&h->tail, atomic_load(&h->head));
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    }
    return 0;
}
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path, nargs="*", default=[HERE / "cupti_injection.c"])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    found = cupti_paths()
    if found is None:
        sys.exit("no CUPTI headers and library found")
    includes, libs = found
    layouts = _record_layouts(includes[0] / "cupti_activity.h")
    if isinstance(layouts, str):
        sys.exit(layouts)
    with tempfile.TemporaryDirectory() as work:
        harness = Path(work) / "harness.c"
        harness.write_text(HARNESS)
        for source in args.source:
            exe = Path(work) / "take"
            subprocess.run(["gcc", "-O2", "-std=gnu11", f'-DSHIM="{source.resolve()}"', f"-I{HERE}",
                            *(f"-I{i}" for i in includes), *layouts, str(harness), "-o", str(exe),
                            f"-L{libs}", "-lcupti", f"-Wl,-rpath,{libs}", "-lpthread", "-ldl"], check=True)
            done = subprocess.run([str(exe), str(args.records), str(args.rounds)], capture_output=True,
                                  text=True, check=True)
            print(f"{source}: ns a kernel record: {', '.join(done.stdout.split())}")


if __name__ == "__main__":
    main()
