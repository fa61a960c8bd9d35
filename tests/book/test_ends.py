"""Both ends of pyproject.toml's ranges, each in a fresh virtual environment made from the
package index (tests/fresh_env.py, whose docstring says how torch is installed there):

- the oldest: the oldest Python that requires-python admits, with the lower bound of every
  runtime dependency, torch included;
- the newest: the newest Python of the classifiers, with the newest release of every runtime
  dependency that installs on it.

The test tools come within the test extra's ranges, at their newest versions that install.
In each environment run the unit tests and three chapters with nbval, whose stored outputs
must come out the same at both ends. The interpreters are found on PATH as `python3.X`.

Each end downloads a few GB and takes many minutes: `make test` leaves them out,
`make test-oldest` and `make test-newest` run them.
"""

import shutil

import pytest
from fresh_env import (
    REPO,
    claimed_pythons,
    create,
    dependencies,
    install,
    lower_bound,
    newest,
    project,
    run_tests,
)
from packaging.requirements import Requirement

CHAPTERS = ["notebooks/02_recurrent_neural_networks.ipynb",
            "notebooks/03_backpropagation_through_time.ipynb",
            "notebooks/10_transformer_blocks_and_parameter_counts.ipynb"]
# Left out: the tests that make environments of their own, those of the built book and of
# JupyterLab (a browser), and those of the book's own files, read with the book's tooling
# (PyYAML, pybtex).
LEFT_OUT = {"test_colab.py", "test_ends.py", "test_html.py", "test_pdf.py", "test_lab.py",
            "test_coverage.py", "test_headers.py", "test_notebooks.py", "test_packaging.py",
            "test_references.py"}


def unit_tests() -> list[str]:
    return sorted(str(path.relative_to(REPO)) for path in (REPO / "tests").rglob("test_*.py")
                  if path.name not in LEFT_OUT)


def interpreter(version: str) -> str:
    found = shutil.which(f"python{version}")
    if found is None:
        pytest.fail(f"python{version} is not on PATH")
    return found


@pytest.fixture
def venv(tmp_path):
    yield tmp_path / "venv"
    shutil.rmtree(tmp_path / "venv", ignore_errors=True)  # GB, that pytest would keep a while


def check(venv, version: str, python: str, pins: dict[str, str]) -> None:
    report = install(venv, python, pins)
    assert report.pop("python").rsplit(".", 1)[0] == version, report
    print(f"\nPython {version}:", ", ".join(f"{name} {v}" for name, v in report.items()))
    print(run_tests(venv, unit_tests() + CHAPTERS))


def test_oldest(venv):
    version = lower_bound(Requirement(f"python{project()['requires-python']}"))
    assert version == claimed_pythons()[0], "requires-python and the classifiers disagree"
    pins = {name: lower_bound(r) for name, r in dependencies().items()}
    check(venv, version, create(venv, interpreter(version)), pins)


def test_newest(venv):
    version = claimed_pythons()[-1]
    python = create(venv, interpreter(version))
    check(venv, version, python, {name: newest(python, name) for name in dependencies()})
