"""Write the exercises page, book/exercises.md, from the exercises of the chapters.

Every chapter ends with a section "## Exercises". Each exercise opens with a Markdown cell
whose first lines are a label and a heading of one form:

    (exercise-5-2)=
    ### Exercise 5.2 (coding): a peephole LSTM

(5 is the page's number, 2 the exercise's; the kind is derivation, coding or experiment).
Its solution follows, hidden until the reader opens it: a Markdown cell holding a
"{dropdown} Solution", and code cells tagged `hide-cell`, which nbval runs like every other.

Run `python book/exercises.py` (or `make execute`, which runs it) after changing an
exercise; tests/book/test_exercises.py fails while the page and the chapters disagree.
"""

import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "exercises.md"
KINDS = ("derivation", "coding", "experiment")
HEADING = re.compile(r"^\(exercise-(\d+)-(\d+)\)=\n### Exercise (\d+)\.(\d+) \((\w+)\): (.+)$",
                     re.M)


def notebooks() -> list:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def exercises(path: pathlib.Path) -> list:
    """[(label, number, kind, title)] of a chapter, in order. Raises ValueError on a heading
    whose label, number or kind is not of the form above."""
    cells = json.loads(path.read_text())["cells"]
    found = []
    for cell in cells:
        text = "".join(cell["source"])
        if cell["cell_type"] != "markdown" or "### Exercise" not in text:
            continue
        match = HEADING.search(text)
        if match is None:
            raise ValueError(f"{path.name}: an exercise heading not of the form "
                             f"'(exercise-N-K)=' then '### Exercise N.K (kind): title':\n{text}")
        page, k, page_again, k_again, kind, title = match.groups()
        if (page, k) != (page_again, k_again) or int(page) != int(path.name[:2]):
            raise ValueError(f"{path.name}: exercise label {page}-{k} and number "
                             f"{page_again}.{k_again} must both use the page's number "
                             f"{int(path.name[:2])}")
        if kind not in KINDS:
            raise ValueError(f"{path.name}: exercise {page}.{k} has kind {kind!r}, "
                             f"expected one of {KINDS}")
        found.append((f"exercise-{page}-{k}", f"{page}.{k}", kind, title.strip()))
    return found


def title(path: pathlib.Path) -> str:
    first = "".join(json.loads(path.read_text())["cells"][0]["source"])
    return first.splitlines()[0].removeprefix("# ").strip()


def render() -> str:
    """The exercises page as MyST Markdown."""
    lines = [
        "# Exercises",
        "",
        "Every chapter ends with exercises of three kinds: **derivations** (pen and paper,",
        "then a numerical check of what you derived), **coding** (write a variant of a model;",
        "a checker in `seqlib.exercises` tells you what is wrong with your attempt) and",
        "**experiments** (change one quantity, predict what happens, then measure). Each has",
        "a worked solution, hidden below the exercise until you open it, that runs and is",
        "checked whenever the book is tested, like every other cell.",
        "",
    ]
    counts = {kind: 0 for kind in KINDS}
    for path in notebooks():
        found = exercises(path)
        if not found:
            continue
        lines += [f"## {title(path)}", "", "| exercise | kind | |", "| --- | --- | --- |"]
        for label, number, kind, name in found:
            counts[kind] += 1
            lines.append(f"| {{ref}}`{number} <{label}>` | {kind} | {name} |")
        lines.append("")
    total = sum(counts.values())
    lines += [f"{total} exercises: {counts['derivation']} derivations, {counts['coding']} coding "
              f"exercises and {counts['experiment']} experiments.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    PAGE.write_text(render())
    print(f"wrote {PAGE.relative_to(ROOT)}")
