"""The notebooks keep the book's conventions (their outputs are checked by nbval)."""

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
UNCHECKED_TAGS = {"nbval-ignore-output", "nbval-skip"}


def cells(path, kind=None):
    nb = json.loads(path.read_text())
    return [c for c in nb["cells"] if kind is None or c["cell_type"] == kind]


def source(cell):
    return "".join(cell["source"])


def test_every_notebook_is_in_the_table_of_contents():
    toc = (ROOT / "_toc.yml").read_text()
    assert NOTEBOOKS, "no notebooks found"
    for path in NOTEBOOKS:
        assert f"notebooks/{path.stem}" in toc, f"{path.name} is missing from _toc.yml"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_starts_with_a_title_and_what_you_will_see(path):
    first = source(cells(path)[0])
    assert first.startswith("# "), f"{path.name} must start with a '# Title' markdown cell"
    assert re.search(r"^\s*[-*] ", first, re.M), f"{path.name}: add a 'what you will see' list"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_cell_installs_from_the_configured_repository(path):
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    setup = source(cells(path, "code")[0])
    assert 'if "google.colab" in sys.modules:' in setup, "first code cell: Colab set-up"
    assert f"git+{url}" in setup, f"{path.name} installs from elsewhere than {url}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_outputs_are_stored_and_few_cells_are_unchecked(path):
    code = cells(path, "code")
    never_run = [i for i, c in enumerate(code) if c["execution_count"] is None and source(c)]
    assert not never_run, f"{path.name}: code cells {never_run} have no stored output"
    counts = [c["execution_count"] for c in code if c["execution_count"] is not None]
    assert counts == list(range(1, len(counts) + 1)), "executed out of order: run `make execute`"
    unchecked = [c for c in code if UNCHECKED_TAGS & set(c["metadata"].get("tags", []))]
    assert len(unchecked) < 0.1 * len(code), f"{path.name}: too many cells unchecked by nbval"
    assert not any("NBVAL_" in source(c) for c in code), "use cell tags, not NBVAL comments"
