"""Print the book to one PDF file: the single-page HTML build, typeset by MathJax and printed
by headless Chromium.

    jupyter-book build . --builder singlehtml
    python book/pdf.py [--html _build/singlehtml] [--out _build/pdf/book.pdf]

(`make pdf` runs both.) The page is served from 127.0.0.1 and nothing is fetched from
outside: MathJax, its fonts and every figure come from the build. Before printing, the
script opens what the HTML hides behind a click (the exercises' solutions and hidden code
cells: paper has no buttons), waits for every figure and for MathJax to finish, and starts
each chapter on a new page. The PDF has page numbers and an outline (bookmarks) of the
chapters and their sections.

It fails, naming what is wrong, when MathJax reports an error, leaves an equation
untypeset, or a figure does not load. Chromium is `SEQLIB_CHROMIUM` if set, else `chromium`
on the PATH; Playwright drives it (the test extra installs it).
"""

import argparse
import functools
import http.server
import os
import pathlib
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
  h1, h2, h3, h4 { break-after: avoid; }
  span[id^="document-"] + section { break-before: page; }
  .toggle-hidden, .cell.tag_hide-cell .cell_input, .cell.tag_hide-input .cell_input {
    display: block !important; visibility: visible !important; height: auto !important;
  }
}
"""

# Runs in the page: opens what is hidden behind a click, loads every figure, and waits for
# MathJax and its fonts. Returns what went wrong.
PREPARE_JS = """
async () => {
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
  // A cell or output shorter than a third of a sheet is kept whole; a longer one breaks
  // across sheets rather than leave most of a sheet blank.
  const blocks = "main .cell_input, main .cell_output > div, main details, main .admonition";
  for (const block of document.querySelectorAll(blocks)) {
    if (block.getBoundingClientRect().height < 300) { block.classList.add("keep-whole"); }
  }
  return {broken, untypeset, errors, images: imgs.length, maths: maths.length};
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
                if problems:
                    raise SystemExit("the book cannot be printed:\n- " + "\n- ".join(problems))
                out.parent.mkdir(parents=True, exist_ok=True)
                page.pdf(
                    path=str(out),
                    format="A4",
                    margin={"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
                    print_background=True,
                    display_header_footer=True,
                    header_template="<span></span>",
                    footer_template=FOOTER,
                    outline=True,
                    tagged=True,
                )
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
