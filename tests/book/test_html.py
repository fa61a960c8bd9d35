"""Smoke test of the built HTML book in headless Chromium.

Every page of the book (the root page and each chapter of ``_toc.yml``) must:

- load with HTTP 200, and every resource it asks for must load too;
- ask for nothing outside the local server: the book works offline, with MathJax and
  every script, style sheet and font served from the build itself;
- run without JavaScript errors (uncaught exceptions or console errors), apart from the
  documented ``ALLOWED_JS_ERRORS``;
- show every figure of its content as a loaded image;
- typeset every equation: MathJax output for each math element, no MathJax error, and no
  raw TeX delimiters (``$$``, ``\\(``, ``\\[``) left in the visible text;
- render its prose as written: no TeX (``\\langle``, ``_{``, ``^{``, a stray ``$``) in the
  text the reader sees outside typeset math and code, which is what is left of an inline
  equation that Markdown broke (a line of it read as a list item), and no unknown HTML
  element in the article, which is what is left of a token such as ``<stop>`` written
  outside backticks (Markdown passes it on as a tag, and the browser shows nothing);
- fit the column at 1,400 px: no shown code block or display equation wider than its
  column, no raw text form of a widget (``VBox(children=...``), every figure stored at
  twice the pixels it is shown with (matplotlib's retina output) and not shrunk so far
  that 9-point text falls under 9 px, and the page at most 20,000 px tall;
- fit a phone's screen (390 px): the page, with what it hides open, no wider than the
  screen (inline code wraps; code blocks and wide equations scroll inside themselves), or
  the test names what pushes it wider;
- open on a click what it hides: every ``{dropdown}`` of its source (an exercise's
  solution) and every code cell tagged ``hide-cell``, ``hide-input`` or ``hide-output`` is
  on the page, hidden, and shows its content once its summary is clicked.

On the exercises page, every link leads to a page of the build and to an element of that
page, and each exercise of the chapters has its link, to its own heading.

Build the book first (``make book``); the test reads ``_build/html`` or the folder named by
``SEQLIB_HTML_DIR``. It drives a system Chromium through Playwright: ``SEQLIB_CHROMIUM``
names the binary, else ``chromium`` is looked up on the PATH. Without one the test is
skipped, except under CI (the ``CI`` environment variable set), where it fails.
"""

import functools
import http.server
import importlib.util
import json
import os
import pathlib
import re
import threading
import urllib.parse

import pytest
import yaml

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright
except ImportError:  # the test then skips, or fails under CI
    sync_playwright = None
    PlaywrightTimeout = TimeoutError

REPO = pathlib.Path(__file__).resolve().parents[2]
HTML_DIR = pathlib.Path(os.environ.get("SEQLIB_HTML_DIR", REPO / "_build" / "html")).resolve()
# The book's sources sit two levels above its HTML output (<book>/_build/html).
SOURCE_DIR = HTML_DIR.parents[1]
TOC_FILE = SOURCE_DIR / "_toc.yml"
EXERCISES_PAGE = "book/exercises.html"

# JavaScript errors tolerated on every page, as (substring of the message, why).
# Keep this empty: add an entry only for an error that does not affect the reader, and
# say why it cannot be fixed in the book's configuration.
ALLOWED_JS_ERRORS: list[tuple[str, str]] = []

# The printed book's script holds what every browser test shares: Chromium's flags for a
# headless run without a display or network, and where to find Chromium.
_spec = importlib.util.spec_from_file_location("book_pdf", REPO / "book" / "pdf.py")
book_pdf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(book_pdf)
CHROMIUM_ARGS = book_pdf.CHROMIUM_ARGS
LOCAL_HOST = "127.0.0.1"
TIMEOUT_MS = 30_000
MATHJAX_TIMEOUT_MS = 15_000
MISSING_BUILD = "<no built book>"


def toc_pages(toc_file: pathlib.Path) -> list[str]:
    """The HTML pages, relative to the output folder, of every file listed in `toc_file`."""
    toc = yaml.safe_load(toc_file.read_text(encoding="utf8"))
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))
            for part in entry.get("parts") or []:
                walk(part.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts") or []:
        walk(part.get("chapters"))
    return [str(pathlib.PurePosixPath(f).with_suffix(".html")) for f in files]


def built_pages(html_dir: pathlib.Path) -> list[str]:
    """Content pages of the build: every .html but the index redirect, search and assets."""
    if not html_dir.is_dir():
        return []
    special = {"index.html", "genindex.html", "search.html", "py-modindex.html"}
    pages = []
    for path in sorted(html_dir.rglob("*.html")):
        rel = path.relative_to(html_dir)
        if rel.parts[0].startswith("_") or rel.as_posix() in special:
            continue
        pages.append(rel.as_posix())
    return pages


PAGES = built_pages(HTML_DIR)


def require_build() -> None:
    """Fail (never pass vacuously) when there is no built book to test."""
    if not (HTML_DIR / "index.html").is_file() or not PAGES:
        pytest.fail(f"no built book in {HTML_DIR}: run `make book` first")


def find_chromium() -> str | None:
    """Path of the Chromium binary: $SEQLIB_CHROMIUM, else chromium on the PATH."""
    try:
        return book_pdf.chromium_path()
    except ValueError as error:
        pytest.fail(str(error))


def no_browser(reason: str) -> None:
    """Skip the test for lack of a browser, or fail it under CI, which must run it."""
    message = (
        f"{reason}: the HTML smoke test needs Chromium (`apt-get install chromium`, or set "
        "SEQLIB_CHROMIUM to a Chromium binary) and the playwright Python package"
    )
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set: this test must run)")
    pytest.skip(message)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Static file handler that does not log every request to stderr."""

    def log_message(self, *args):
        """Log nothing."""


@pytest.fixture(scope="module")
def server():
    """Serve the built book on 127.0.0.1 (a free port) from a background thread."""
    require_build()
    handler = functools.partial(QuietHandler, directory=str(HTML_DIR))
    httpd = http.server.ThreadingHTTPServer((LOCAL_HOST, 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://{LOCAL_HOST}:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    """A headless system Chromium driven by Playwright."""
    require_build()
    if sync_playwright is None:
        no_browser("the playwright package is not installed")
    executable = find_chromium()
    if executable is None:
        no_browser("no Chromium binary found")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def test_every_toc_file_was_built():
    """Each file of the table of contents has its page in the build."""
    require_build()
    if not TOC_FILE.is_file():
        pytest.fail(f"no _toc.yml beside the build: expected {TOC_FILE}")
    missing = [page for page in toc_pages(TOC_FILE) if not (HTML_DIR / page).is_file()]
    assert not missing, f"pages of _toc.yml missing from {HTML_DIR}: {missing}"


# JavaScript run in the page once it has loaded, and again once its hidden parts are open:
# make every figure load, and wait for the figures and the fonts the page now uses.
LOAD_IMAGES_JS = """
async () => {
  const imgs = Array.from(document.querySelectorAll("main img"));
  for (const img of imgs) { img.loading = "eager"; }
  await Promise.all(imgs.map((img) => img.decode().catch(() => null)));
  await document.fonts.ready;
  return imgs.map((img) => ({
    src: img.getAttribute("src"),
    loaded: img.complete && img.naturalWidth > 0,
  }));
}
"""

# Wait for MathJax to finish typesetting, then report on every math element.
MATH_JS = """
async () => {
  await window.MathJax.startup.promise;
  const maths = Array.from(document.querySelectorAll("main .math"));
  return {
    untypeset: maths.filter((m) => !m.querySelector("mjx-container"))
                    .map((m) => m.textContent.slice(0, 80)),
    errors: Array.from(document.querySelectorAll("main mjx-merror"))
                 .map((e) => e.getAttribute("data-mjx-error") || e.textContent),
  };
}
"""

# The section heading above an element (its first 50 characters), to say where it is.
HEADING_JS = """(e) => (e.closest("section")?.querySelector("h1, h2, h3")?.textContent
                        .replace(/#$/, "").trim().slice(0, 50) ?? "")"""

# Visible text of the content, leaving out code, scripts and typeset math: the text of each
# block (paragraph, list item, table cell, heading, caption) with the heading above it.
VISIBLE_TEXT_JS = """
() => {
  const heading = HEADING;
  const skip = "pre, code, script, style, textarea, mjx-container";
  const blockTags = "p, li, dt, dd, td, th, h1, h2, h3, h4, h5, h6, figcaption, caption, "
                    + "summary";
  const main = document.querySelector("main");
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  const blocks = new Map();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (parent.closest(skip)) { continue; }
    const block = parent.closest(blockTags) ?? parent;
    blocks.set(block, (blocks.get(block) ?? "") + node.textContent);
  }
  return Array.from(blocks, ([block, text]) => ({text, heading: heading(block)}));
}
""".replace("HEADING", HEADING_JS)

RAW_TEX = ("$$", "\\(", "\\)", "\\[", "\\]", "\\begin{")
# TeX in the visible text: a control word (\langle, \big, \times, \frac), a sub- or
# superscript group (_{, ^{) or a dollar sign: what shows of an inline equation that
# Markdown broke apart (a line of it that begins with "+ " read as a list item).
TEX_IN_TEXT = re.compile(r"\\[A-Za-z]+|[_^]\{|\$")


def tex_in_text(blocks: list[dict]) -> list[str]:
    """Where the visible text holds TeX: a few characters around the first, with the heading."""
    found = []
    for block in blocks:
        match = TEX_IN_TEXT.search(block["text"])
        if match:
            start = max(0, match.start() - 30)
            snippet = " ".join(block["text"][start:match.end() + 30].split())
            heading = block["heading"]
            found.append(f'"{snippet}" below "{heading}"')
    return found


# Elements of the article that are no HTML element: a token such as <stop> that Markdown
# passed on as a tag (custom elements, such as MathJax's mjx-container, have a hyphen in
# their name and are not HTMLUnknownElement).
UNKNOWN_ELEMENTS_JS = """
() => {
  const heading = HEADING;
  return Array.from(document.querySelectorAll("main article *"))
    .filter((e) => e instanceof HTMLUnknownElement)
    .map((e) => `<${e.localName}> before "${e.textContent.trim().slice(0, 40)}" below "`
                + `${heading(e)}"`);
}
""".replace("HEADING", HEADING_JS)

# The stored outputs of the cells, as shown.
OUTPUT_TEXT_JS = """
() => Array.from(document.querySelectorAll("main .cell_output pre"), pre => pre.textContent)
"""


# The reader's window: the layout checks below hold at this width.
VIEWPORT = {"width": 1400, "height": 900}
# A phone's screen (CSS pixels), at which no page may be wider than the screen.
PHONE = {"width": 390, "height": 844}
MAX_PAGE_HEIGHT = 20_000  # px at VIEWPORT's width: about 22 screens
# A figure is shown at its stored width over 2 (retina); shrunk further to fit the column,
# 9-point text (12.5 px at matplotlib's 100 dpi) stays at 9 px down to this scale.
MIN_FIGURE_SCALE = 9 / (9 * 100 / 72)
# The text form of an ipywidgets widget, shown where the widget itself cannot be.
WIDGET_REPR = re.compile(r"\b(?:VBox|HBox|Box|interactive)\(children=|\b\w+Slider\(value=")

# The layout as the reader sees it: what is shown (outside a closed <details>) of the code
# blocks and figures of the content, and the page's height.
LAYOUT_JS = """
() => {
  const shown = (e) => e.offsetParent !== null && !e.closest("details:not([open])");
  const blocks = Array.from(document.querySelectorAll("main pre")).filter(shown);
  const figures = Array.from(document.querySelectorAll("main .cell_output img")).filter(shown);
  const displays = Array.from(document.querySelectorAll('main mjx-container[display="true"]'))
    .filter(shown);
  const width = (e) => Math.round(e.getBoundingClientRect().width);
  const heading = (e) => (e.closest("section")?.querySelector("h1, h2, h3")?.textContent
                          .replace(/#$/, "").trim().slice(0, 50) ?? "");
  return {
    wideMath: displays.filter((m) => m.firstElementChild
                                && width(m.firstElementChild) > m.parentElement.clientWidth + 1)
                      .map((m) => `${width(m.firstElementChild)} px in `
                                  + `${m.parentElement.clientWidth} px, below "`
                                  + heading(m) + '"'),
    height: document.documentElement.scrollHeight,
    wide: blocks.filter((p) => p.scrollWidth > p.clientWidth + 1)
                .map((p) => `${p.scrollWidth} px in ${p.clientWidth} px: `
                            + p.textContent.trim().split("\\n")[0].slice(0, 60)),
    figures: figures.map((img) => ({src: img.getAttribute("src"),
                                    natural: img.naturalWidth, shown: img.clientWidth})),
  };
}
"""


def check_layout(page) -> list[str]:
    """What of the page does not fit the reader's column at VIEWPORT's width."""
    layout = page.evaluate(LAYOUT_JS)
    problems = []
    if layout["height"] > MAX_PAGE_HEIGHT:
        problems.append(f"{layout['height']} px tall at {VIEWPORT['width']} px, over "
                        f"{MAX_PAGE_HEIGHT}")
    if layout["wide"]:
        problems.append(f"code blocks wider than their column: {layout['wide']}")
    if layout["wideMath"]:
        problems.append(f"display equations wider than their column: {layout['wideMath']}")
    widgets = [out[:80] for out in page.evaluate(OUTPUT_TEXT_JS) if WIDGET_REPR.search(out)]
    if widgets:
        problems.append(f"the text form of a widget: {widgets}")
    for fig in layout["figures"]:
        if fig["src"].endswith(".svg"):
            continue
        if fig["natural"] < 2 * fig["shown"] - 2:  # the width attribute rounds
            problems.append(f"figure {fig['src']} has {fig['natural']} px shown at "
                            f"{fig['shown']} px: fewer than twice (store it as retina PNG)")
        elif fig["shown"] < MIN_FIGURE_SCALE * fig["natural"] / 2:
            problems.append(f"figure {fig['src']} is shrunk to {fig['shown']} px from "
                            f"{fig['natural'] // 2} px: its text would be under 9 px (make "
                            f"it narrower)")
    return problems


# How wide the document is against the screen and, when it is wider, what pushes it out:
# each element that sticks out past the screen's right edge while its parent does not (or
# clips), unless it lies in a box that scrolls or clips (a code block, a display equation, a
# table's container) or is fixed to the window (the theme's sidebars, off the screen).
PHONE_JS = """
() => {
  const heading = HEADING;
  const doc = document.documentElement;
  const screen = doc.clientWidth;
  if (doc.scrollWidth <= screen) { return {width: doc.scrollWidth, screen, culprits: []}; }
  const out = (e) => { const r = e.getBoundingClientRect();
                       return r.width > 0 && r.right > screen + 1; };
  const holds = (e) => { const s = getComputedStyle(e);
                         return s.overflowX !== "visible" || s.position === "fixed"; };
  const culprits = [];
  for (const e of document.body.querySelectorAll("*")) {
    if (!out(e) || getComputedStyle(e).position === "fixed") { continue; }
    const parent = e.parentElement;
    if (parent !== document.body && out(parent) && !holds(parent)) { continue; }
    let held = false;
    for (let a = parent; a && a !== document.body && !held; a = a.parentElement) {
      held = holds(a);
    }
    if (!held) {
      const right = Math.round(e.getBoundingClientRect().right);
      culprits.push(`<${e.localName}> "${e.textContent.trim().slice(0, 50)}" to ${right} px, `
                    + `below "${heading(e)}"`);
    }
  }
  return {width: doc.scrollWidth, screen, culprits};
}
""".replace("HEADING", HEADING_JS)


def check_phone(page) -> list[str]:
    """Whether the page is wider than a phone's screen, and what makes it so. It resizes the
    window to PHONE's size and leaves it so (a resize costs about a second): run it last,
    once the page's hidden parts are open, so that what they hold is measured too (opening
    a fold only adds to what is shown, so the closed page is no wider)."""
    page.set_viewport_size(PHONE)
    phone = page.evaluate(PHONE_JS)
    if phone["width"] <= phone["screen"]:
        return []
    return [f"{phone['width']} px wide at {PHONE['width']} px (its hidden parts open): wider "
            f"than the screen, it scrolls sideways; pushed out by "
            f"{phone['culprits'][:5] or 'nothing found'}"]


def allowed(message: str) -> bool:
    """Whether a JavaScript error message is on the documented allow-list."""
    return any(substring in message for substring, _why in ALLOWED_JS_ERRORS)


# Cell tags with which myst-nb hides a cell's source, output or both behind a summary.
HIDE_TAGS = {"hide-cell", "hide-input", "hide-output"}
DROPDOWN = re.compile(r"^\s*(?::{3,}|`{3,})\s*\{dropdown\}", re.M)


def source_of(page_path: str) -> pathlib.Path | None:
    """The .ipynb or .md source of a built page, None when there is none."""
    stem = SOURCE_DIR / pathlib.PurePosixPath(page_path).with_suffix("")
    for path in (stem.with_suffix(".ipynb"), stem.with_suffix(".md")):
        if path.is_file():
            return path
    return None


def hidden_in_source(path: pathlib.Path) -> tuple[int, int]:
    """(dropdowns, hidden code cells) that the page built from `path` must show on a click."""
    if path.suffix == ".md":
        return len(DROPDOWN.findall(path.read_text(encoding="utf8"))), 0
    cells = json.loads(path.read_text(encoding="utf8"))["cells"]
    dropdowns = sum(len(DROPDOWN.findall("".join(c["source"])))
                    for c in cells if c["cell_type"] == "markdown")
    hidden = sum(1 for c in cells if c["cell_type"] == "code"
                 and HIDE_TAGS & set(c.get("metadata", {}).get("tags", [])))
    return dropdowns, hidden


# What the reader can open on the page: solutions (sphinx-design dropdowns) and hidden cells.
OPENABLE = {"dropdown": "main details.sd-dropdown", "hidden cell": "main div.cell > details.hide"}

# The state of every <details> that `selector` finds: its summary's text, whether it is
# open, and its content (the first child but the summary): whether there is one, whether it
# is shown (rendered, with a box), and whether it holds text or a figure.
DETAILS_JS = """
(selector) => Array.from(document.querySelectorAll(selector), (d) => {
  const summary = d.querySelector(":scope > summary");
  const content = d.querySelector(":scope > :not(summary)");
  const box = content ? content.getBoundingClientRect() : null;
  return {
    title: summary ? summary.textContent.trim().slice(0, 60) : "",
    open: d.open,
    content: content !== null,
    shown: content !== null && content.checkVisibility() && box.width > 0 && box.height > 0,
    filled: content !== null && (content.innerText.trim() !== ""
                                 || content.querySelector("img") !== null),
  };
})
"""


def check_hidden_elements(page, page_path: str) -> list[str]:
    """Every dropdown and hidden cell of the page's source is on the page, closed, and shows
    its content once its summary is clicked (a real click, one element after another; the
    states before and after are read in one pass each)."""
    source = source_of(page_path)
    if source is None:
        return [f"no source (.ipynb or .md) for {page_path} in {SOURCE_DIR}"]
    dropdowns, hidden = hidden_in_source(source)
    want = {"dropdown": dropdowns, "hidden cell": hidden}
    problems = []
    for kind, selector in OPENABLE.items():
        before = page.evaluate(DETAILS_JS, selector)
        if len(before) != want[kind]:
            source_has = (f"{want[kind]} code cells tagged {sorted(HIDE_TAGS)}"
                          if kind == "hidden cell" else str(want[kind]))
            problems.append(f"{len(before)} {kind}s on the page, {source_has} in {source.name}")
        closed = []
        for i, state in enumerate(before):
            what = f"{kind} {i + 1}" + (f" ({state['title']!r})" if kind == "dropdown" else "")
            if not state["content"]:
                problems.append(f"{what} has nothing to show")
            elif state["open"] or state["shown"]:
                problems.append(f"{what} is open before a click")
            else:
                page.locator(selector).nth(i).locator(":scope > summary").click()
                closed.append((i, what))
        after = page.evaluate(DETAILS_JS, selector) if closed else []
        for i, what in closed:
            if not after[i]["shown"]:
                problems.append(f"{what} does not show its content when its summary is clicked")
            elif not after[i]["filled"]:
                problems.append(f"{what} shows empty content when opened")  # no text, no figure
    return problems


@pytest.mark.parametrize("page_path", PAGES or [MISSING_BUILD])
def test_page(page_path, server, browser):
    """The page loads offline, without JS errors, with its figures and typeset equations."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    foreign, failed, js_errors = [], [], []

    def route(route):
        if urllib.parse.urlsplit(route.request.url).hostname == LOCAL_HOST:
            route.continue_()
        else:  # recorded and refused: the book must not need the network
            foreign.append(route.request.url)
            route.abort()

    def on_console(message):
        if message.type == "error":
            js_errors.append(f"console: {message.text}")

    def on_request_failed(request):
        if urllib.parse.urlsplit(request.url).hostname == LOCAL_HOST:  # not one we refused
            failed.append(f"{request.url} ({request.failure})")

    def on_response(response):
        if response.status >= 400:
            failed.append(f"{response.url} (HTTP {response.status})")

    context.route("**/*", route)
    page.on("pageerror", lambda error: js_errors.append(f"uncaught: {error}"))
    page.on("console", on_console)
    page.on("requestfailed", on_request_failed)
    page.on("response", on_response)
    problems = []  # everything wrong with the page, reported together
    try:
        response = page.goto(f"{server}/{page_path}", wait_until="load")
        status = response.status if response is not None else "no response"
        assert status == 200, f"{page_path}: HTTP {status}"
        if not page.locator("main h1").count():
            problems.append("no title (h1) in the content")

        images = page.evaluate(LOAD_IMAGES_JS)
        broken = [img["src"] for img in images if not img["loaded"]]
        if broken:
            problems.append(f"figures that did not load: {broken}")

        if page.locator("main .math").count():
            try:
                page.wait_for_function(
                    "() => window.MathJax && window.MathJax.startup", timeout=MATHJAX_TIMEOUT_MS
                )
            except PlaywrightTimeout:
                problems.append("the page has equations but MathJax never started")
            else:
                math = page.evaluate(MATH_JS)
                if math["untypeset"]:
                    problems.append(f"equations not typeset: {math['untypeset']}")
                if math["errors"]:
                    problems.append(f"MathJax errors: {math['errors']}")
        blocks = page.evaluate(VISIBLE_TEXT_JS)
        text = " ".join(block["text"] for block in blocks)
        raw = [delim for delim in RAW_TEX if delim in text]
        if raw:
            problems.append(f"raw TeX {raw} left in the visible text")
        tex = tex_in_text(blocks)
        if tex:
            problems.append("TeX in the visible text, outside the typeset equations (an "
                            "inline equation that Markdown broke?): " + "; ".join(tex))
        unknown = page.evaluate(UNKNOWN_ELEMENTS_JS)
        if unknown:
            problems.append(f"unknown HTML elements in the article (a token such as <stop> "
                            f"outside backticks, read as a tag and not shown): {unknown}")
        problems += check_layout(page)

        # Last, as it changes the page: what opens on a click, and the figures it shows; then
        # the page, all open, on a phone's screen.
        problems += check_hidden_elements(page, page_path)
        opened = [img["src"] for img in page.evaluate(LOAD_IMAGES_JS)
                  if not img["loaded"] and img["src"] not in broken]
        if opened:
            problems.append(f"figures that did not load once opened: {opened}")
        problems += check_phone(page)
        if foreign:
            problems.append(f"requests leaving {LOCAL_HOST} (the book must be offline): {foreign}")
        if failed:
            problems.append(f"resources that failed to load: {failed}")
        errors = [e for e in js_errors if not allowed(e)]
        if errors:
            problems.append(f"JavaScript errors: {errors}")
        assert not problems, f"{page_path}:\n- " + "\n- ".join(problems)
    finally:
        context.close()


def chapter_exercises() -> list[tuple[str, str]]:
    """(label, number) of every exercise of the chapters, read by book/exercises.py."""
    script = SOURCE_DIR / "book" / "exercises.py"
    if not script.is_file():
        pytest.fail(f"{script} not found: it lists the chapters' exercises")
    spec = importlib.util.spec_from_file_location("exercises_page", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [(label, number) for path in module.notebooks()
            for label, number, _kind, _title in module.exercises(path)]


# Every link of the content, as the browser resolves it, with its text.
LINKS_JS = """
() => Array.from(document.querySelectorAll("main article a[href]:not(.headerlink)"),
                 (a) => ({href: a.href, text: a.textContent.trim()}))
"""

# For an id of the page: whether it exists, and the heading of the section it opens.
TARGET_JS = """
(id) => {
  const el = document.getElementById(id);
  if (!el) { return null; }
  const section = el.closest("section");
  const heading = section && section.querySelector(":scope > h1, :scope > h2, :scope > h3, "
                                                   + ":scope > h4");
  return heading ? heading.textContent : "";
}
"""


def test_exercise_links_resolve(server, browser):
    """Every link of the exercises page leads to a page of the build and an element of it;
    each exercise has its link, which opens at its own heading."""
    if not (HTML_DIR / EXERCISES_PAGE).is_file():
        pytest.fail(f"{EXERCISES_PAGE} is missing from {HTML_DIR}")
    exercises = chapter_exercises()
    context = browser.new_context()
    # Only the HTML documents: their ids are all this test reads.
    context.route("**/*", lambda route: route.continue_()
                  if route.request.resource_type == "document"
                  and urllib.parse.urlsplit(route.request.url).hostname == LOCAL_HOST
                  else route.abort())
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"{server}/{EXERCISES_PAGE}", wait_until="domcontentloaded")
        links = page.evaluate(LINKS_JS)
        problems, by_page = [], {}
        for link in links:
            url = urllib.parse.urlsplit(link["href"])
            if url.hostname != LOCAL_HOST:
                problems.append(f"link {link['text']!r} leaves the book: {link['href']}")
                continue
            by_page.setdefault(url.path, []).append((url.fragment, link["text"]))
        headings = {}  # label -> heading of the section it opens
        for path, targets in by_page.items():
            response = page.goto(f"{server}{path}", wait_until="domcontentloaded")
            if response is None or response.status != 200:
                status = response.status if response is not None else "no response"
                problems.append(f"{path}: HTTP {status}")
                continue
            for fragment, text in targets:
                if not fragment:
                    continue
                heading = page.evaluate(TARGET_JS, urllib.parse.unquote(fragment))
                if heading is None:
                    problems.append(f"link {text!r}: {path} has no element #{fragment}")
                else:
                    headings[fragment] = (text, heading)
        for label, number in exercises:
            if label not in headings:
                problems.append(f"exercise {number} (#{label}) has no working link")
                continue
            text, heading = headings[label]
            if text != number or not heading.startswith(f"Exercise {number} "):
                problems.append(f"the link to #{label} reads {text!r} and opens at "
                                f"{heading!r}, expected {number!r} and 'Exercise {number} ...'")
        assert not problems, f"{EXERCISES_PAGE}:\n- " + "\n- ".join(problems)
    finally:
        context.close()
