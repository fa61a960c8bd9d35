"""Write the box at the top of every page: which part of Chapter 7 it follows (its section,
with links to the equations and figures whose home it is), what it needs and how long it
takes, from book/chapters.yml and book/coverage.yml.

The reading time counts the page before its exercises: the words of its Markdown cells at
READING_WORDS a minute and its code lines in view (not folded) at READING_LINES a minute,
rounded to five minutes.

The box is the page's second cell, a Markdown cell that opens with HEADER. Run
`python book/headers.py` (or `make execute`, which runs it) after changing either data
file; tests/book/test_headers.py fails while a page and the data disagree.
"""

import json
import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEADER = ":::{admonition} Before you start"
READING_WORDS, READING_LINES = 150, 10  # a minute: technical prose, and code read closely
FOLDED = {"hide-input", "hide-cell", "remove-input", "remove-cell"}  # tags that fold a cell


def load() -> tuple[dict, dict]:
    chapters = yaml.safe_load((ROOT / "book" / "chapters.yml").read_text())
    coverage = yaml.safe_load((ROOT / "book" / "coverage.yml").read_text())
    return chapters, coverage


def _minutes(seconds: float) -> str:
    if seconds < 60:
        return "under a minute"
    minutes = round(seconds / 30) / 2  # to the half minute
    return f"about {minutes:g} minute{'' if minutes == 1 else 's'}"


def reading_minutes(page: str) -> int:
    """Minutes to read the page before its exercises, to the nearest five (at least five)."""
    words = lines = 0
    for cell in json.loads((ROOT / "notebooks" / f"{page}.ipynb").read_text())["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            if text.startswith("## Exercises"):
                break
            if not text.startswith(HEADER):
                words += len(text.split())
        elif not FOLDED & set(cell["metadata"].get("tags", [])):
            lines += len(text.splitlines())
    return max(5, 5 * round((words / READING_WORDS + lines / READING_LINES) / 5))


def render(page: str, chapters: dict, coverage: dict) -> str:
    """The box of `page` (a notebook's stem) as MyST Markdown."""
    entry = chapters[page]
    equations = [k for k, e in coverage["equations"].items() if e["home"] == page]
    figures = [k for k, f in coverage["figures"].items() if f["home"] == page]
    if "section" in entry:
        homes = [f"[({k})](eq-{k.replace('.', '-')})" for k in equations]
        homes += [f"[Fig. {k}](fig-{k.replace('.', '-')})" for k in figures]
        chapter = f"**Chapter 7:** Section {entry['section']}"
        chapter += (f"; the home of {', '.join(homes)}." if homes else
                    "; no equation or figure of the chapter has its home here.")
    else:
        chapter = (f"**Beyond Chapter 7**, which touches the topic in "
                   f"{coverage['beyond'][page]['chapter']}.")
    needs = "; ".join(entry["needs"]) if entry["needs"] else "nothing beyond the book's package"
    seconds = entry.get("seconds")
    if seconds is None:
        raise ValueError(f"book/chapters.yml: {page} has no measured `seconds`")
    if takes_models(entry) != ("cold" in entry):
        raise ValueError(f"book/chapters.yml: {page} needs `cold` exactly when it loads "
                         f"models that other pages train")
    if "cold" in entry:
        time = (f"**Time** on a 2-core laptop CPU: {_minutes(seconds)} after the earlier "
                f"pages ({seconds:g} s, loading their models); {_minutes(entry['cold'])} "
                f"cold, with an empty model cache as on a fresh Colab runtime "
                f"({entry['cold']:g} s, training them first).")
    else:
        time = (f"**Time** on a 2-core laptop CPU: {_minutes(seconds)} ({seconds:g} s), "
                f"cold or not: it loads no model of another page.")
    reading = (f"**Reading:** about {reading_minutes(page)} minutes before the exercises, "
               f"code in view included.")
    return "\n".join([HEADER, ":class: note", "", chapter, "", f"**Needs:** {needs}.", "", time,
                      "", reading,
                      "", "Every equation, figure and number of the chapter has its home listed "
                      "on the {doc}`coverage page </book/coverage>`.", ":::"])


def takes_models(entry: dict) -> bool:
    """Whether the page loads models that other pages train (its `needs` names them)."""
    return any(" of page" in need for need in entry["needs"])


def notebooks() -> list:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def write(path: pathlib.Path, header: str) -> None:
    nb = json.loads(path.read_text())
    cell = {"cell_type": "markdown", "id": "before-you-start", "metadata": {},
            "source": header.splitlines(keepends=True)}
    second = "".join(nb["cells"][1]["source"])
    if second.startswith(HEADER):
        nb["cells"][1] = {**nb["cells"][1], "source": cell["source"]}
    else:
        nb["cells"].insert(1, cell)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    chapters, coverage = load()
    for path in notebooks():
        write(path, render(path.stem, chapters, coverage))
    print(f"wrote the box at the top of {len(notebooks())} pages")
