"""The nbval mode of `make test` (tests/nbval_mode.py)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from seqlib.pages import kernels

sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))
import nbval_mode  # noqa: E402

SCRIPT = pathlib.Path(nbval_mode.__file__)


def mode(**variables) -> tuple[str, str]:
    """(stdout, stderr) of the script run with the pins and `variables` on top."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("NBVAL_MODE", "SEQLIB_SEED", "SEQLIB_DEVICE")}
    environ.update(kernels.PINS, **variables)
    done = subprocess.run([sys.executable, str(SCRIPT)], env=environ, capture_output=True,
                          text=True, timeout=300)
    return done.stdout.strip(), done.stderr.strip()


def clear(monkeypatch):
    for name in ("NBVAL_MODE", "SEQLIB_SEED", "SEQLIB_DEVICE"):
        monkeypatch.delenv(name, raising=False)


def test_exact_mode_exactly_when_the_probe_gives_the_stored_weights(monkeypatch):
    stored = json.loads(nbval_mode.PROBE.read_text())
    clear(monkeypatch)
    monkeypatch.setattr(nbval_mode, "probe_run", lambda: (stored["loss"], stored["sha256"]))
    mode_, why = nbval_mode.decide()
    assert mode_ == "exact"
    assert why.startswith("the probe's training run gave the stored weights bit for bit")
    monkeypatch.setattr(nbval_mode, "probe_run", lambda: (0.125, "0" * 64))
    mode_, why = nbval_mode.decide()
    assert mode_ == "portable"
    assert "ended at loss 0.125000000" in why and "round differently" in why
    assert stored["processor"] in why and kernels.processor() in why  # both processors named


def test_the_script_decides_by_the_probe_on_this_processor_whatever_it_is():
    """No assumption about the processor: the script says exact if and only if the probe,
    run here with the pins, reproduces the stored digest (twice the same: it is
    deterministic)."""
    stored = json.loads(nbval_mode.PROBE.read_text())
    code = ("import sys; sys.path.insert(0, 'tests'); import nbval_mode; "
            "print(nbval_mode.probe_run()[1])")
    environ = {k: v for k, v in os.environ.items()
               if k not in ("NBVAL_MODE", "SEQLIB_SEED", "SEQLIB_DEVICE")} | kernels.PINS
    digests = {subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                              text=True, timeout=300, cwd=SCRIPT.parents[1]).stdout.strip()
               for _ in range(2)}
    assert len(digests) == 1 and len(next(iter(digests))) == 64, digests
    out, said = mode()
    expected = "exact" if digests == {stored["sha256"]} else "portable"
    assert out == expected, said
    assert said.startswith(f"nbval: {expected} mode")


def test_a_seed_offset_a_gpu_or_the_variable_decide_without_the_probe(monkeypatch):
    def no_probe():
        raise AssertionError("the probe ran")

    monkeypatch.setattr(nbval_mode, "probe_run", no_probe)
    for name in ("NBVAL_MODE", "SEQLIB_SEED", "SEQLIB_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SEQLIB_SEED", "1")
    assert nbval_mode.decide() == ("portable", "SEQLIB_SEED=1 trains every model from other "
                                               "random numbers")
    monkeypatch.setenv("NBVAL_MODE", "exact")
    with pytest.raises(SystemExit, match="NBVAL_MODE=exact asks for the stored digits, which "
                                         "SEQLIB_SEED=1 cannot give"):
        nbval_mode.decide()
    monkeypatch.setenv("SEQLIB_SEED", "0")
    assert nbval_mode.decide() == ("exact", "NBVAL_MODE=exact asks for it")
    monkeypatch.setenv("NBVAL_MODE", "lax")
    with pytest.raises(SystemExit, match="NBVAL_MODE must be 'exact' or 'portable'"):
        nbval_mode.decide()
    monkeypatch.delenv("NBVAL_MODE")
    monkeypatch.setenv("SEQLIB_DEVICE", "cuda")
    assert nbval_mode.decide()[0] == "portable"
