"""The notebooks keep the book's conventions (their outputs are checked by nbval)."""

import base64
import json
import re
from pathlib import Path

import pytest
import yaml
from markdown_it.renderer import RendererHTML
from myst_parser.config.main import MdParserConfig
from myst_parser.parsers.mdit import create_md_parser

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
MACHINERY = re.compile(r"\bprofile\(|\btrained_together\(|\bFULL\b")


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


# Prose renders as written. What Markdown passes on as an HTML tag vanishes from the page
# (a token such as <stop> outside backticks), and an inline equation broken across lines
# where a line reads as Markdown (a list item, a quote) shows as raw TeX. The book's Markdown
# (the cells, the Markdown outputs that myst-nb renders, the pages of book/) is parsed here
# as the book build parses it: MyST's parser with the extensions of _config.yml.
MYST = create_md_parser(
    MdParserConfig(enable_extensions=set(
        yaml.safe_load((ROOT / "_config.yml").read_text())["parse"]["myst_enable_extensions"])),
    RendererHTML)
BOOK_PAGES = sorted((ROOT / "book").glob("*.md"))
# Directives whose body is code or math, not Markdown (the others' bodies are Markdown: a
# solution's {dropdown}, a {note}).
CODE_DIRECTIVES = {"code", "code-block", "code-cell", "sourcecode", "math", "raw", "eval-rst"}
DIRECTIVE = re.compile(r"\{([\w:-]+)\}")
DIRECTIVE_OPTIONS = re.compile(r"\A(?:[ \t]*:[\w-]+:[^\n]*\n)*|\A---\n.*?\n---\n", re.S)
# HTML elements a page may write on purpose, as HTML. Any other tag is a token that Markdown
# swallowed: <stop>, <empty>, <end>, <w>, x^<t> outside math. (<s>, an HTML element, is left
# out on purpose: as a token it would strike through the rest of the paragraph.)
ALLOWED_HTML = {"a", "abbr", "b", "br", "code", "del", "details", "div", "em", "figcaption",
                "figure", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "small", "span",
                "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr",
                "u", "ul"}
HTML_TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9-]*)(?=[\s/>])[^>]*>")
HTML_COMMENT = re.compile(r"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|<![A-Z][^>]*>", re.S)


def markdown_texts(path):
    """(where, Markdown source) of what the book renders from `path` as Markdown."""
    if path.suffix == ".md":
        return [(path.name, path.read_text(encoding="utf8"))]
    texts = []
    for i, cell in enumerate(cells(path)):
        if cell["cell_type"] == "markdown":
            texts.append((f"{path.name}, cell {i}", source(cell)))
        for out in cell.get("outputs", []):
            if "text/markdown" in out.get("data", {}):
                texts.append((f"{path.name}, cell {i}'s output",
                              "".join(out["data"]["text/markdown"])))
    return texts


def myst_tokens(text):
    """(token, the Markdown of its block) for the inline and HTML-block tokens of `text` as
    the book's parser reads it, the bodies of directives that hold Markdown included."""
    for token in MYST.parse(text):
        if token.type in ("fence", "colon_fence"):
            name = DIRECTIVE.match(token.info.strip())
            if name and name.group(1) not in CODE_DIRECTIVES:
                yield from myst_tokens(DIRECTIVE_OPTIONS.sub("", token.content, count=1))
        elif token.type == "html_block":
            yield token, token.content
        for child in token.children or []:
            yield child, token.content


def line_with(text, part):
    """The first line of `text` that holds `part`, cut to 100 characters."""
    return next((line.strip() for line in text.splitlines() if part in line), part)[:100]


@pytest.mark.parametrize("path", NOTEBOOKS + BOOK_PAGES, ids=lambda p: p.name)
def test_literal_tokens_are_in_backticks(path):
    """A token written as <stop> outside code and math is read as an HTML tag, and the page
    shows nothing of it: write `<stop>` (in math, \\langle t \\rangle)."""
    swallowed = []
    for where, text in markdown_texts(path):
        for token, block in myst_tokens(text):
            if token.type not in ("html_inline", "html_block"):
                continue
            for tag in HTML_TAG.finditer(HTML_COMMENT.sub("", token.content)):
                found = f"{where}: {tag.group(0)} in: {line_with(block, tag.group(0))}"
                if tag.group(1).lower() not in ALLOWED_HTML and found not in swallowed:
                    swallowed.append(found)
    assert not swallowed, "tokens read as HTML tags, which the page does not show (write " \
        "them in backticks; HTML written on purpose: add its element to ALLOWED_HTML):\n" + \
        "\n".join(swallowed)


# In inline math ($...$) that goes on over more than one line, a line that Markdown reads
# as a block of its own: a list item (+, -, * then a space; 1. or 1) then a space), a quote
# (>), a heading (#), a rule or a heading's underline. The paragraph breaks there, and both
# halves of the equation show as raw TeX.
FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,}|:{3,})[ \t]*(\{[^}\n]*\})?[^\n]*\n.*?^\1\2[ \t]*$",
                   re.M | re.S)
DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)((?:[^$\\]|\\.)+?)(?<!\\)\$", re.S)
QUOTE_MARKS = re.compile(r"^(?:[ \t]{0,3}>[ \t]?)*")
BLOCK_START = re.compile(r"[ \t]*(?:[-+*](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)|#{1,6}(?:[ \t]|$)"
                         r"|=+[ \t]*$|(?:[-*_][ \t]*){3,}$)")


def blank_out(match):
    return re.sub(r"[^\n]", " ", match.group(0))


def math_lines_read_as_blocks(text):
    """The lines of inline equations in `text` that Markdown reads as a block of their own."""
    # The quote marks that open each line, counted and taken off: inside a quote, a line of
    # an equation starts with ">" as it should.
    depths, lines, written = [], [], text.split("\n")
    for line in written:
        marks = QUOTE_MARKS.match(line).group(0)
        depths.append(marks.count(">"))
        lines.append(line[len(marks):])
    text = "\n".join(lines)
    # Code blocks, displays and code spans blanked out, line breaks kept.
    text = FENCE.sub(lambda m: m.group(0) if m.group(3) and DIRECTIVE.match(m.group(3))
                     and DIRECTIVE.match(m.group(3)).group(1) not in CODE_DIRECTIVES
                     else blank_out(m), text)
    text = CODE_SPAN.sub(blank_out, DISPLAY_MATH.sub(blank_out, text))
    found = []
    for math in INLINE_MATH.finditer(text):
        first = text.count("\n", 0, math.start())
        for k, line in enumerate(math.group(1).split("\n")[1:], start=1):
            if depths[first + k] > depths[first] or BLOCK_START.match(line):
                found.append(written[first + k].strip())
    return found


@pytest.mark.parametrize("path", NOTEBOOKS + BOOK_PAGES, ids=lambda p: p.name)
def test_no_line_of_inline_math_reads_as_markdown(path):
    """No line inside $...$ starts with "+ ", "- ", "* ", "> ", "N. " (break it elsewhere)."""
    broken = [f"{where}: {line}" for where, text in markdown_texts(path)
              for line in math_lines_read_as_blocks(text)]
    assert not broken, "lines inside inline math ($...$) that Markdown reads as a list " \
        "item, a quote or a heading, breaking the equation into raw TeX (break the line " \
        "before another symbol):\n" + "\n".join(broken)


@pytest.mark.parametrize("path", NOTEBOOKS + BOOK_PAGES, ids=lambda p: p.name)
def test_every_dollar_opens_or_closes_math(path):
    """A "$" the parser leaves in the text is an equation it could not read: one broken by a
    line read as Markdown, or a display ($$) in a list item not indented under it. A dollar
    meant as one is written \\$."""
    stray = []
    for where, text in markdown_texts(path):
        for token, _block in myst_tokens(text.replace("\\$", "")):
            if token.type == "text" and "$" in token.content:
                stray.append(f"{where}: {token.content.strip()[:80]}")
    assert not stray, "text with a '$' that opens or closes no equation (the equation " \
        "shows as raw TeX):\n" + "\n".join(stray)


def swallowed_tags(text):
    return [tag.group(0) for token, _block in myst_tokens(text)
            if token.type in ("html_inline", "html_block")
            for tag in HTML_TAG.finditer(HTML_COMMENT.sub("", token.content))
            if tag.group(1).lower() not in ALLOWED_HTML]


def test_the_prose_checks_catch_what_breaks_and_only_that():
    """The three checks above, on Markdown that breaks and on Markdown that renders."""
    assert swallowed_tags("ends with <stop>, then h^<t> and </w>") == ["<stop>", "<t>", "</w>"]
    assert swallowed_tags(":::{note}\nA <pad> token\n:::\n") == ["<pad>"]
    assert swallowed_tags("```{dropdown} Solution\n:open:\nThe <end> token\n```\n") == ["<end>"]
    assert not swallowed_tags("`<stop>`, ``<empty>``, $x^{<t>}$, $$y^{<t>}$$, \\<unk>, a<br>b, "
                              "[link](</book/coverage>) <!-- a comment -->\n\n```\n<pad>\n```")
    assert math_lines_read_as_blocks("the sum $a\n+ b$ and $c\n> d$ and $e\n1. f$") == \
        ["+ b$ and $c", "> d$ and $e", "1. f$"]
    assert math_lines_read_as_blocks("- item $a\n  + b$") == ["+ b$"]
    assert math_lines_read_as_blocks("> quoted $a\n> + b$") == ["> + b$"]
    assert not math_lines_read_as_blocks(
        "> a quote $a\n> = b$ on two lines\n\nand $c\n-d$, $e + {}\nf$, `$g\n+ h$`, \\$5 and\n"
        "+ \\$6, $$k\n+ l$$")
    assert [t.content for t, _ in myst_tokens("the sum $a\n+ b$") if "$" in t.content] == \
        ["the sum $a", "b$"]


# A number with a decimal point (0.853, 95.5%) in a paragraph that speaks of the run stored
# on the page ("in the run stored here"). Not numbers the run printed: references to the
# book's parts (Exercise 15.4, Section 7.4, Fig. 7.9, (7.16)) and bounds (within 0.02, over
# 0.05, at most 0.3).
DECIMAL = re.compile(r"(?<![\w.])(?<![Ee]xercise )(?<![Ee]xercises )(?<!Section )(?<!Fig\. )"
                     r"(?<!Figs\. )(?<!\()(?<!\[)(?<!within )(?<!under )(?<!below )(?<!over )"
                     r"(?<!above )(?<!than )(?<!least )(?<!most )\d+\.\d+(?![\w.])")
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z(*])")
# A sentence about other runs than the stored one (their numbers are the evidence page's).
OTHER_RUNS = re.compile(r"\bseeds?\b|ledger|\bruns\b|earlier run|SEQLIB_|other kernels|"
                        r"full profile|published|report")


def printed(path):
    """What a page prints, its code too (where a claim's threshold is written)."""
    parts = []
    for cell in cells(path):
        if cell["cell_type"] == "code":
            parts.append(source(cell))
        for out in cell.get("outputs", []):
            parts.append("".join(out.get("text", "")))
            parts += ["".join(v) for k, v in out.get("data", {}).items() if k.startswith("text/")]
    return "\n".join(parts)


def as_printed(shown):
    """The decimal numbers in `shown`, each also rounded to fewer decimals (3.64 gives 3.64
    and 3.6): the prose may quote a printed number rounded."""
    numbers = set()
    for number in re.findall(r"(?<![\w.])\d+\.\d+", shown):
        decimals = len(number.split(".")[1])
        numbers.update(f"{float(number):.{d}f}" for d in range(1, decimals + 1))
    return numbers


def numbers_not_printed(text, shown):
    """The decimal numbers of the paragraphs of `text` about the stored run (but for their
    sentences about other runs) that `shown`, what the page prints, does not hold (as they
    are written, or rounded)."""
    numbers = as_printed(shown)
    sentences = [sentence for paragraph in re.split(r"\n\s*\n", text) if "stored" in paragraph
                 for sentence in SENTENCE_END.split(" ".join(paragraph.split()))]
    return [number for sentence in sentences if not OTHER_RUNS.search(sentence)
            for number in DECIMAL.findall(sentence) if number not in numbers]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_numbers_said_of_the_stored_run_are_those_it_printed(path):
    """The prose quotes the stored run's numbers as the outputs print them: executed again
    (on another processor, with a changed model), a page whose numbers move fails here until
    its prose is brought in line (a number worked out from printed ones is quoted as those)."""
    shown = printed(path)
    stale = [f"{where}: {', '.join(found)}" for where, text in markdown_texts(path)
             if (found := numbers_not_printed(text, shown))]
    assert not stale, "numbers said of the run stored here that the page's outputs do " \
        "not print (bring the prose in line with the outputs):\n" + "\n".join(stale)


def test_the_stored_run_check_finds_a_number_the_outputs_do_not_print():
    shown = "accuracy 0.683 and 95.5% exact\nT = 0.945\nclaim(..., 0.03 - gap)"
    text = ("In the run stored here T = 0.945 (0.95), accuracy 0.683, over 0.03 (Exercise\n"
            "15.4, Fig. 7.9, (7.16)), and 95.5% exact.\n\nIn the run stored here: 0.68, 0.684,\n"
            "95.3%. Other seeds: 1.11.\n\nAnother paragraph: 1.23.")
    assert numbers_not_printed(text, shown) == ["0.684", "95.3"]
