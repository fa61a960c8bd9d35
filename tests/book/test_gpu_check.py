"""The GPU check (benchmarks/gpu_check.py) rehearsed on the CPU with tiny settings, so that
its first run on a GPU cannot fail on a slip: the benchmarks' smoke runs, one chapter under
nbval, the three headline runs probed, sized, trained and evaluated, and the results files;
then its parts alone: the sizing of a run, the reading of nbval's log, the verdicts."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from seqlib.data import DATA_VARIABLE

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_check)

NEEDS_DATA = pytest.mark.skipif(
    not os.environ.get(DATA_VARIABLE),
    reason="set SEQLIB_DATA_DIR to a folder holding the data sets to train on them")


@NEEDS_DATA
def test_the_whole_check_rehearsed_on_the_cpu(tmp_path):
    command = [sys.executable, "-m", "benchmarks.gpu_check", "--tiny", "--out", str(tmp_path),
               "--budget", "900"]  # the command of the GPU, with --tiny
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1000)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    assert report["benchmarks"] == dict.fromkeys(gpu_check.BENCH_TINY, "done")
    (chapter,) = gpu_check.TINY_CHAPTERS
    notebook = json.loads((ROOT / "notebooks" / f"{chapter}.ipynb").read_text())
    code_cells = sum(cell["cell_type"] == "code" for cell in notebook["cells"])
    assert report["chapters"] == {chapter: {"passed": code_cells, "failed": 0, "skipped": 0,
                                            "status": "passed"}}
    assert report["nbval_exit"] == 0
    assert list(report["runs"]) == list(gpu_check.HEADLINES)
    for name, run in report["runs"].items():
        assert run["status"] == "done", (name, run)
        assert run["steps"] == run["profile_steps"] == 20  # the tiny profile fits
        assert run["probe_seconds_per_step"] > 0 and run["startup_seconds"] > 0
        assert run["parameters"] > 0 and run["train_seconds"] > 0
        assert gpu_check.verdict(run) in ("met", "not met")
        assert run["config"]["fit"]["steps"] == 20 and not run["tf32"]  # what ran: the results'
    assert [step for step, _ in report["runs"]["char-lm"]["val_curve"]] == [5, 10, 15, 20]
    page = (tmp_path / "gpu-check.md").read_text()
    assert f"| {chapter} | {code_cells} | 0 | passed |" in page
    for name in gpu_check.HEADLINES:
        assert f"| {name} | " in page and "| 20 of 20 |" in page


def test_a_run_keeps_its_steps_when_they_fit_and_is_shortened_when_not():
    assert gpu_check.sized(8000, 800, 0.01, 200.0) == (8000, 800)  # 13,000 steps would fit
    fit = int(gpu_check.SAFETY * 100.0 / 0.05)  # 1,300 steps
    assert gpu_check.sized(8000, 800, 0.05, 100.0) == (fit, fit // 10)
    assert gpu_check.sized(5000, 100, 0.05, 100.0) == (fit, 100)  # a short warm-up stays
    assert gpu_check.sized(5000, 100, 10.0, 5.0) == (1, 0)


def test_nbval_logs_are_read_with_and_without_xdist(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    (tmp_path / "notebooks").mkdir()
    for name, cells in (("01_a", 3), ("02_b", 2), ("03_c", 2), ("04_d", 1)):
        notebook = {"cells": [{"cell_type": "code"}] * cells + [{"cell_type": "markdown"}]}
        (tmp_path / "notebooks" / f"{name}.ipynb").write_text(json.dumps(notebook))
    log = "\n".join([
        "notebooks/01_a::ipynb::Cell 0 PASSED [ 10%]",
        "[gw0] [ 20%] PASSED notebooks/01_a::ipynb::Cell 1",
        "[gw1] [ 30%] FAILED notebooks/02_b.ipynb::Cell 0",
        "notebooks/01_a::ipynb::Cell 2 SKIPPED [ 40%]",
        "[gw1] [ 50%] PASSED notebooks/03_c::ipynb::Cell 0",
        "PASSED notebooks/99_elsewhere::ipynb::Cell 0",
        "FAILED notebooks/02_b.ipynb::Cell 0 - AssertionError: the summary line, again",
    ])
    report = gpu_check.chapters_report(["01_a", "02_b", "03_c", "04_d"], log)
    assert report["01_a"] == {"passed": 2, "failed": 0, "skipped": 1, "status": "passed"}
    assert report["02_b"]["status"] == "failed"
    assert report["03_c"]["status"] == "stopped after 1 of 2"
    assert report["04_d"]["status"] == "not reached"


def test_verdicts():
    done = {"status": "done", "metric": "bleu_greedy", "bleu_greedy": 37.2}
    assert gpu_check.verdict(done | {"goal": ">=", "value": 37.0}) == "met"
    assert gpu_check.verdict(done | {"goal": ">=", "value": 37.5}) == "not met"
    assert gpu_check.verdict(done | {"goal": "near", "value": 36.0}) == "met"
    assert gpu_check.verdict(done | {"goal": "near", "value": 34.0}) == "not met"
    assert gpu_check.verdict({"metric": "val_loss", "val_loss": 1.46, "goal": "<=",
                              "value": 1.47, "status": "done"}) == "met"
    assert gpu_check.verdict({"status": "stopped at the deadline"}) == "no result"
