"""The widgets in a learner's older environment: ipywidgets 7, as Colab has long shipped, and
the oldest NumPy and matplotlib that pyproject.toml allows.

The test makes a fresh virtual environment, installs into it the lower bound of each of
pyproject's ranges for ipywidgets, numpy and matplotlib (exactly), torch==2.13.0, pytest,
nbval and the seqlib package itself (not editable: as Colab's set-up cell installs it), and
checks that the installed versions are those. Then, in that environment, it runs the widget
tests (tests/test_widgets.py) and nbval over chapter 03, whose spectral-radius explorer is
built by seqlib.diagrams.widgets.

It downloads packages from the package index and takes minutes: `make test` leaves it out,
`make test-colab` runs it.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import tomllib
from packaging.requirements import Requirement

REPO = pathlib.Path(__file__).resolve().parents[1]
OLDEST = ("numpy", "matplotlib", "ipywidgets")  # installed at their declared lower bound
TORCH = "torch==2.13.0"
CHAPTER = "notebooks/03_backpropagation_through_time.ipynb"
PIP_S = 1200
RUN_S = 900


def lower_bounds() -> dict[str, str]:
    """{name: lower bound} of OLDEST, from pyproject.toml's dependencies."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf8"))["project"]
    bounds = {}
    for requirement in map(Requirement, project["dependencies"]):
        if requirement.name in OLDEST:
            lows = [s.version for s in requirement.specifier if s.operator == ">="]
            assert len(lows) == 1, f"{requirement}: expected one '>=' lower bound"
            bounds[requirement.name] = lows[0]
    missing = set(OLDEST) - set(bounds)
    assert not missing, f"pyproject.toml does not declare {missing}"
    return bounds


def run(command: list[str], *, cwd: pathlib.Path, timeout: int, env=None) -> str:
    """Run a command; fail the test with its output if it fails."""
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(command)} took longer than {timeout} s")
    if done.returncode:
        pytest.fail(f"{' '.join(command)} failed ({done.returncode}):\n"
                    f"{(done.stdout + done.stderr)[-6000:]}")
    return done.stdout


def test_widgets_with_ipywidgets_7_and_the_oldest_numpy_and_matplotlib(tmp_path):
    bounds = lower_bounds()
    venv = tmp_path / "venv"
    python = str(venv / "bin" / "python")
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, timeout=120)
    # The package is built from a copy, so that the build leaves nothing in the checkout.
    source = tmp_path / "source"
    shutil.copytree(REPO / "seqlib", source / "seqlib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    pins = [f"{name}=={version}" for name, version in bounds.items()]
    run([python, "-m", "pip", "install", "--quiet", *pins, TORCH, "pytest", "nbval",
         str(source)], cwd=tmp_path, timeout=PIP_S)

    # The environment holds what was asked for, and seqlib as installed, not the checkout.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    report = json.loads(run([python, "-c", (
        "import json, ipywidgets, matplotlib, numpy, seqlib, torch; print(json.dumps({"
        "'numpy': numpy.__version__, 'matplotlib': matplotlib.__version__, "
        "'ipywidgets': ipywidgets.__version__, 'torch': torch.__version__, "
        "'seqlib': seqlib.__file__}))")], cwd=tmp_path, timeout=300, env=env))
    for name, version in bounds.items():
        assert Requirement(f"{name}=={version}").specifier.contains(report[name]), (
            f"{name} {report[name]} installed, expected {version}")
    assert report["ipywidgets"].startswith("7."), report
    assert report["torch"].split("+")[0] == TORCH.split("==")[1], report
    assert pathlib.Path(report["seqlib"]).is_relative_to(venv), (
        f"seqlib imported from {report['seqlib']}, not from the environment")

    # The venv's pytest does not put the checkout on sys.path: seqlib is the installed one.
    pytest_bin = str(venv / "bin" / "pytest")
    env["SEQLIB_DEVICE"] = "cpu"
    env["SEQLIB_MODEL_CACHE"] = str(tmp_path / "models")
    run([pytest_bin, "-p", "no:cacheprovider", "-q", "tests/test_widgets.py"],
        cwd=REPO, timeout=RUN_S, env=env)
    run([pytest_bin, "-p", "no:cacheprovider", "-q", "--nbval", "--nbval-current-env",
         "--nbval-sanitize-with", "tests/sanitize.cfg", CHAPTER],
        cwd=REPO, timeout=RUN_S, env=env)
