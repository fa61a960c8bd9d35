"""The nbval mode of `make test` (tests/nbval_mode.py) and the kernel pins of each page's
set-up cell (seqlib.kernels)."""

import os
import pathlib
import platform
import subprocess
import sys
import warnings

import pytest

from seqlib import kernels

sys.path.insert(0, str(pathlib.Path(__file__).parent))
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


@pytest.mark.skipif(not X86_AVX2, reason="the stored probe was run on x86-64 with AVX2")
def test_the_probe_finds_exact_mode_with_the_pins_and_portable_without():
    out, said = mode()
    assert out == "exact", said
    assert said.startswith("nbval: exact mode (every cell compared): the probe's training run "
                           "gave the stored weights bit for bit")
    out, said = mode(ATEN_CPU_CAPABILITY="default")
    assert out == "portable", said
    assert "this machine's kernels round differently" in said
    assert "ATEN_CPU_CAPABILITY=default" in said


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
