"""The notebooks keep the book's conventions (their outputs are checked by nbval)."""

import base64
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
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


# The two kinds of output (see the Makefile's nbval modes). Exact: what nbval compares of it
# (its text; a figure by its size line) is the same on every machine and for every
# SEQLIB_SEED: equations against loops, checks printed as thresholds, counts, shapes, data.
# Trained: anything a trained model or a seeded random draw computes. Portable mode compares
# the exact cells only; the marks were set from runs under other kernels and other seeds,
# where every cell left unmarked as exact changed.
EXACT, TRAINED = "nbval-check-output", "trained"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_output_is_marked_exact_or_trained(path):
    unmarked, both = [], []
    for i, c in enumerate(cells(path, "code")):
        tags = set(c["metadata"].get("tags", []))
        if not c.get("outputs") or UNCHECKED_TAGS & tags:
            assert not {EXACT, TRAINED} & tags, f"{path.name}: code cell {i} has no output " \
                "nbval compares, so it is neither exact nor trained"
            continue
        if {EXACT, TRAINED} <= tags:
            both.append(i)
        elif not {EXACT, TRAINED} & tags:
            unmarked.append(i)
    assert not unmarked, f"{path.name}: code cells {unmarked} (counting code cells from 0) " \
        f"have outputs but neither tag: add {EXACT!r} if no machine or seed can change " \
        f"what they print, else {TRAINED!r}"
    assert not both, f"{path.name}: code cells {both} are tagged both exact and trained"


# The fold of an exercise's solution code says what it holds (myst-nb's cell-level prompts),
# where other folds say "Show code cell source".
SOLUTION_PROMPTS = {"code_prompt_show": "Show the solution's code",
                    "code_prompt_hide": "Hide the solution's code"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_folded_solution_code_is_labelled(path):
    unlabelled, in_solution = [], False
    for i, c in enumerate(cells(path)):
        if c["cell_type"] == "markdown":
            in_solution = "{dropdown} Solution" in source(c)
        elif in_solution and {"hide-cell", "hide-input"} & set(c["metadata"].get("tags", [])):
            if c["metadata"].get("mystnb") != SOLUTION_PROMPTS:
                unlabelled.append(i)
    assert not unlabelled, f"{path.name}: cells {unlabelled} (counting all cells from 0) " \
        f"fold a solution's code without the label: set their metadata 'mystnb' to " \
        f"{SOLUTION_PROMPTS}"


# Cell tags with which Jupyter Book folds (or removes) a cell's source.
FOLDED = {"hide-input", "hide-cell", "remove-input", "remove-cell"}
MAX_LINE = 80  # characters of a visible code line: the column at 1,400 px holds them
MAX_VISIBLE_LINES = 3_000  # visible code lines across the pages: the idea, not the checks
# The last frame of a tqdm progress bar: "name: 100%|████| 600/600 [00:29<00:00, ...]".
PROGRESS_BAR = re.compile(r"^[^\n|]*\d+%\|[^|]*\| \d+/\d+ \[[^\]]*\]$")


def visible_code(path):
    """The code cells whose source a reader sees without opening a fold."""
    return [c for c in cells(path, "code")
            if not FOLDED & set(c["metadata"].get("tags", []))]


def headings(path, level):
    marks = "#" * level + " "
    return [line[len(marks):].strip() for c in cells(path, "markdown")
            for line in source(c).splitlines() if line.startswith(marks)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_title_carries_the_page_number_only(path):
    """One numbering: page 14's title is "14. ...", and nothing in it reads like 7.k."""
    title = headings(path, 1)[0]
    number = int(path.name[:2])
    assert title.startswith(f"{number}. "), f"{path.name}: title {title!r} must open with " \
        f"'{number}. '"
    assert not re.search(r"\b7\.\d", title), f"{path.name}: the chapter's section belongs in " \
        "the box under the title, not in the title"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_page_ends_with_summary_try_this_and_exercises(path):
    sections = headings(path, 2)
    ends = [s for s in sections if s in {"Summary", "Try this", "Exercises"}]
    assert ends == ["Summary", "Try this", "Exercises"], \
        f"{path.name}: sections end {ends}, not Summary, Try this, Exercises"
    assert sections[-3:] == ends, f"{path.name}: {sections[-3:]} must close the page"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_pages_refer_to_each_other_by_page_number(path):
    text = "\n".join(source(c) for c in cells(path, "markdown"))
    old = re.findall(r"\b[Nn]otebooks? \d+", text)
    assert not old, f"{path.name}: write 'page N', not {old}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_visible_code_fits_the_column(path):
    long = [line for c in visible_code(path) for line in source(c).splitlines()
            if len(line) > MAX_LINE]
    assert not long, f"{path.name}: visible code lines over {MAX_LINE} characters: {long}"


def test_the_visible_code_of_the_pages_stays_short():
    """The checks, plots and widget builders fold; what is left is the idea."""
    lines = {path.name: sum(1 for c in visible_code(path) for line in source(c).splitlines()
                            if line.strip()) for path in NOTEBOOKS}
    assert sum(lines.values()) <= MAX_VISIBLE_LINES, \
        f"{sum(lines.values())} visible code lines, over {MAX_VISIBLE_LINES}: {lines}"


# What trains the models is machinery (the page on running the book explains it): the
# profiles, the training of several runs at once and the full profile's switch stay folded.
MACHINERY = re.compile(r"\bruns\.profile\(|\btrained_together\(|\bFULL\b")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_machinery_of_training_is_folded(path):
    shown = [source(c).splitlines()[0] for c in visible_code(path)
             if MACHINERY.search(source(c))]
    assert not shown, f"{path.name}: cells in view that use the machinery: {shown}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_errors_stream_holds_only_finished_progress_bars(path):
    """The HTML book leaves the error stream out (`nb_output_stderr: remove`): it may hold
    nothing but progress bars, so that no warning is hidden."""
    for i, cell in enumerate(cells(path, "code")):
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream" and out["name"] == "stderr":
                text = "".join(out["text"]).replace("\r", "\n")
                other = [line for line in text.splitlines()
                         if line.strip() and not PROGRESS_BAR.match(line)]
                assert not other, f"{path.name}, code cell {i}: {other[:3]} on stderr"


def png_width(data: str) -> int:
    """The pixel width of a base64 PNG, from its header."""
    return int.from_bytes(base64.b64decode(data[:44])[16:20], "big")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_figures_are_stored_at_twice_their_display_width(path):
    """Retina PNGs: sharp at the column width (the `%config` line of the set-up cell)."""
    for i, cell in enumerate(cells(path, "code")):
        for out in cell.get("outputs", []):
            if "image/png" not in out.get("data", {}):
                continue
            shown = out.get("metadata", {}).get("image/png", {}).get("width")
            pixels = png_width(out["data"]["image/png"])
            assert shown is not None and pixels >= 2 * shown - 1, \
                f"{path.name}, code cell {i}: {pixels} px shown at {shown}: not retina"
