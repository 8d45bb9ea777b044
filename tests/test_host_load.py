"""Host memory load beside a run: recorded, stopped with the run, named by the analysis."""

import time

import numpy as np
import pytest

from workbench.analysis.transfers import transfer_report
from workbench.cli import build_parser, main
from workbench.config import ConfigError, RunConfig
from workbench.model.tracks import HOST_LOAD_TRACK
from workbench.pipeline import host_load
from workbench.pipeline.backends import select_backend
from workbench.pipeline.run import Pipeline


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(host_load, "BLOCK_BYTES", 4 << 20)
    monkeypatch.setattr(host_load, "SAMPLE_S", 0.02)


def test_a_run_with_host_load_records_it_and_stops_it(small_blocks):
    config = RunConfig(backend="cpu", log2_constraints=8, partitions=6, host_load_threads=2)
    result = Pipeline(config, select_backend(config)).run()
    assert result.ok, result.error
    trace = result.trace
    (span,) = trace.select(track=HOST_LOAD_TRACK, name="host_load")
    assert span.attrs["threads"] == 2 and span.attrs["block_bytes"] == 4 << 20
    assert span.attrs["bytes"] > 0 and span.attrs["gbps"] > 0
    run_end = max(i.ts_ns for i in trace.iter_instants() if i.name == "run_end")
    assert span.end_ns <= run_end  # stopped before the run's end was recorded
    samples = [c for c in trace.iter_counters() if c.track == HOST_LOAD_TRACK]
    assert samples and all(c.name == "GB/s" and c.value >= 0 for c in samples)
    assert not [t for t in __import__("threading").enumerate() if t.name.startswith("host-load")]
    report = transfer_report(trace)
    assert report is not None and report.host_load_threads == 2
    assert report.host_load_gbps == pytest.approx(span.attrs["gbps"])


def test_without_host_load_nothing_is_recorded():
    config = RunConfig(backend="cpu", log2_constraints=6, partitions=2)
    trace = Pipeline(config, select_backend(config)).run().trace
    assert not trace.select(track=HOST_LOAD_TRACK)
    report = transfer_report(trace)
    assert report is None or (report.host_load_threads == 0 and report.load_correlation is None)


def test_the_load_streams_real_memory(small_blocks):
    from workbench.trace.recorder import Recorder

    load = host_load.HostLoad(3)
    recorder = Recorder()
    load.start(recorder)
    deadline = __import__("time").monotonic() + 60  # a loaded machine may start a thread late
    try:
        while not all(load._moved) and __import__("time").monotonic() < deadline:
            __import__("time").sleep(0.01)
    finally:
        load.stop()
    assert all(moved > 0 for moved in load._moved)
    assert all(moved % (2 * (4 << 20)) == 0 for moved in load._moved)


def test_bad_host_load_settings_are_refused():
    with pytest.raises(ConfigError, match="host_load_threads"):
        RunConfig(host_load_threads=-1)
    with pytest.raises(ValueError, match="at least one thread"):
        host_load.HostLoad(0)
    args = build_parser().parse_args(["run", "--host-load-threads", "3"])
    assert args.host_load_threads == 3


def test_copy_rates_are_correlated_with_the_load_sampled_nearest_them():
    from workbench.trace.container import Trace

    rows, counters = [], []
    for k, (load_gbps, copy_ms) in enumerate([(0, 10), (40, 30), (0, 11), (40, 32), (0, 10)]):
        t = k * 1_000_000_000
        counters.append((HOST_LOAD_TRACK, "GB/s", t + 400_000_000, float(load_gbps)))
        rows.append(("worker/0", "h2d_copy", t + 450_000_000, t + 450_000_000 + copy_ms * 1_000_000, k, 0,
                     {"bytes": 100_000_000, "vector": "a", "source": "pageable"}))
    rows.append((HOST_LOAD_TRACK, "host_load", 0, 5_000_000_000, -1, -1,
                 {"threads": 4, "bytes": 10**11, "gbps": 20.0}))
    report = transfer_report(Trace.from_rows(rows, counters=counters))
    assert report is not None and report.host_load_threads == 4 and report.host_load_gbps == 20.0
    assert report.load_correlation is not None and report.load_correlation < -0.9
    assert np.isfinite(report.load_correlation)


def test_a_load_thread_that_cannot_allocate_is_a_notice_not_a_traceback(small_blocks, monkeypatch):
    real_ones = np.ones

    def no_memory(shape, dtype=None):
        if shape == (4 << 20) // 8:
            raise MemoryError
        return real_ones(shape, dtype)

    monkeypatch.setattr(host_load.np, "ones", no_memory)
    config = RunConfig(backend="cpu", log2_constraints=6, partitions=2, host_load_threads=2)
    result = Pipeline(config, select_backend(config)).run()
    assert result.ok, result.error
    notices = result.trace.meta["notices"]
    assert sum("could not allocate its 2 x 4 MiB buffers" in n for n in notices) == 2



def test_a_load_larger_than_the_host_can_give_is_refused_before_the_run(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(host_load, "available_bytes", lambda: 16 << 30)
    message = r"host_load_threads=256 is not allowed: it would ask for 128\.0 GiB .* use at most 16$"
    with pytest.raises(ConfigError, match=message):
        host_load.check_memory(256)
    host_load.check_memory(16)  # 8 GiB of 16: allowed
    started = time.monotonic()
    code = main(["run", "--backend", "cpu", "--host-load-threads", "256", "--no-progress",
                 "--trace", str(tmp_path / "t.wbtrace")])
    assert code == 2 and time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "host_load_threads=256 is not allowed: it would ask for 128.0 GiB" in err


def test_the_machine_says_what_memory_is_available():
    available = host_load.available_bytes()
    with open("/proc/meminfo") as meminfo:
        kib = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:"))
    assert available is not None and abs(available - kib * 1024) < 1 << 30
