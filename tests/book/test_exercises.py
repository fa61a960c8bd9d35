"""Every chapter ends with exercises whose solutions are hidden, run and checked; the
exercises page lists them all (book/exercises.py)."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("exercises_page", ROOT / "book" / "exercises.py")
exercises_page = importlib.util.module_from_spec(spec)
spec.loader.exec_module(exercises_page)
NOTEBOOKS = exercises_page.notebooks()


def test_the_exercises_page_is_up_to_date():
    page = (ROOT / "book" / "exercises.md").read_text()
    assert page == exercises_page.render(), "run `python book/exercises.py`"
    assert "file: book/exercises" in (ROOT / "_toc.yml").read_text()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_chapter_ends_with_four_to_eight_exercises_of_every_kind(path):
    found = exercises_page.exercises(path)
    assert 4 <= len(found) <= 8, f"{path.name}: {len(found)} exercises, expected 4 to 8"
    assert {kind for _, _, kind, _ in found} == set(exercises_page.KINDS), path.name
    numbers = [number for _, number, _, _ in found]
    assert numbers == [f"{int(path.name[:2])}.{k}" for k in range(1, len(found) + 1)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_exercise_has_a_hidden_solution_that_runs(path):
    cells = json.loads(path.read_text())["cells"]
    text = ["".join(c["source"]) for c in cells]
    start = next(i for i, t in enumerate(text) if t.startswith("## Exercises"))
    assert not any(t.startswith("## ") for t in text[start + 1:]), \
        f"{path.name}: the exercises must be the chapter's last section"
    heads = [i for i, t in enumerate(text) if "### Exercise" in t] + [len(cells)]
    assert heads[0] > start, f"{path.name}: an exercise before '## Exercises'"
    for head, end in zip(heads[:-1], heads[1:], strict=True):
        body = cells[head + 1:end]
        name = text[head].splitlines()[1]
        assert any(c["cell_type"] == "markdown" and "{dropdown} Solution" in "".join(c["source"])
                   for c in body), f"{path.name}, {name}: no '{{dropdown}} Solution' cell"
        code = [c for c in body if c["cell_type"] == "code"]
        assert code, f"{path.name}, {name}: the solution has no code cell that checks it"
        for c in code:
            assert "hide-cell" in c["metadata"].get("tags", []), \
                f"{path.name}, {name}: tag the solution's code cells 'hide-cell'"
            assert c["metadata"].get("jupyter", {}).get("source_hidden"), \
                f"{path.name}, {name}: collapse the solution's code in JupyterLab too"
