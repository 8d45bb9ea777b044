"""`workbench diagnose`, `import`, `diff` and `whatif` on every format, and their refusals."""

import json
import sys
from pathlib import Path

import pytest
from golden import case
from nsys_fixture import export_like_nsys

from workbench.cli import main
from workbench.export.chrome import to_chrome_json
from workbench.trace import load, save

SEED_LOG = Path(__file__).parent / "data" / "cuzk_seed" / "daemon.log"


@pytest.fixture
def traces(tmp_path):
    copy_bound = save(case("copy_bound"), tmp_path / "copy.wbtrace")
    balanced = save(case("balanced"), tmp_path / "balanced.wbtrace")
    return copy_bound, balanced


def test_diagnose_a_trace_prints_the_verdict_with_its_numbers(traces, capsys):
    assert main(["diagnose", str(traces[0]), "--link-gbps", "55"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Slow host-to-device copies hold the GPU mutex: ntt_msm_h swings 2.6x")
    for text in ("55 GB/s link", "Zerocopy is predicted", "predicted: copies at link speed (zerocopy): +",
                 "kernel busy (device records)", "NVML duty cycle", "idle cause", "evidence: spans",
                 "worker/", "mutex/gpu0: held"):
        assert text in out, text


def test_diagnose_a_production_log(capsys):
    assert main(["diagnose", str(SEED_LOG), "--link-gbps", "55", "--copy-bytes", "12.5e9", "--brief"]) == 0
    out = capsys.readouterr().out
    assert "copy_bound" in out.split("Findings")[1].splitlines()[1]
    assert "note: imported from cuzk daemon log; skipped:" in out and "not a cuzk timing line" in out
    assert "idle cause" not in out  # --brief


def test_diagnose_chrome_and_nsys_inputs(tmp_path, capsys):
    chrome = tmp_path / "run.json"
    chrome.write_text(to_chrome_json(case("prep_bound")))
    assert main(["diagnose", str(chrome), "--no-whatif"]) == 0
    assert capsys.readouterr().out.startswith("The GPU waits for prep_msm at the barrier")
    export = export_like_nsys(case("prep_bound"), tmp_path / "run.sqlite")
    assert main(["diagnose", str(export), "--no-whatif"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("The GPU waits for prep_msm") and "nsys SQLite export" in out


def test_import_writes_a_trace_and_reports_what_it_skipped(tmp_path, capsys):
    out_path = tmp_path / "seed.wbtrace"
    assert main(["import", str(SEED_LOG), "-o", str(out_path)]) == 0
    out = capsys.readouterr().out
    assert "from cuzk daemon log" in out and "skipped" in out and f"trace: {out_path}" in out
    trace = load(out_path)
    assert trace.meta["import"]["format"] == "cuzk daemon log"
    assert len(trace.select(name="hold")) == 28


def test_diff_names_what_changed(traces, capsys):
    assert main(["diff", str(traces[0]), str(traces[1]), "--no-whatif"]) == 0
    out = capsys.readouterr().out
    assert "went away in B: Slow host-to-device copies hold the GPU mutex [copy_bound" in out
    assert "appeared in B: GPU-bound" in out
    assert "settings: synth_threads 14 -> 4" in out
    assert "ntt_msm_h" in out and "kernel busy (device)" in out


def test_whatif_prints_a_prediction(traces, capsys):
    assert main(["whatif", str(traces[0]), "--zerocopy", "--link-gbps", "55"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("copies at link speed (zerocopy): +") and "partitions/min" in out


@pytest.mark.parametrize(("content", "message"), [
    (b"hello world\n", "not a format the workbench reads"),
    (b'{"traceEvents": [\n  {"ph": "X",,}]}',
     "not valid JSON (Expecting property name enclosed in double quotes at line 2, column 14)"),
    (b"noise\nCUZK_TIMING: ntt_msm_h_ms=12x\n",
     "no CUZK_TIMING, CUZK_NTT_H or TIMELINE lines found in 2 lines (1 not a cuzk timing line "
     "(first at line 1), 1 CUZK_TIMING line with a malformed value (first at line 2))"),
    (b"PK\x03\x04junk", "is not a workbench trace"),
])
def test_malformed_input_exits_2_with_a_message(tmp_path, capsys, content, message):
    path = tmp_path / "input.bin"
    path.write_bytes(content)
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("workbench: error: ") and message in err, err
    assert "Traceback" not in err


def test_bad_options_and_missing_files_exit_2(traces, tmp_path, capsys):
    assert main(["diagnose", str(traces[0]), "--link-gbps", "-3"]) == 2
    assert "--link-gbps=-3.0 is not allowed" in capsys.readouterr().err
    assert main(["diagnose", str(tmp_path / "absent.log")]) == 2
    assert "no file at" in capsys.readouterr().err
    for factor in ("1e-300", "1e300", "nan"):  # 1e-300 overflowed the replay
        assert main(["whatif", str(traces[0]), "--synthesis-speedup", factor]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "a factor from 0.001 to 1000" in err, err


def test_whatif_without_a_link_speed_is_refused(tmp_path, capsys):
    path = save(case("lock_serialised"), tmp_path / "t.wbtrace")
    assert main(["whatif", str(path), "--zerocopy"]) == 2
    assert "link" in capsys.readouterr().err


def test_the_command_runs_as_a_program(traces):
    import subprocess

    done = subprocess.run([sys.executable, "-m", "workbench.cli", "diagnose", str(traces[1]), "--brief"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("GPU-bound"), done.stderr
    json.dumps(done.stdout)
