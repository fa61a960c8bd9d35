"""The input pipeline's benchmark (make bench): a quick run prints the time of assembling
one batch for the translation runs, from lists and from tensors, and for the character-level
run, and writes nothing."""

import os
import pathlib
import subprocess
import sys

import pytest

from seqlib.data import DATA_VARIABLE

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not os.environ.get(DATA_VARIABLE),
                    reason="set SEQLIB_DATA_DIR to a folder holding the data sets it reads")
def test_a_quick_run_reports_each_way_of_assembling_a_batch():
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_batches", "--quick"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| batches | size | CPU ms per batch | wall ms per batch |")
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in table[2:]}
    assert set(rows) == {"translation, from lists", "translation, from tensors",
                         "character-level"}
    for line in rows.values():
        cpu = float(line.split(" | ")[2])
        assert 0 < cpu < 1000  # ms per batch
    assert "written to" not in done.stdout
