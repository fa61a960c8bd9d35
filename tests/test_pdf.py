"""The printed book: the PDF that `make pdf` writes (book/pdf.py).

- it has a sensible length: at least a sheet per page of the book (each starts a new
  sheet), at most a few dozen on average;
- its outline (bookmarks) holds the title of every page of ``_toc.yml``, in the book's
  order, each pointing to the sheet where that title is printed;
- every figure of the book is in it, at its full resolution: the pixel sizes of the PDF's
  images are those of the notebooks' PNG outputs and of the pages' figure files;
- its equations are typeset: no raw TeX delimiters (``$$``, ``\\(``, ``\\[``, ``\\begin{``)
  in its text, and every page of the book with mathematics in its source prints MathJax's
  glyphs (the Type 3 fonts that Chromium embeds for them) on at least one of its sheets.

The test reads ``_build/pdf/book.pdf`` or the file named by ``SEQLIB_PDF``; it fails when
there is none (run `make pdf` first).
"""

import base64
import functools
import json
import os
import pathlib
import re
import struct
import unicodedata

import pypdf
import pypdfium2 as pdfium
import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
PDF = pathlib.Path(os.environ.get("SEQLIB_PDF", REPO / "_build" / "pdf" / "book.pdf")).resolve()
RAW_TEX = ("$$", "\\(", "\\)", "\\[", "\\]", "\\begin{")
# Tags that remove a cell's output from the book.
REMOVED = {"remove-output", "remove-cell", "remove_output", "remove_cell"}
MAX_SHEETS_PER_PAGE = 60


def toc_files() -> list[pathlib.Path]:
    """The source of every page of _toc.yml, in the book's order."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text(encoding="utf8"))
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                names.append(entry["file"])
            walk(entry.get("sections"))

    walk(toc.get("chapters"))
    for part in toc.get("parts") or []:
        walk(part.get("chapters"))
    files = []
    for name in names:
        found = [p for p in (REPO / f"{name}.ipynb", REPO / f"{name}.md") if p.is_file()]
        assert found, f"_toc.yml names {name}, which has no .ipynb or .md source"
        files.append(found[0])
    return files


def markdown_cells(path: pathlib.Path) -> list[str]:
    if path.suffix == ".md":
        return [path.read_text(encoding="utf8")]
    cells = json.loads(path.read_text(encoding="utf8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def title(path: pathlib.Path) -> str:
    """The page's title: its first level-1 heading."""
    for text in markdown_cells(path):
        match = re.search(r"^# (.+)$", text, re.M)
        if match:
            return match.group(1).strip()
    raise AssertionError(f"{path.relative_to(REPO)} has no '# title'")


def squeeze(text: str) -> str:
    """Text without white space, with typographic quotes made plain: a title as the PDF
    holds it (a title that wraps loses its space in the outline) and as the source does."""
    text = unicodedata.normalize("NFKC", text)
    text = text.translate(str.maketrans("‘’“”", "''\"\""))
    return re.sub(r"\s+", "", text)


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG, read from its header."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    return struct.unpack(">II", data[16:24])


def source_figures(path: pathlib.Path) -> list[tuple[int, int]]:
    """Pixel sizes of the figures of a page: PNG outputs of a notebook's cells, figure and
    image files of a Markdown page."""
    if path.suffix == ".md":
        text = path.read_text(encoding="utf8")
        files = re.findall(r"^```\{(?:figure|image)\} (\S+\.png)", text, re.M)
        files += re.findall(r"!\[[^\]]*\]\((\S+\.png)\)", text)
        return [png_size((path.parent / f).read_bytes()) for f in files]
    sizes = []
    for cell in json.loads(path.read_text(encoding="utf8"))["cells"]:
        if cell["cell_type"] != "code" or REMOVED & set(cell["metadata"].get("tags", [])):
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {}).get("image/png")
            if data:
                sizes.append(png_size(base64.b64decode("".join(data))))
    return sizes


@functools.cache
def reader():
    if not PDF.is_file():
        pytest.fail(f"no printed book at {PDF}: run `make pdf` first")
    return pypdf.PdfReader(str(PDF))


@functools.cache
def texts() -> tuple[str, ...]:
    """The text of every sheet (pdfium: fast, and it reads MathJax's glyphs as Unicode)."""
    doc = pdfium.PdfDocument(str(PDF))
    try:
        out = []
        for index in range(len(doc)):
            page = doc[index]
            textpage = page.get_textpage()
            # pdfium marks a hyphen it could break a line at as U+FFFE
            out.append(textpage.get_text_range().replace("\ufffe", "-"))
            textpage.close()
            page.close()
        return tuple(out)
    finally:
        doc.close()


def outline() -> list[tuple[str, int]]:
    """(title, sheet index) of every outline entry, depth first."""
    r = reader()
    entries = []

    def walk(items):
        for item in items:
            if isinstance(item, list):
                walk(item)
            else:
                entries.append((item.title, r.get_destination_page_number(item)))

    walk(r.outline)
    return entries


@functools.cache
def chapter_sheets() -> dict[pathlib.Path, range]:
    """The sheets of each page of the book, from the outline: a title's sheet up to the
    sheet before the next page's title."""
    entries = outline()
    starts, position = {}, 0
    for path in toc_files():
        wanted = squeeze(title(path))
        for i in range(position, len(entries)):
            if squeeze(entries[i][0]) == wanted:
                starts[path], position = entries[i][1], i + 1
                break
        else:
            return {}
    bounds = list(starts.values()) + [len(reader().pages)]
    return {path: range(bounds[i], bounds[i + 1]) for i, path in enumerate(starts)}


def test_length_is_sensible():
    n_sheets, n_pages = len(reader().pages), len(toc_files())
    assert n_pages <= n_sheets <= MAX_SHEETS_PER_PAGE * n_pages, (
        f"{n_sheets} sheets for {n_pages} pages of the book")


def test_outline_holds_every_title_in_order_on_its_sheet():
    entries = outline()
    assert entries, "the PDF has no outline (bookmarks)"
    titles = [squeeze(t) for t, _ in entries]
    position, previous = 0, -1
    for path in toc_files():
        name = title(path)
        wanted = squeeze(name)
        assert wanted in titles[position:], (
            f"{name!r} ({path.relative_to(REPO)}) is not in the outline after the previous "
            f"page's title; the outline holds {[t for t, _ in entries]}")
        position = titles.index(wanted, position) + 1
        sheet = entries[position - 1][1]
        assert sheet > previous or (sheet == 0 and previous == -1), (
            f"{name!r} starts on sheet {sheet + 1}, not after the previous page")
        assert wanted in squeeze(texts()[sheet]), (
            f"{name!r} is not printed on sheet {sheet + 1}, where the outline points")
        previous = sheet


def pdf_images() -> list[tuple[int, int]]:
    """(width, height) of every image drawn on a sheet, forms included."""

    def images(resources):
        found = []
        xobjects = resources.get("/XObject") if resources else None
        for obj in (xobjects.get_object().values() if xobjects else []):
            obj = obj.get_object()
            if obj["/Subtype"] == "/Image":
                found.append((int(obj["/Width"]), int(obj["/Height"])))
            elif obj["/Subtype"] == "/Form":
                found += images(obj.get("/Resources"))
        return found

    return [size for page in reader().pages for size in images(page.get("/Resources"))]


def test_every_figure_is_printed_at_full_resolution():
    expected = sorted(size for path in toc_files() for size in source_figures(path))
    assert expected, "the book's sources hold no figures: the test would check nothing"
    printed = sorted(pdf_images())
    missing = list(expected)
    for size in printed:
        if size in missing:
            missing.remove(size)
    assert not missing, (
        f"{len(missing)} of the book's {len(expected)} figures are not in the PDF at their "
        f"pixel size: {missing}")


def has_math(path: pathlib.Path) -> bool:
    """Whether the page's Markdown holds mathematics ($...$, $$...$$, {math})."""
    text = "\n".join(markdown_cells(path))
    text = re.sub(r"```.*?```|`[^`\n]*`", "", text, flags=re.S)  # code is not math
    return bool(re.search(r"\$[^$\n]+\$|\{math\}", text))


def type3_sheets() -> set[int]:
    """Sheets that draw glyphs of a Type 3 font (Chromium's form of MathJax's web fonts)."""
    sheets = set()
    for index, page in enumerate(reader().pages):
        fonts = (page.get("/Resources") or {}).get("/Font")
        if fonts and any(f.get_object().get("/Subtype") == "/Type3"
                         for f in fonts.get_object().values()):
            sheets.add(index)
    return sheets


def test_equations_are_typeset():
    raw = {}
    for index, text in enumerate(texts()):
        found = [delim for delim in RAW_TEX if delim in text]
        if found:
            raw[index + 1] = found
    assert not raw, f"raw TeX left in the text of sheets {raw}"
    sheets = chapter_sheets()
    assert sheets, "the outline does not give each page's sheets (see the outline test)"
    with_glyphs = type3_sheets()
    math_pages = [path for path in sheets if has_math(path)]
    assert math_pages, "no page of the book has mathematics: the test would check nothing"
    untypeset = [str(path.relative_to(REPO)) for path in math_pages
                 if not with_glyphs & set(sheets[path])]
    assert not untypeset, f"pages whose equations print no MathJax glyph: {untypeset}"
