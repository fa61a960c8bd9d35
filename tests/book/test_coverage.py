"""The chapters keep the promise of book/coverage.yml: every equation (7.1)-(7.34) has
exactly one tagged home display, every figure 7.1-7.17 a captioned counterpart, every
stated number the code that recomputes it, and the coverage page says the same."""

import importlib
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("coverage_page", ROOT / "book" / "coverage.py")
coverage_page = importlib.util.module_from_spec(spec)
spec.loader.exec_module(coverage_page)

DATA = coverage_page.load()
NOTEBOOKS = {p.stem: json.loads(p.read_text())["cells"]
             for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
TAG = re.compile(r"\\tag\{\s*(7\.\d+)\s*\}")


def text(cell) -> str:
    return "".join(cell["source"])


def outputs(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts += out.get("text", []) if "text" in out else out.get("data", {}).get(
            "text/plain", [])
    return "".join(parts)


def markdown(home):
    return [text(c) for c in NOTEBOOKS[home] if c["cell_type"] == "markdown"]


def code(home):
    return [text(c) for c in NOTEBOOKS[home] if c["cell_type"] == "code"]


def test_the_data_file_lists_the_whole_chapter():
    assert list(DATA["equations"]) == [f"7.{k}" for k in range(1, 35)]
    assert list(DATA["figures"]) == [f"7.{k}" for k in range(1, 18)]
    ids = [item["id"] for item in DATA["numbers"]]
    assert len(ids) == len(set(ids)), "number ids must be unique"
    homes = [e["home"] for kind in ("equations", "figures") for e in DATA[kind].values()]
    homes += [item["home"] for item in DATA["numbers"]]
    assert set(homes) <= set(NOTEBOOKS), set(homes) - set(NOTEBOOKS)


def test_every_equation_has_exactly_one_tagged_home():
    places = {}
    for home, cells in NOTEBOOKS.items():
        for i, cell in enumerate(cells):
            if cell["cell_type"] == "markdown":
                for number in TAG.findall(text(cell)):
                    places.setdefault(number, []).append((home, i))
    for page in (ROOT / "book").glob("*.md"):
        for number in TAG.findall(page.read_text()):
            places.setdefault(number, []).append((page.name, None))
    assert set(places) <= set(DATA["equations"]), "tags of equations the chapter lacks"
    for number, eq in DATA["equations"].items():
        found = places.get(number, [])
        assert len(found) == 1, f"({number}) is tagged {len(found)} times: {found}"
        home, i = found[0]
        assert home == eq["home"], f"({number}) is tagged in {home}, its home is {eq['home']}"
        label = "(eq-" + number.replace(".", "-") + ")="
        cell = text(NOTEBOOKS[home][i])
        assert label in cell, f"({number}): the home display needs the target {label}"
        assert cell.index(label) < cell.index("\\tag{" + number), f"{label} must come first"


DOLLAR_DISPLAY = re.compile(r"\$\$(.*?)\$\$", re.S)


def test_tagged_displays_reach_mathjax_as_written():
    """Sphinx wraps a $$ display holding a line break (\\\\) in a split environment, where
    MathJax refuses \\tag, and numbers an unstarred equation environment with a second
    number of its own; a multi-line tagged display is an equation* environment, which is
    passed to MathJax as it stands."""
    wrapped = [(home, number) for home in NOTEBOOKS for cell in markdown(home)
               for body in DOLLAR_DISPLAY.findall(cell) if "\\\\" in body
               for number in TAG.findall(body)]
    assert not wrapped, f"tagged $$ displays with line breaks: {wrapped}"
    numbered = [home for home in NOTEBOOKS for cell in markdown(home)
                if "\\begin{equation}" in cell]
    assert not numbered, f"unstarred equation environments (write equation*): {numbered}"


@pytest.mark.parametrize("number", list(DATA["equations"]))
def test_every_equation_names_its_code_and_check(number):
    eq = DATA["equations"][number]
    assert eq["check"], f"({number}) has no check"
    assert any(eq["check"] in c for c in code(eq["home"])), \
        f"({number}): no code cell of {eq['home']} contains {eq['check']!r}"
    if eq["code"] != "notebook":
        assert eq["code"].startswith("seqlib"), eq["code"]
        assert _resolve(eq["code"]) is not None


FOLDED = {"hide-input", "hide-cell", "remove-input", "remove-cell"}
HEADING = re.compile(r"^#+ ", re.M)


def _runs_in_view(cell, name: str) -> bool:
    """A code cell in view that runs an equation: a listing of `name` whose output shows, or a
    cell of at least three code lines that neither draws nor trains (a from-scratch cell)."""
    tags = set(cell["metadata"].get("tags", []))
    if cell["cell_type"] != "code" or FOLDED & tags:
        return False
    source = text(cell)
    if "show_source(" in source:
        return name in source and not {"hide-output", "remove-output"} & tags \
            and bool(cell.get("outputs"))
    lines = [line for line in source.splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    return len(lines) >= 3 and not re.search(r"\bplt\.|\bruns\.", source)


@pytest.mark.parametrize("number", list(DATA["equations"]))
def test_every_equation_is_followed_by_the_code_that_runs_it(number):
    """Before the next equation or heading, the reader sees the code of the equation: the
    listing of its `code` (Class.method, or the function's name) or a from-scratch cell."""
    eq = DATA["equations"][number]
    cells = NOTEBOOKS[eq["home"]]
    i = next(i for i, c in enumerate(cells)
             if c["cell_type"] == "markdown" and number in TAG.findall(text(c)))
    together = set(TAG.findall(text(cells[i])))  # equations displayed in the same cell
    parts = eq["code"].split(".")
    name = ".".join(parts[-2:]) if parts[-2][:1].isupper() else parts[-1]
    for cell in cells[i + 1:]:
        if cell["cell_type"] == "markdown" and (set(TAG.findall(text(cell))) - together
                                                or HEADING.search(text(cell))):
            break
        if _runs_in_view(cell, name):
            return
    pytest.fail(f"({number}) in {eq['home']}: no code in view runs it before the next "
                f"equation or heading (a shown listing of {name}, or a from-scratch cell)")


CHECKED = [(number, eq) for number, eq in DATA["equations"].items()] + [
    (item["id"], item) for item in DATA["numbers"] if item["check"] is not None]
CODE_LIKE = re.compile(r"\bassert\b|\bclaim\(|==|allclose\(|assert_close\(|\bcheck\(|\.item\(\)|"
                       r"[(\[,\\:]$|^(for \w+(, \w+)* in |def \w+\(|print\()")


@pytest.mark.parametrize("key, entry", CHECKED, ids=[key for key, _ in CHECKED])
def test_every_check_is_named_by_what_it_asserts(key, entry):
    """The coverage page's 'checked' text is the line the check's cell prints or a label,
    a description, never a line of code."""
    cell = coverage_page.check_cell(entry["home"], entry["check"])
    said = coverage_page.described(entry)
    assert said and not CODE_LIKE.search(said), f"{key}: expected a description of the " \
        f"check, got code-like text {said!r}"
    if entry.get("label"):
        assert not any(said in c for c in code(entry["home"])), \
            f"{key}: expected a description, got a label that is code of {entry['home']}"
    else:
        printed = [line.removeprefix("checked: ") for line in outputs(cell).splitlines()
                   if line.startswith("checked: ")]
        assert printed and said == "; ".join(printed), \
            f"{key}: expected the cell's printed 'checked: ...' line, got {said!r}"


def test_the_code_guard_recognises_every_check_as_code():
    """CODE_LIKE, which the descriptions must not match, matches the code of every check
    (what the page showed before it named the checks)."""
    missed = [entry["check"] for _, entry in CHECKED if not CODE_LIKE.search(entry["check"])]
    assert not missed, f"expected every check's code to look like code, got {missed}"


def test_the_coverage_page_names_checks_not_code():
    page = (ROOT / "book" / "coverage.md").read_text()
    checks = [line.strip() for line in page.splitlines()
              if line.strip().startswith(("checked:", "checked by"))]
    assert len(checks) == len(CHECKED), f"expected {len(CHECKED)} 'checked:' lines, " \
        f"got {len(checks)}"
    code_like = [line for line in checks if "`" in line or line.startswith("checked by")
                 or CODE_LIKE.search(line.removeprefix("checked: "))]
    assert not code_like, f"expected descriptions of checks, got code: {code_like[:3]}"


def _resolve(dotted: str):
    """The object a dotted path names: a module, or an attribute path inside one."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ModuleNotFoundError:
            continue
        for attr in parts[n:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


@pytest.mark.parametrize("number", list(DATA["figures"]))
def test_every_figure_has_a_captioned_counterpart(number):
    fig = DATA["figures"][number]
    cells = NOTEBOOKS[fig["home"]]
    target = "(fig-" + number.replace(".", "-") + ")="
    captions = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                and text(c).lstrip().startswith(target)]
    assert len(captions) == 1, f"Fig. {number}: {len(captions)} cells start with {target}"
    i = captions[0]
    caption = text(cells[i]).lstrip()[len(target):].lstrip()
    assert caption.startswith(f"**Fig. {number}.**"), f"Fig. {number}: caption must start " \
        f"with **Fig. {number}.**"
    before = cells[i - 1]
    assert before["cell_type"] == "code" and any(
        "image/png" in out.get("data", {}) for out in before.get("outputs", [])), \
        f"Fig. {number}: the cell before its caption must draw it (a PNG output)"
    if fig["drawn_by"] != "notebook":
        assert _resolve(fig["drawn_by"]) is not None


@pytest.mark.parametrize("item", DATA["numbers"], ids=lambda item: item["id"])
def test_every_stated_number_is_in_its_home_and_checked(item):
    home = item["home"]
    everything = "\n".join(markdown(home) + code(home)
                           + [outputs(c) for c in NOTEBOOKS[home]])
    assert str(item["value"]) in everything, f"{item['id']}: {item['value']!r} not in {home}"
    if item["check"] is None:
        assert item.get("note"), f"{item['id']}: no check and no note saying why"
    else:
        assert any(item["check"] in c for c in code(home)), \
            f"{item['id']}: no code cell of {home} contains {item['check']!r}"


def test_the_pages_beyond_the_chapter_say_so_and_are_listed():
    homes = {e["home"] for kind in ("equations", "figures") for e in DATA[kind].values()}
    homes |= {item["home"] for item in DATA["numbers"]}
    unlisted = set(NOTEBOOKS) - homes - set(DATA["beyond"])
    assert not unlisted, f"pages that are home to nothing of the chapter: list in `beyond`: " \
        f"{sorted(unlisted)}"
    for home, page in DATA["beyond"].items():
        assert "beyond the chapter" in text(NOTEBOOKS[home][0]), \
            f"{home}: its opening cell must say that it goes beyond the chapter"
        assert page["chapter"] and page["adds"], f"{home}: say where and what"


def test_the_coverage_page_is_up_to_date():
    page = (ROOT / "book" / "coverage.md").read_text()
    assert page == coverage_page.render(DATA), "run `python book/coverage.py`"
