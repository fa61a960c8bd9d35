"""The kernel pins of each page's set-up (seqlib.pages.kernels): set before torch is imported,
a setting of the user's wins, and the environment left as found."""

import os
import pathlib
import platform
import subprocess
import sys
import warnings

import pytest

from seqlib.pages import kernels

BEFORE = {name: os.environ.get(name) for name in kernels.PINS}
X86_AVX2 = platform.machine().lower() in kernels.X86_64 and pathlib.Path(
    "/proc/cpuinfo").exists() and " avx2" in pathlib.Path("/proc/cpuinfo").read_text()


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
    code = ("import sys; from seqlib.pages import kernels; kernels.pin(); "
            "assert 'torch' not in sys.modules; "
            "import torch; print(torch.backends.cpu.get_cpu_capability())")
    environ = {k: v for k, v in os.environ.items() if k not in kernels.PINS}
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], env=environ,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    if X86_AVX2:
        assert done.stdout.strip() == "AVX2"
