"""Write the coverage page, book/coverage.md, from book/coverage.yml and the lines that
the pages' check cells print ("checked: ...").

Run `python book/coverage.py` (or `make execute`, which runs it) after changing the data
file or a check cell; tests/book/test_coverage.py fails while the page and the data disagree.
"""

import json
import pathlib
import re

import yaml

BOOK = pathlib.Path(__file__).resolve().parent
DATA = BOOK / "coverage.yml"
PAGE = BOOK / "coverage.md"


def load() -> dict:
    """The data file as a dict with the keys equations, figures, numbers and beyond."""
    return yaml.safe_load(DATA.read_text())


def _cell(text) -> str:
    """Text for a table cell: one line, no bare pipes, and `<` escaped, so that the
    chapter's tokens (<stop>, <empty>, x^<1>) show as written rather than as HTML tags."""
    return str(text).replace("\n", " ").replace("|", "\\|").replace("<", "\\<")


# A TeX control word (\times, \tilde): a value that its home page writes in TeX.
TEX = re.compile(r"\\[A-Za-z]+")


def _value(text) -> str:
    """A stated value for its table cell: inline math when it is written in TeX, as its
    home page writes it (`m_v \\times p`, which the data file keeps verbatim so that the
    test finds it there), so that it is typeset rather than shown as raw TeX; else text."""
    text = " ".join(str(text).split())
    return f"${text}$" if TEX.search(text) and "$" not in text else _cell(text)


def _code(text) -> str:
    """Inline code, on one line."""
    return "`" + " ".join(str(text).splitlines()) + "`"


def _printed(cell: dict) -> list[str]:
    """The lines a code cell printed (its stdout)."""
    return "".join("".join(out.get("text", [])) for out in cell.get("outputs", [])
                   if out.get("name") == "stdout").splitlines()


def check_cell(home: str, check: str) -> dict:
    """The one code cell of the page `home` whose source contains `check`."""
    cells = [cell for cell in _notebook(home) if cell["cell_type"] == "code"
             and check in "".join(cell["source"])]
    if len(cells) != 1:
        raise ValueError(f"{home}: {len(cells)} code cells contain {check!r}, expected one")
    return cells[0]


def described(entry: dict) -> str:
    """What the check of an equation or stated number asserts: its `label` in the data
    file, else the line its check cell prints, "checked: ...", without the prefix."""
    if entry.get("label"):
        return entry["label"]
    lines = [line.removeprefix("checked: ") for line in
             _printed(check_cell(entry["home"], entry["check"]))
             if line.startswith("checked: ")]
    if not lines:
        raise ValueError(f"{entry['home']}: the cell of {entry['check']!r} prints no "
                         "'checked: ...' line; give the entry a label")
    return "; ".join(lines)


def _notebook(home: str) -> list:
    """The cells of a page."""
    return json.loads((BOOK.parent / "notebooks" / f"{home}.ipynb").read_text())["cells"]


def _title(home: str) -> str:
    """A page's title: its first line, as the sidebar shows it."""
    return "".join(_notebook(home)[0]["source"]).splitlines()[0].removeprefix("# ").strip()


def _page(home: str) -> str:
    """A link to a page under its own title."""
    return f"[{_title(home)}](../notebooks/{home}.ipynb)"


def _home(home: str) -> str:
    """A short link to a page, "page N", its title shown on hovering (a narrow column)."""
    return f'[page {int(home[:2])}](../notebooks/{home}.ipynb "{_title(home)}")'


def _table(widths: list[int], header: list[str], rows: list[list[list[str]]]) -> list[str]:
    """A MyST list-table; each cell is a list of paragraphs (lines within one are joined
    by hard line breaks). The code of a row (what implements it, what checks it) sits on
    lines of its own under the row's description, in the table's widest column, so that
    long code wraps there instead of widening the table past the book's column."""
    lines = ["```{list-table}", ":header-rows: 1", f":widths: {' '.join(map(str, widths))}",
             ""]
    for row in [[[h] for h in header], *rows]:
        for k, paragraphs in enumerate(row):
            cell = "\n\n".join(paragraphs).splitlines()
            lines.append(("* - " if k == 0 else "  - ") + cell[0])
            lines += [f"    {line}" if line else "" for line in cell[1:]]
    return lines + ["```"]


def render(data: dict) -> str:
    """The coverage page as MyST Markdown."""
    equations, figures, numbers = data["equations"], data["figures"], data["numbers"]
    lines = [
        "# Coverage of Chapter 7",
        "",
        "Every numbered equation, every figure and every number stated in Chapter 7 of the",
        "book, with the page that is its home here and the check that backs it. This page is",
        "generated from one data file, `book/coverage.yml`, and a test holds the chapters to",
        "it: each equation has exactly one tagged display, each figure its captioned",
        "counterpart, each number the code that recomputes it, except three facts about",
        "data the book does not hold, which are cited with the book's own data measured",
        "beside them. Under each description are the seqlib object that implements it and",
        "what its check asserts: the line that the check's folded cell on the home page",
        "prints, or a short description where that cell prints none. The pages that go",
        "beyond the chapter are listed at the end.",
        "",
        f"## Equations ({len(equations)})",
        "",
    ]
    rows = []
    for number, eq in equations.items():
        label = "eq-" + number.replace(".", "-")
        implemented = "computed in the notebook" if eq["code"] == "notebook" \
            else f"implemented by {_code(eq['code'])}"
        rows.append([[f"[({number})]({label})"],
                     [_cell(eq["what"]), f"{implemented}\\\nchecked: {_cell(described(eq))}"],
                     [_home(eq["home"])]])
    lines += _table([9, 79, 12], ["equation", "what it says, its code and its check", "home"],
                    rows)
    lines += ["", f"## Figures ({len(figures)})", ""]
    rows = []
    for number, fig in figures.items():
        label = "fig-" + number.replace(".", "-")
        drawn = "drawn by the notebook, from a model" if fig["drawn_by"] == "notebook" \
            else f"drawn by {_code(fig['drawn_by'])}"
        rows.append([[f"[Fig. {number}]({label})"], [_cell(fig["what"]), drawn],
                     [_home(fig["home"])]])
    lines += _table([9, 79, 12], ["figure", "what it shows, and what draws it", "home"], rows)
    lines += ["", f"## Stated numbers and worked examples ({len(numbers)})", ""]
    rows = []
    for item in numbers:
        check = f"checked: {_cell(described(item))}" if item["check"] \
            else _cell(item.get("note", ""))
        rows.append([[item["section"]], [_value(item["value"])], [_cell(item["what"]), check],
                     [_home(item["home"])]])
    lines += _table([7, 17, 64, 12], ["section", "value", "what it is, and its check", "home"],
                    rows)
    beyond = data["beyond"]
    lines += ["", f"## Beyond the chapter ({len(beyond)} pages)", "",
              "| page | where the chapter touches it | what the page adds |", "| --- | --- | --- |"]
    for home, page in beyond.items():
        lines.append(f"| {_page(home)} | {_cell(page['chapter'])} | {_cell(page['adds'])} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    PAGE.write_text(render(load()))
    print(f"wrote {PAGE.relative_to(BOOK.parent)}")
