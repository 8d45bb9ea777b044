"""The CUDA shim without a GPU: a C harness of ours includes workbench/attach/cupti_injection.c.
Kernel names: its `take()` gets fabricated kernel records (CUPTI's own record layout, from the
toolkit's headers), the same names at several addresses and more addresses than the shim's
by-pointer table has slots; each record's name id must lead to its own name, and each name be
sent once. The pool of zeroed buffers (WORKBENCH_RECORD_BUFFER_POOL): a buffer given back with
bytes written comes out again zeroed, and no more than the pool's size are kept."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from workbench.attach.build import HERE, _record_layouts, cupti_paths

HARNESS = r"""
#include SHIM
#include <stdio.h>

static int pool_check(void) {
    buffer_bytes = 1u << 16;
    pool_size = 2;
    uint8_t *a = pool_take(), *b = pool_take(), *c = pool_take();
    for (size_t i = 0; i < buffer_bytes; i++)
        if (a[i] || b[i] || c[i]) return printf("fresh buffer not zeroed\n"), 1;
    memset(a, 0xab, 1000);
    memset(b, 0xcd, buffer_bytes);
    memset(c, 0xef, 10);
    pool_give(a, 1000);
    pool_give(b, buffer_bytes);
    pool_give(c, 10); /* the pool is full: freed */
    printf("kept %u\n", pool_count);
    uint8_t *d = pool_take(), *e = pool_take();
    int reused = (d == a || d == b) && (e == a || e == b) && d != e;
    for (size_t i = 0; i < buffer_bytes; i++)
        if (d[i] || e[i]) return printf("reused buffer not zeroed at %zu\n", i), 1;
    printf("reused %d\n", reused);
    return 0;
}

int main(int argc, char **argv) {
    if (strcmp(argv[1], "pool") == 0) return pool_check();
    int distinct = atoi(argv[1]), copies = atoi(argv[2]), passes = atoi(argv[3]);
    size_t cap = 1u << 16, tcap = 1u << 13;
    size_t size = WB_DATA_OFFSET + cap * sizeof(struct wb_event) + tcap * sizeof(struct wb_text);
    struct wb_header *h = aligned_alloc(4096, size);
    memset(h, 0, size);
    h->magic = WB_MAGIC; h->version = WB_VERSION; h->capacity = cap; h->text_capacity = tcap;
    h->event_bytes = sizeof(struct wb_event); h->text_bytes = sizeof(struct wb_text);
    wb_attach(h, 0);
    int n = distinct * copies + 1;
    char (*text)[96] = calloc((size_t)n, sizeof *text);
    WB_KERNEL_T *records = calloc((size_t)n, sizeof *records);
    for (int i = 0; i < n; i++) { /* name k at `copies` addresses, interleaved; the last has none */
        records[i].kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        records[i].correlationId = (uint32_t)i;
        if (i < n - 1) {
            snprintf(text[i], sizeof text[i], "void kernel_%d<float>(float*, int)", i % distinct);
            records[i].name = text[i];
        }
    }
    for (int pass = 0; pass < passes; pass++)
        for (int i = 0; i < n; i++) take((CUpti_Activity *)&records[i]);
    for (uint64_t p = 0; p < atomic_load(&h->head); p++)
        printf("E %u %llu\n", wb_events[p].tid, (unsigned long long)wb_events[p].obj);
    for (uint64_t p = 0; p < atomic_load(&h->text_head); p++)
        printf("T %llu %.*s\n", (unsigned long long)wb_texts[p].id, (int)wb_texts[p].len, wb_texts[p].text);
    printf("dropped %llu %llu\n", (unsigned long long)h->dropped, (unsigned long long)h->text_dropped);
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    found = cupti_paths()
    if found is None or shutil.which("gcc") is None:
        pytest.skip("no CUPTI headers and library, or no gcc")
    includes, libs = found
    layouts = _record_layouts(includes[0] / "cupti_activity.h")
    assert not isinstance(layouts, str), layouts
    work = tmp_path_factory.mktemp("cupti")
    source, exe = work / "harness.c", work / "harness"
    source.write_text(HARNESS)
    shim = HERE / "cupti_injection.c"
    subprocess.run(["gcc", "-O1", "-std=gnu11", f'-DSHIM="{shim}"', f"-I{HERE}",
                    *(f"-I{i}" for i in includes), *layouts, str(source), "-o", str(exe), f"-L{libs}",
                    "-lcupti", f"-Wl,-rpath,{libs}", "-lpthread", "-ldl"], check=True, timeout=120)
    return exe


def test_kernel_names_by_pointer_and_by_text(harness: Path) -> None:
    distinct, copies, passes = 1500, 3, 2  # 4,501 addresses: more than the 4,096 slots by pointer
    out = subprocess.run([str(harness), str(distinct), str(copies), str(passes)], capture_output=True,
                         text=True, check=True, timeout=60).stdout.splitlines()
    assert out[-1] == "dropped 0 0"
    events = [tuple(int(v) for v in line.split()[1:]) for line in out if line.startswith("E ")]
    texts: dict[int, list[str]] = {}
    for line in out:
        if line.startswith("T "):
            _, ident, name = line.split(" ", 2)
            texts.setdefault(int(ident), []).append(name)
    records = distinct * copies + 1
    assert [c for c, _ in events] == list(range(records)) * passes
    for correlation, ident in events:
        last = correlation == records - 1  # the record without a name
        name = "?" if last else f"void kernel_{correlation % distinct}<float>(float*, int)"
        assert texts.get(ident) == [name], (correlation, ident, texts.get(ident))
    assert len(texts) == distinct + 1  # each name sent once, under one id


def test_buffers_zeroed_for_cupti_and_kept_up_to_the_pool_size(harness: Path) -> None:
    done = subprocess.run([str(harness), "pool"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
    assert done.stdout.split() == ["kept", "2", "reused", "1"]
