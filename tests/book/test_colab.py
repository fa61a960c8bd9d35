"""The widgets in a learner's older environment: ipywidgets 7, as Colab has long shipped, and
the oldest NumPy and matplotlib that pyproject.toml allows.

The test makes a fresh virtual environment (tests/fresh_env.py), installs into it the lower
bound of each of pyproject's ranges for ipywidgets, numpy and matplotlib (exactly),
torch==2.13.0, the test tools and the seqlib package itself (not editable: as Colab's set-up
cell installs it), and checks that the installed versions are those. Then, in that
environment, it runs the widget tests (tests/diagrams/test_widgets.py) and nbval over chapter 03,
whose spectral-radius explorer is built by seqlib.diagrams.widgets.

It downloads packages from the package index and takes minutes: `make test` leaves it out,
`make test-colab` runs it.
"""

import sys

from fresh_env import create, dependencies, install, lower_bound, run_tests

OLDEST = ("numpy", "matplotlib", "ipywidgets")  # installed at their declared lower bound
TORCH = "2.13.0"
CHAPTER = "notebooks/03_backpropagation_through_time.ipynb"


def test_widgets_with_ipywidgets_7_and_the_oldest_numpy_and_matplotlib(tmp_path):
    declared = dependencies()
    pins = {name: lower_bound(declared[name]) for name in OLDEST} | {"torch": TORCH}
    venv = tmp_path / "venv"
    report = install(venv, create(venv, sys.executable), pins)
    assert report["ipywidgets"].startswith("7."), report
    run_tests(venv, ["tests/diagrams/test_widgets.py", CHAPTER])
