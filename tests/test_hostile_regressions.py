"""What the mutated real files and the attack harness (benchmarks/attacks.py) found, each
as the crafted case that showed it: now a refusal in one line, or a clean result."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from workbench.cli import main
from workbench.config import RunConfig
from workbench.importers import load_any
from workbench.trace import TraceFormatError, load
from workbench.trace.store_schema import CONFIG

DATA = Path(__file__).parent / "data"
RUN = DATA / "whatif" / "w2.wbtrace"
SEED_LOG = DATA / "cuzk_seed" / "daemon.log"


def _with_header(tmp_path: Path, change) -> Path:
    with zipfile.ZipFile(RUN) as z:
        members = {name: z.read(name) for name in z.namelist()}
    header = json.loads(np.load(io.BytesIO(members["header.npy"])).tobytes())
    change(header)
    buffer = io.BytesIO()
    np.save(buffer, np.frombuffer(json.dumps(header).encode(), np.uint8))
    members["header.npy"] = buffer.getvalue()
    path = tmp_path / "crafted.wbtrace"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _refused(argv, capsys, *said):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("workbench: error: "), err
    for text in said:
        assert text in err, err


FACTS = {
    # diagnose: "internal error: TypeError: int() argument must be ... not 'NoneType'" (utilisation.py)
    "a worker's GPU null": (lambda h: h["meta"].update(worker_gpu={"0": None}), "'meta.worker_gpu' is"),
    # diagnose: "internal error: Deadlock: 2 processes blocked" in the replay
    "gpu_workers negative": (lambda h: h["config"].update(gpu_workers=-3), "'config.gpu_workers' is -3, not"),
    "partitions a string": (lambda h: h["config"].update(partitions="8"), "'config.partitions' is '8'"),
    "lock scope unknown": (lambda h: h["config"].update(lock_scope="x"), "'config.lock_scope' is 'x', not"),
    "outcome a list": (lambda h: h["meta"].update(outcome=[1]), "'meta.outcome' is [1], not a string"),
    "wall time a word": (lambda h: h["meta"].update(wall_s="fast"), "'meta.wall_s' is 'fast'"),
    "a link of 1e-300 GB/s": (lambda h: h["meta"].update(link_gbps=1e-300), "'meta.link_gbps' is 1e-300"),
}


@pytest.mark.parametrize("case", sorted(FACTS))
def test_run_facts_of_the_wrong_type_or_range_are_refused_naming_the_field(case, tmp_path, capsys):
    change, message = FACTS[case]
    path = _with_header(tmp_path, change)
    with pytest.raises(TraceFormatError, match=r"crafted\.wbtrace is damaged"):
        load(path)
    _refused(["diagnose", str(path)], capsys, message, str(path))


def test_every_setting_has_its_check_and_the_defaults_pass_them(tmp_path):
    assert set(CONFIG) == set(RunConfig.__dataclass_fields__)
    assert load(_with_header(tmp_path, lambda h: h.update(config=RunConfig().to_dict()))).config["gpus"] == 1


@pytest.mark.parametrize("flag, value", [("--link-gbps", "1e-300"), ("--link-gbps", "inf"),
                                         ("--copy-bytes", "1e300"), ("--host-cores", "nan")])
def test_analysis_figures_out_of_range_are_refused(flag, value, capsys):
    # --link-gbps 1e-300: "internal error: OverflowError: Python int too large to convert to C long"
    _refused(["whatif", str(RUN), "--zerocopy", flag, value], capsys, f"{flag.lstrip('-')}={value}"[:10])


def test_export_cuzk_of_a_log_whose_call_has_no_ntt_msm_h(tmp_path, capsys):
    # A GPU_END line printed twice made a call of the timeline alone: KeyError 'ntt_msm_h'.
    lines = SEED_LOG.read_text().splitlines()
    (at,) = [i for i, line in enumerate(lines) if "GPU_END,job-7,worker=1,partition=1," in line]
    lines.insert(at, lines[at])
    log = tmp_path / "twice.log"
    log.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.log"
    assert main(["export", "cuzk", str(log), "-o", str(out)]) == 0
    finished = sum(1 for line in lines if "mutex_held_ms=" in line)
    assert out.read_text().count("mutex_held_ms=") >= finished


def test_holds_closed_out_of_order_are_found_not_recursed_into():
    # The seed log's lines reversed: `report` died in RecursionError (viz/lanes.py HoldIndex.closed).
    from workbench.viz.lanes import HoldIndex

    holds = HoldIndex()
    for start in range(10, 0, -1):  # each hold closed long after, latest first
        holds.opened(0, start * 100)
    for start in range(1, 11):
        holds.closed(0, start * 100, start * 100 + 50)
    holds.closed(0, 5, 7)  # never opened
    assert holds.starts[0] == [5, *range(100, 1001, 100)]
    assert holds.ends[0] == [7.0, *(float(s + 50) for s in range(100, 1001, 100))]



def test_the_bars_of_a_log_with_its_lines_reversed(tmp_path):
    from workbench.importers import load_any
    from workbench.viz.bars import trace_bars

    log = tmp_path / "reversed.log"
    log.write_text("\n".join(reversed(SEED_LOG.read_text().splitlines())))
    trace = load_any(log)
    assert len(trace_bars(trace)) > 0


@pytest.mark.parametrize("argv, said", [
    (["run", "--config", "/dev/zero"], "/dev/zero: more than 1 MiB, not a config file"),
    (["diagnose", str(RUN), "--roles", "/dev/zero"], "/dev/zero: more than 1 MiB, not a role mapping file"),
])
def test_a_device_as_a_settings_file_is_refused_not_read_forever(argv, said, capsys):
    _refused(argv, capsys, said)


def test_a_config_nested_thousands_deep_is_refused(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text('{"partitions": ' + "[" * 100_000 + "]" * 100_000 + "}")
    roles = tmp_path / "roles.json"
    roles.write_text("[" * 100_000 + "]" * 100_000)
    _refused(["run", "--config", str(deep)], capsys, "JSON nested at most 64 levels deep")
    _refused(["diagnose", str(RUN), "--roles", str(roles)], capsys, "roles.json: not valid JSON")


def test_a_cuzk_ntt_h_part_past_the_duration_bound_is_a_malformed_line(tmp_path, capsys):
    # A part without its ms suffix was read as any figure: 10^14 ms overflowed the time columns.
    log = tmp_path / "daemon.log"
    log.write_text("CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=100\n"
                   "CUZK_NTT_H: ntt_kernels=99999999999999 total=5\n"
                   "CUZK_TIMING: b_g2_msm_ms=4 num_circuits=99999999999999999\n")
    assert main(["summary", str(log)]) == 0
    assert "internal error" not in capsys.readouterr().err
    report = load_any(log).meta["import"]
    assert report["skipped"] == {"CUZK_NTT_H line with a malformed value": 1}
    assert report["skipped_lines"] == {"CUZK_NTT_H line with a malformed value": [2]}
