"""The nbval mode of `make test` (tests/nbval_mode.py) and the kernel pins of each page's
set-up cell (seqlib.kernels)."""

import json
import os
import pathlib
import platform
import subprocess
import sys
import warnings

import pytest

from seqlib import kernels

sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))
import nbval_mode  # noqa: E402

SCRIPT = pathlib.Path(nbval_mode.__file__)
BEFORE = {name: os.environ.get(name) for name in kernels.PINS}
X86_AVX2 = platform.machine().lower() in kernels.X86_64 and pathlib.Path(
    "/proc/cpuinfo").exists() and " avx2" in pathlib.Path("/proc/cpuinfo").read_text()


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


def unset_the_pins(monkeypatch):
    for name in kernels.PINS:  # set first, so that monkeypatch restores what pin() sets
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def test_pin_sets_what_is_unset_and_warns_once_torch_is_imported(monkeypatch):
    unset_the_pins(monkeypatch)
    monkeypatch.setenv("MKL_CBWR", "AUTO")  # a setting of the user's wins
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    with pytest.warns(UserWarning, match=r"pin\(\) ran after torch was imported"):
        settings = kernels.pin()  # torch is imported in this process
    assert settings == {"machine": "x86_64", "ATEN_CPU_CAPABILITY": "avx2",
                        "MKL_CBWR": "AUTO", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    monkeypatch.setattr(platform, "machine", lambda: "arm64")
    unset_the_pins(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kernels.pin() == {"machine": "arm64", **dict.fromkeys(kernels.PINS, "")}


def test_pin_leaves_the_environment_as_it_found_it_in_this_process():
    assert {k: os.environ.get(k) for k in kernels.PINS} == BEFORE


def test_pin_runs_before_torch_in_a_fresh_interpreter():
    code = ("import seqlib, sys; seqlib.kernels.pin(); assert 'torch' not in sys.modules; "
            "import torch; print(torch.backends.cpu.get_cpu_capability())")
    environ = {k: v for k, v in os.environ.items() if k not in kernels.PINS}
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], env=environ,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    if X86_AVX2:
        assert done.stdout.strip() == "AVX2"
