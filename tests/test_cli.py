import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from workbench.cli import main
from workbench.trace import load

SMALL = ["--backend", "cpu", "--log2-constraints", "5", "--partitions", "4", "--no-progress"]

TIMING_FORMATS = [
    r"CUZK_TIMING: prep_msm_ms=\d+",
    r"CUZK_TIMING: b_g2_msm_ms=\d+ num_circuits=1",
    r"CUZK_TIMING: pre_lock_cpu_ms=\d+ mutex_wait_ms=\d+",
    r"CUZK_TIMING: gpu_tid=\d+ ntt_msm_h_ms=\d+",
    r"CUZK_TIMING: gpu_tid=\d+ barrier_wait_ms=\d+",
    r"CUZK_TIMING: gpu_tid=\d+ batch_add_ms=\d+",
    r"CUZK_TIMING: gpu_tid=\d+ tail_msm_ms=\d+ gpu_total_ms=\d+",
    r"CUZK_TIMING: mutex_held_ms=\d+ total_start_fn_ms=\d+",
    r"CUZK_NTT_H: d_b_alloc=\d+ms ntt_kernels=\d+ms coset_intt_sync=\d+ms msm_init=\d+ms "
    r"msm_invoke=\d+ms msm_dtor=\d+ms total=\d+ms",
]
TIMELINE = r"TIMELINE,\d+,(SYNTH_START|SYNTH_END|GPU_QUEUE|GPU_PICKUP|GPU_START|GPU_END),job0,\S+"


def test_run_writes_trace_summary_chrome_and_cuzk_lines(tmp_path, capsys):
    trace_path, chrome = tmp_path / "r.wbtrace", tmp_path / "r.json"
    code = main(["run", *SMALL, "--trace", str(trace_path), "--chrome", str(chrome), "--cuzk-log"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "completed: 4 partitions" in out and "ntt_msm_h" in out and "GPU mutex" in out
    trace = load(trace_path)
    assert trace.meta["outcome"] == "completed" and trace.config["partitions"] == 4
    lines = [line for line in err.splitlines() if line.startswith(("CUZK_", "TIMELINE,"))]
    timing = [line for line in lines if not line.startswith("TIMELINE")]
    assert len(timing) == 4 * len(TIMING_FORMATS)
    for i, line in enumerate(timing):
        assert re.fullmatch(TIMING_FORMATS[i % len(TIMING_FORMATS)], line), line
    timeline = [line for line in lines if line.startswith("TIMELINE")]
    assert len(timeline) == 4 * 6 and all(re.fullmatch(TIMELINE, line) for line in timeline)
    events = json.loads(chrome.read_text())["traceEvents"]
    assert {e["ph"] for e in events} >= {"M", "X", "i", "s", "f"}  # flows: hand-offs
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert "mutex/gpu0" in names and any(n.startswith("worker/0 (gpu-worker-0") for n in names)


def test_summary_and_export_of_a_saved_trace(tmp_path, capsys):
    trace_path = tmp_path / "r.wbtrace"
    assert main(["run", *SMALL, "--trace", str(trace_path)]) == 0
    capsys.readouterr()
    assert main(["summary", str(trace_path)]) == 0
    assert "partitions/min" in capsys.readouterr().out
    assert main(["export", "cuzk", str(trace_path), "-o", str(tmp_path / "log.txt")]) == 0
    assert (tmp_path / "log.txt").read_text().count("CUZK_TIMING: prep_msm_ms=") == 4


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "--gpu-workers", "0"], "gpu_workers=0 is not allowed: an integer from 1 to 16"),
    (["run", "--bool-fraction", "2"], "bool_fraction=2.0 is not allowed"),
    (["run", "--memory-mode", "mapped"], "invalid choice: 'mapped'"),
    (["run", "--gpu-workers", "two"], "invalid int value: 'two'"),
    (["run", "--backend", "cpu", "--log2-constraints", "22"], "at most 18 on the CPU backend"),
    (["run", "--inject-fault", "nonsense"], "--inject-fault 'nonsense' is not allowed"),
    (["run", "--inject-fault", "nophase:1"], "no phase 'nophase' (one of buffer_checkout, synthesis,"),
    (["summary", "/nonexistent.wbtrace"], "no file at /nonexistent.wbtrace"),
])
def test_bad_input_exits_2_with_a_message_naming_it(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        sys.exit(main(argv))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bad_config_file_and_unknown_trace_file(tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text('{"gpu_workers": 2, "colour": "red"}')
    assert main(["run", "--config", str(config)]) == 2
    assert "colour='red' is not allowed" in capsys.readouterr().err
    notes = tmp_path / "notes.wbtrace"
    notes.write_text("just text")
    assert main(["summary", str(notes)]) == 2
    assert "notes.wbtrace: not a format the workbench reads" in capsys.readouterr().err


def test_config_round_trips_through_save_and_load(tmp_path, capsys):
    saved = tmp_path / "c.json"
    assert main(["run", *SMALL, "--seed", "9", "--save-config", str(saved),
                 "--trace", str(tmp_path / "a.wbtrace")]) == 0
    assert main(["run", "--config", str(saved), "--no-progress", "--trace", str(tmp_path / "b.wbtrace")]) == 0
    assert load(tmp_path / "a.wbtrace").config == load(tmp_path / "b.wbtrace").config


def test_injected_fault_exits_1_names_phase_and_saves_trace(tmp_path, capsys):
    trace_path = tmp_path / "f.wbtrace"
    code = main(["run", *SMALL, "--trace", str(trace_path), "--inject-fault", "tail_msm:1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "phase tail_msm failed on partition 1, worker" in err and "Traceback" not in err
    assert load(trace_path).meta["outcome"] == "failed"


def test_ctrl_c_exits_130_and_saves_the_trace(tmp_path):
    trace_path = tmp_path / "i.wbtrace"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench.cli", "run", "--backend", "cpu", "--log2-constraints", "8",
         "--partitions", "400", "--no-progress", "--trace", str(trace_path)],
        stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )
    assert proc.stderr is not None
    header = proc.stderr.readline()
    assert header.startswith("workbench run:")
    time.sleep(1.5)  # let some partitions flow; the test is about what happens at any moment
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    trace = load(trace_path)
    assert trace.meta["outcome"] == "stopped"
    assert trace.select(name="synthesis")


def test_python_dash_m_workbench_is_the_command():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "workbench", "run", "--no-such-flag"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "unrecognized arguments: --no-such-flag" in done.stderr
    assert done.stderr.startswith("usage: workbench")
