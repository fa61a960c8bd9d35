"""Print the book to one PDF file: the single-page HTML build, typeset by MathJax and printed
by headless Chromium.

    jupyter-book build . --builder singlehtml
    python book/pdf.py [--html _build/singlehtml] [--out _build/pdf/book.pdf]

(`make pdf` runs both.) The page is served from 127.0.0.1 and nothing is fetched from
outside: MathJax, its fonts and every figure come from the build. Before printing, the
script opens what the HTML hides behind a click (the exercises' solutions and hidden code
cells: paper has no buttons), leaves out each chapter's Colab set-up cell (it does nothing
off Colab), waits for every figure and for MathJax to finish, and starts each chapter on a
new page. Shadows are not printed: Chromium rasterises each blurred box-shadow into an
image of its own, hundreds of them.

The book is printed once whole: the print tells on which sheet each chapter's title lands
(the named destination of its heading). The contents are given those numbers, in space
kept for them, so that nothing moves, and only the contents' sheets are printed again and
put in place of the first ones, once their text is found the same but for the numbers
(else the whole book is printed again). Each sheet is numbered at its foot. The outline
(bookmarks) is then written from the headings themselves, one entry per heading with its
text once, nested as the sections are. The PDF is not tagged: for this book Chromium's
structure tree holds some 190,000 elements, written uncompressed (about 19 MB, 40% of the
file), and its own outline, read from that tree, doubles the title of a heading that falls
at a sheet's foot and glues the words of one that wraps.

It fails, naming what is wrong, when MathJax reports an error, leaves an equation
untypeset, or a figure does not load. Chromium is `SEQLIB_CHROMIUM` if set, else `chromium`
on the PATH; Playwright drives it and pypdf writes the outline (the test extra installs
both).
"""

import argparse
import functools
import http.server
import io
import logging
import os
import pathlib
import re
import shutil
import sys
import threading
import time
import urllib.parse

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOCAL_HOST = "127.0.0.1"
TIMEOUT_MS = 300_000  # one page holds the whole book: typesetting it takes a while
# Flags for a headless run on a machine without a display or network (the browser tests
# use them too).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# Paper has no buttons: what the HTML hides behind a click is printed open, code and
# outputs wrap instead of scrolling, and each page of the book starts on a new sheet.
PRINT_CSS = """
@media print {
  /* No shadows: Chromium prints each blurred box-shadow (cells, admonitions, dropdowns)
     as an image, hundreds of them. In a cascade layer, these !important rules win over the
     theme's !important ones, whatever their selectors. */
  @layer print-flat {
    *, *::before, *::after {
      box-shadow: none !important; text-shadow: none !important; filter: none !important;
      backdrop-filter: none !important;
    }
  }
  /* The Colab set-up cell (marked by PREPARE_JS) does nothing off Colab. */
  .print-omit { display: none !important; }
  /* The contents: title, dotted leader, sheet number. The number has a fixed width, so
     that filling it in after the first print moves nothing. */
  #jb-print-toc li { list-style: none; margin: 0.15em 0; break-inside: avoid; }
  #jb-print-toc a.nav-link { display: flex !important; align-items: baseline; padding: 0; }
  #jb-print-toc .toc-title { flex: 0 1 auto; }
  #jb-print-toc .toc-leader {
    flex: 1 1 1em; margin: 0 0.4em; border-bottom: 1px dotted #888; min-width: 1em;
  }
  #jb-print-toc .toc-page {
    flex: 0 0 2.5em; text-align: right; font-variant-numeric: tabular-nums;
  }
  .bd-header, .bd-header-article, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-footer,
  .bd-footer-article, .bd-footer-content, .prev-next-area, .header-article-items,
  .headerlink, .copybtn, .toggle-button, .skip-link, #pst-back-to-top { display: none !important; }
  .bd-main .bd-content .bd-article-container { max-width: 100% !important; padding: 0 !important; }
  .bd-page-width { max-width: 100% !important; }
  pre, .cell_output pre, .highlight pre {
    white-space: pre-wrap !important; overflow-wrap: anywhere; overflow: visible !important;
    font-size: 0.72em !important; break-inside: auto !important;
  }
  .keep-whole { break-inside: avoid !important; }
  /* The theme lays out a cell as a flex column, which Chromium may break above its first
     line, leaving an empty frame at the foot of a sheet. */
  .bd-content div.cell_input, details.sd-dropdown { display: block !important; }
  /* A hidden cell prints open; its "Show/Hide code cell" summary is a button. */
  div.cell > details.hide > summary { display: none !important; }
  img { max-width: 100% !important; height: auto !important; break-inside: avoid; }
  figure, .cell_output img, tr { break-inside: avoid; }
  /* Wide tables (the coverage page) fit the sheet: cells wrap, code in them too. */
  .pst-scrollable-table-container, .table-wrapper { overflow: visible !important; }
  table { max-width: 100% !important; font-size: 0.8em; }
  td code, th code, td .pre, th .pre {
    white-space: normal !important; overflow-wrap: anywhere; word-break: break-word;
  }
  mjx-container[display="true"] { overflow: visible !important; break-inside: avoid; }
  h1, h2, h3, h4, h5, h6 { break-after: avoid; break-inside: avoid; }
  span[id^="document-"] + section { break-before: page; }
  /* The references print smaller, as a book's do. */
  div.citation { font-size: 0.88em; }
  .toggle-hidden, .cell.tag_hide-cell .cell_input, .cell.tag_hide-input .cell_input {
    display: block !important; visibility: visible !important; height: auto !important;
  }
}
"""

# Runs in the page: opens what is hidden behind a click, loads every figure, and waits for
# MathJax and its fonts. Returns what went wrong.
PREPARE_JS = """
async () => {
  // The Colab set-up cell (the first code cell of each notebook) installs the package on
  // Colab only: paper leaves it out.
  let colab = 0;
  for (const cell of document.querySelectorAll("main div.cell")) {
    const input = cell.querySelector(".cell_input");
    const source = input ? input.textContent : "";
    if (source.includes('"google.colab" in sys.modules') && source.includes("pip install")) {
      cell.classList.add("print-omit");
      colab += 1;
    }
  }
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  document.querySelectorAll(".toggle-hidden").forEach((e) => e.classList.remove("toggle-hidden"));
  const imgs = Array.from(document.querySelectorAll("main img"));
  for (const img of imgs) { img.loading = "eager"; }
  await Promise.all(imgs.map((img) => img.decode().catch(() => null)));
  const broken = imgs.filter((img) => !(img.complete && img.naturalWidth > 0))
                     .map((img) => img.getAttribute("src"));
  let untypeset = [], errors = [];
  const maths = Array.from(document.querySelectorAll("main .math"));
  if (maths.length) {
    if (!window.MathJax || !window.MathJax.startup) {
      return {broken, untypeset: ["MathJax did not start"], errors, images: imgs.length, maths: 0};
    }
    await window.MathJax.startup.promise;
    untypeset = maths.filter((m) => !m.querySelector("mjx-container"))
                     .map((m) => m.textContent.slice(0, 80));
    errors = Array.from(document.querySelectorAll("main mjx-merror"))
                  .map((e) => e.getAttribute("data-mjx-error") || e.textContent);
  }
  await document.fonts.ready;
  // A line of code too long for the sheet wraps under its own indentation, four columns
  // in, not back at the margin: each line becomes a block with a hanging indent (the
  // highlighter's spans are flat, so each is cut where its text holds a line break).
  let wrapped = 0;
  for (const pre of document.querySelectorAll("main div.highlight pre")) {
    const runs = Array.from(pre.childNodes, (node) => [node.nodeType === Node.ELEMENT_NODE
      ? node.className : null, node.textContent]);
    const lines = [[]];
    for (const [cls, content] of runs) {
      content.split("\\n").forEach((part, i) => {
        if (i > 0) { lines.push([]); }
        if (part) { lines[lines.length - 1].push([cls, part]); }
      });
    }
    if (lines.length && !lines[lines.length - 1].length) { lines.pop(); }
    pre.replaceChildren(...lines.map((parts) => {
      const line = document.createElement("span");
      const indent = parts.map(([, t]) => t).join("").match(/^ */)[0].length + 4;
      line.style.cssText = `display: block; padding-left: ${indent}ch; ` +
                           `text-indent: -${indent}ch; min-height: 1lh;`;
      for (const [cls, part] of parts) {
        const span = document.createElement("span");
        if (cls !== null) { span.className = cls; }
        span.textContent = part;
        line.append(span);
      }
      return line;
    }));
    wrapped += 1;
  }
  // The blocks that end a page of the book end its last sheet: a margin below them would
  // spill onto a blank sheet of its own before the next page's forced break.
  for (const start of document.querySelectorAll('span[id^="document-"]')) {
    for (let el = start.previousElementSibling; el; el = el.lastElementChild) {
      el.style.setProperty("margin-bottom", "0", "important");
      el.style.setProperty("padding-bottom", "0", "important");
    }
  }
  // A cell or output shorter than a third of a sheet is kept whole; a longer one breaks
  // across sheets rather than leave most of a sheet blank.
  const blocks = "main .cell_input, main .cell_output > div, main details, main .admonition";
  for (const block of document.querySelectorAll(blocks)) {
    if (block.getBoundingClientRect().height < 300) { block.classList.add("keep-whole"); }
  }
  // The outline: every section's heading, with an id of its own (a singlehtml build repeats
  // section ids: every chapter has its "exercises") and a link to it, so that Chromium
  // writes a named destination where it prints. A page of the book is a section that
  // follows a "document-" anchor, or the root's first section.
  const texOf = new Map();
  for (const item of (window.MathJax && MathJax.startup && MathJax.startup.document
                      ? MathJax.startup.document.math : [])) {
    if (item.typesetRoot) { texOf.set(item.typesetRoot, item.math); }
  }
  // A heading's mathematics as a bookmark shows it: TeX read as text (sqrt{m} as √m,
  // r^{<t>} as r⟨t⟩), since an outline holds plain text only.
  const plain = (tex) => tex
    .replace(/\\\\sqrt\\{([^{}]*)\\}/g, "√$1")
    .replace(/\\\\langle\\s*/g, "⟨").replace(/\\s*\\\\rangle/g, "⟩")
    .replace(/\\^\\{(⟨[^⟩]*⟩)\\}/g, "$1")
    .replace(/\\\\[,;! ]/g, " ").replace(/[{}]/g, "")
    .replace(/ - /g, " − ").replace(/\\s+/g, " ").trim();
  const text = (node) => {
    if (node.nodeType === Node.TEXT_NODE) { return node.nodeValue; }
    if (node.nodeType !== Node.ELEMENT_NODE || node.matches(".headerlink")) { return ""; }
    if (texOf.has(node)) { return plain(texOf.get(node)); }
    return Array.from(node.childNodes, text).join("");
  };
  const pages = new Set([document.querySelector("main article.bd-article section"),
                         ...document.querySelectorAll('main span[id^="document-"] + section')]);
  // A section's heading: its first heading child (a label's anchor may come before it).
  const HEADING = ":scope > :is(h1, h2, h3, h4, h5, h6)";
  const headings = [];
  const add = (h, level, page) => {
    h.id = `pdf-heading-${headings.length}`;
    headings.push({id: h.id, level, page, title: text(h).replace(/\\s+/g, " ").trim()});
  };
  // The theme prints the book's title above the contents and hides the article's first h1
  // (sphinx-book-theme's print style): that title and the contents stand for the root
  // page's heading and its first section.
  const printTitle = document.querySelector("#jb-print-docs-body h1");
  const printContents = document.querySelector("#jb-print-toc h2");
  for (const h of document.querySelectorAll("main article :is(h1, h2, h3, h4, h5, h6)")) {
    const section = h.parentElement;
    if (section.tagName !== "SECTION" || section.querySelector(HEADING) !== h
        || h.closest(".print-omit")) { continue; }
    const level = Number(h.tagName[1]);
    if (printTitle && h.matches("article h1:first-of-type")) {
      add(printTitle, level, true);
      if (printContents) { add(printContents, level + 1, false); }
    } else {
      add(h, level, pages.has(section));
    }
  }
  const links = document.createElement("nav");
  links.style.display = "none";
  for (const h of headings) {
    const a = document.createElement("a");
    a.href = "#" + h.id;
    links.append(a);
  }
  document.body.append(links);
  // The contents: each entry links to its page's title (the "document-" anchor sits at the
  // foot of the sheet before) and gets a place for its sheet number.
  const contents = [], unresolved = [];
  for (const a of document.querySelectorAll('#jb-print-toc a[href^="#document-"]')) {
    const anchor = document.getElementById(a.getAttribute("href").slice(1));
    const section = anchor && anchor.nextElementSibling;
    const h = section && section.querySelector(HEADING);
    if (!h || !h.id.startsWith("pdf-heading-")) {
      unresolved.push(a.getAttribute("href"));
      continue;
    }
    a.setAttribute("href", "#" + h.id);
    const title = document.createElement("span");
    title.className = "toc-title";
    title.append(...a.childNodes);
    const leader = document.createElement("span");
    leader.className = "toc-leader";
    const number = document.createElement("span");
    number.className = "toc-page";
    a.append(title, leader, number);
    contents.push(h.id);
  }
  return {broken, untypeset, errors, images: imgs.length, maths: maths.length, colab,
          headings, contents, unresolved};
}
"""

# Lays the page out afresh. Printed twice from the same layout, Chromium may break a sheet
# on either side of a heading at the foot of a sheet (711 sheets, then 712); printed from a
# fresh layout each time, it breaks where it did the first time.
RELAYOUT_JS = """
() => {
  const body = document.body, display = body.style.display;
  body.style.display = "none";
  void body.offsetHeight;
  body.style.display = display;
  void body.offsetHeight;
}
"""

# Writes each contents entry's sheet number: {heading id: number}.
NUMBER_CONTENTS_JS = """
(numbers) => {
  for (const [id, number] of Object.entries(numbers)) {
    document.querySelector(`#jb-print-toc a[href="#${id}"] .toc-page`).textContent = number;
  }
}
"""

# Cross-references name the page itself (book/intro.html#label): in the PDF they must be
# links within the document.
LOCAL_LINKS_JS = """
(page) => {
  for (const a of document.querySelectorAll("a[href]")) {
    const href = a.getAttribute("href");
    if (href.startsWith(page + "#")) { a.setAttribute("href", href.slice(page.length)); }
  }
}
"""

FOOTER = """
<div style="font-size: 8px; width: 100%; text-align: center; color: #555;">
  <span class="pageNumber"></span> / <span class="totalPages"></span>
</div>
"""

# Chromium's own outline and tags are off: write_book writes the outline (see the
# docstring).
PDF_OPTIONS = {
    "format": "A4",
    "margin": {"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
    "print_background": True,
    "display_header_footer": True,
    "header_template": "<span></span>",
    "footer_template": FOOTER,
    "outline": False,
    "tagged": False,
}
# Whole prints at most: the first gives the sheet numbers, which should then hold.
MAX_PRINTS = 3


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def chromium_path() -> str | None:
    """Path of the Chromium binary: $SEQLIB_CHROMIUM, else chromium on the PATH, else None.
    The browser tests use it too. Raises ValueError when SEQLIB_CHROMIUM is not executable."""
    named = os.environ.get("SEQLIB_CHROMIUM")
    if named:
        if not os.access(named, os.X_OK):
            raise ValueError(f"SEQLIB_CHROMIUM={named!r} is not an executable file")
        return named
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def find_chromium() -> str:
    """chromium_path(), or an exit with what to do when there is none."""
    try:
        found = chromium_path()
    except ValueError as error:
        raise SystemExit(str(error)) from None
    if found is None:
        raise SystemExit("no Chromium found to print the book: install it (`apt-get install "
                         "chromium` on Debian/Ubuntu) or set SEQLIB_CHROMIUM to a Chromium "
                         "binary")
    return found


def root_page(html_dir: pathlib.Path) -> str:
    """The single page of a singlehtml build, relative to `html_dir`: the root of _toc.yml."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf8"))
    page = pathlib.PurePosixPath(toc["root"]).with_suffix(".html").as_posix()
    if not (html_dir / page).is_file():
        raise SystemExit(f"{html_dir / page} not found: build the single-page book first "
                         "(jupyter-book build . --builder singlehtml), or name its folder "
                         "with --html")
    return page


class BookHandler(http.server.SimpleHTTPRequestHandler):
    """Static file handler that serves the single page at /book.html and logs nothing.

    Sphinx writes the single page at the root document's path (book/intro.html) but with
    links relative to the build's root (_static/..., _images/...): served from the root,
    they resolve.
    """

    page = ""  # the single page, relative to the served folder

    def translate_path(self, path):
        if urllib.parse.urlsplit(path).path == "/book.html":
            path = "/" + self.page
        return super().translate_path(path)

    def log_message(self, *args):
        """Log nothing."""


def destinations(reader) -> dict[str, tuple[int, float, float]]:
    """The named destinations of a printed book: {name: (sheet index, left, top)}."""
    found = {}
    for name, dest in reader.named_destinations.items():
        left, top = (float(v) if isinstance(v, (int, float)) else None
                     for v in (dest.left, dest.top))
        found[name.removeprefix("/")] = (reader.get_destination_page_number(dest), left, top)
    return found


def contents_sheets(reader, targets: list[str]) -> range:
    """The sheets (indices) of a print that hold the contents: those with a link to a
    contents entry's heading."""
    wanted = {"/" + target for target in targets}
    sheets = [i for i, sheet in enumerate(reader.pages)
              if any(str(link.get_object().get("/Dest")) in wanted
                     for link in sheet.get("/Annots") or [])]
    if not sheets:
        raise SystemExit("no sheet of the print links to the contents' entries")
    return range(min(sheets), max(sheets) + 1)


def without_numbers(text: str) -> str:
    """A sheet's text with its numbers and spacing left out."""
    return re.sub(r"[\d\s]+", " ", text).strip()


def printed(page, what: str, **options):
    """The prepared page printed from a fresh layout (a pypdf reader); logs its time."""
    import pypdf

    start = time.perf_counter()
    page.evaluate(RELAYOUT_JS)
    reader = pypdf.PdfReader(io.BytesIO(page.pdf(**PDF_OPTIONS, **options)))
    log(f"{what}: {len(reader.pages)} sheets in {time.perf_counter() - start:.0f} s")
    return reader


def print_numbered(page, report: dict):
    """Print the prepared page, then the contents' sheets again with the sheet on which
    each chapter's title lands; return the print (a pypdf reader), the named destinations
    of its headings, and the numbered contents' sheets: {sheet index: sheet}."""
    # Chromium's trailer understates the number of objects, which pypdf reports at each
    # read; it reads the file whole all the same.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    numbers: dict[str, int] = {}
    titles = {h["id"]: h["title"] for h in report["headings"]}
    moved: list[str] = []
    for attempt in range(1, MAX_PRINTS + 1):
        reader = printed(page, f"print {attempt}")
        dests = destinations(reader)
        missing = [h["title"] for h in report["headings"] if h["id"] not in dests]
        if missing:
            raise SystemExit(f"headings without a destination in the PDF: {missing[:10]}")
        found = {id_: dests[id_][0] + 1 for id_ in report["contents"]}
        if found == numbers:  # printed whole with its numbers: nothing moved
            return reader, dests, {}
        moved = [f"{titles[i]}: {numbers[i]} -> {n}" for i, n in found.items()
                 if numbers and numbers[i] != n]
        numbers = found
        page.evaluate(NUMBER_CONTENTS_JS, {id_: str(n) for id_, n in numbers.items()})
        sheets = contents_sheets(reader, report["contents"])
        again = printed(page, "the contents again",
                        page_ranges=f"{sheets.start + 1}-{sheets.stop}")
        if len(again.pages) == len(sheets) and all(
                without_numbers(again.pages[k].extract_text())
                == without_numbers(reader.pages[i].extract_text())
                for k, i in enumerate(sheets)):
            return reader, dests, {i: again.pages[k] for k, i in enumerate(sheets)}
        log("the numbered contents moved text across a sheet: printing the book again")
    raise SystemExit(f"the contents' page numbers did not settle in {MAX_PRINTS} prints; "
                     f"the last print moved {moved[:5]}")


def write_book(reader, headings: list[dict], dests: dict, out: pathlib.Path,
               replaced: dict | None = None) -> None:
    """Write the printed book to `out`, each sheet of `replaced` ({index: sheet of another
    print}) in place of the sheet of that index (its text, figures and links; the sheet
    itself stays, so destinations on it hold), with its outline: each page of the book and,
    under it, its sections, as deep as the headings go (the contents are the first section
    of the root page)."""
    from pypdf import PdfWriter
    from pypdf.generic import Fit, NameObject

    writer = PdfWriter(clone_from=reader)
    for index, sheet in (replaced or {}).items():
        copy = sheet.clone(writer, ignore_fields=("/Parent",))
        for key in ("/Contents", "/Resources", "/Annots"):
            if key in copy:
                writer.pages[index][NameObject(key)] = copy.raw_get(key)
            elif key in writer.pages[index]:
                del writer.pages[index][NameObject(key)]
    stack: list[tuple[int, object]] = []  # (depth, outline item) of the open sections
    page_level = 1
    for heading in headings:
        if heading["page"]:
            depth, page_level = 0, heading["level"]
        else:
            depth = max(1, heading["level"] - page_level)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        sheet, left, top = dests[heading["id"]]
        item = writer.add_outline_item(title=heading["title"], page_number=sheet,
                                       parent=stack[-1][1] if stack else None,
                                       fit=Fit.xyz(left, top), is_open=False)
        stack.append((depth, item))
    writer.page_mode = "/UseOutlines"
    with open(out, "wb") as f:
        writer.write(f)


def print_pdf(html_dir: pathlib.Path, out: pathlib.Path) -> dict:
    """Print the singlehtml build in `html_dir` to `out`; return what the page held."""
    from playwright.sync_api import sync_playwright

    page_path = root_page(html_dir)
    executable = find_chromium()
    handler = functools.partial(type("Handler", (BookHandler,), {"page": page_path}),
                                directory=str(html_dir))
    httpd = http.server.ThreadingHTTPServer((LOCAL_HOST, 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    foreign, failed = [], []

    def route(route):
        if urllib.parse.urlsplit(route.request.url).hostname == LOCAL_HOST:
            route.continue_()
        else:  # the book must print offline
            foreign.append(route.request.url)
            route.abort()

    def on_response(response):
        # The single-page build has no search index, which the theme's search box asks for.
        if response.status >= 400 and not response.url.endswith("/searchindex.js"):
            failed.append(f"{response.url} (HTTP {response.status})")

    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.set_default_timeout(TIMEOUT_MS)
                page.route("**/*", route)
                page.on("response", on_response)
                url = f"http://{LOCAL_HOST}:{httpd.server_address[1]}/book.html"
                start = time.perf_counter()
                page.goto(url, wait_until="load")
                page.evaluate(LOCAL_LINKS_JS, page_path)
                page.add_style_tag(content=PRINT_CSS)
                report = page.evaluate(PREPARE_JS)
                log(f"loaded and typeset in {time.perf_counter() - start:.0f} s")
                problems = []
                if report["broken"]:
                    problems.append(f"figures that did not load: {report['broken']}")
                if report["untypeset"]:
                    problems.append(f"equations not typeset: {report['untypeset'][:10]}")
                if report["errors"]:
                    problems.append(f"MathJax errors: {report['errors'][:10]}")
                if foreign:
                    problems.append(f"requests leaving {LOCAL_HOST}: {foreign[:10]}")
                if failed:
                    problems.append(f"resources that failed to load: {failed[:10]}")
                if not report["contents"]:
                    problems.append("no contents (the theme's #jb-print-toc) to number")
                if report["unresolved"]:
                    problems.append(f"contents entries whose page has no title: "
                                    f"{report['unresolved'][:10]}")
                if problems:
                    raise SystemExit("the book cannot be printed:\n- " + "\n- ".join(problems))
                log(f"{len(report['headings'])} headings; left out {report['colab']} Colab "
                    "set-up cells")
                reader, dests, replaced = print_numbered(page, report)
                out.parent.mkdir(parents=True, exist_ok=True)
                write_book(reader, report["headings"], dests, out, replaced)
                log(f"printed in {time.perf_counter() - start:.0f} s")
            finally:
                browser.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    return report


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=pathlib.Path, default=ROOT / "_build" / "singlehtml",
                        help="folder of the singlehtml build (default: _build/singlehtml)")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "_build" / "pdf" / "book.pdf",
                        help="the PDF to write (default: _build/pdf/book.pdf)")
    args = parser.parse_args(argv)
    if not args.html.is_dir():
        raise SystemExit(f"--html {args.html}: no such folder; build the single-page book "
                         "first (jupyter-book build . --builder singlehtml)")
    report = print_pdf(args.html.resolve(), args.out)
    log(f"wrote {args.out}: {report['images']} figures, {report['maths']} equations")


if __name__ == "__main__":
    main()
