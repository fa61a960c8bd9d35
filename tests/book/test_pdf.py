"""The printed book: the PDF that `make pdf` writes (book/pdf.py).

- it has a sensible length: at least a sheet per page of the book (each starts a new
  sheet), at most a few dozen on average; and it weighs at most 20 MB;
- its outline (bookmarks) holds at its top level the title of every page of ``_toc.yml``
  and nothing else, in the book's order, each pointing to the sheet where that title is
  printed, with the page's sections under it; every bookmark's title is printed word for
  word on the sheet it points to (none doubled, none with two words glued into one), and
  no heading has two bookmarks;
- its contents give each page of the book with the number of the sheet where its title is
  printed;
- every figure of the book is in it, at its full resolution: the pixel sizes of the PDF's
  images are those of the notebooks' PNG outputs and of the pages' figure files; and it
  holds no other image (Chromium prints a blurred box-shadow as an image of its own);
- its equations are typeset: no raw TeX delimiters (``$$``, ``\\(``, ``\\[``, ``\\begin{``)
  in its text, and every page of the book with mathematics in its source prints MathJax's
  glyphs (the Type 3 fonts that Chromium embeds for them) on at least one of its sheets;
- no sheet is blank (nothing on it but its page number), and no chapter prints its Colab
  set-up cell.

The test reads ``_build/pdf/book.pdf`` or the file named by ``SEQLIB_PDF``; it fails when
there is none (run `make pdf` first).
"""

import base64
import collections
import functools
import itertools
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

REPO = pathlib.Path(__file__).resolve().parents[2]
PDF = pathlib.Path(os.environ.get("SEQLIB_PDF", REPO / "_build" / "pdf" / "book.pdf")).resolve()
RAW_TEX = ("$$", "\\(", "\\)", "\\[", "\\]", "\\begin{")
# Tags that remove a cell's output from the book.
REMOVED = {"remove-output", "remove-cell", "remove_output", "remove_cell"}
MAX_SHEETS_PER_PAGE = 60
MAX_MB = 20
# The page number at the foot of every sheet ("12 / 345").
FOOTER = re.compile(r"\s*\d+ / \d+\s*$")
# A sheet that draws fewer vector paths than this and no text or image is blank: the
# frame of a box that broke across sheets, not a drawing.
MIN_PATHS_OF_A_DRAWING = 20


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


def outline(top: bool = False) -> list[tuple[str, int]]:
    """(title, sheet index) of every outline entry, depth first; with `top`, of the entries
    at the outline's top level only (the pages of the book)."""
    r = reader()
    entries = []

    def walk(items, depth):
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            elif depth == 0 or not top:
                entries.append((item.title, r.get_destination_page_number(item)))

    walk(r.outline, 0)
    return entries


@functools.cache
def chapter_sheets() -> dict[pathlib.Path, range]:
    """The sheets of each page of the book, from the outline: a title's sheet up to the
    sheet before the next page's title."""
    entries = outline(top=True)
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
    entries = outline(top=True)
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
    extra = [t for t, _ in entries if squeeze(t) not in {squeeze(title(p)) for p in toc_files()}]
    assert not extra, f"the outline's top level holds more than the book's pages: {extra}"


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


def test_size_is_at_most_20_mb():
    reader()  # fails when there is no PDF
    size = PDF.stat().st_size
    assert size <= MAX_MB * 1e6, (
        f"the PDF weighs {size / 1e6:.1f} MB, more than {MAX_MB} MB: look for images that "
        "are not figures (shadows), figures printed above their resolution, a structure tree "
        "(tagged PDF)")


def spaced(text: str) -> str:
    """Text with its white space made single spaces (a line break is a space), a hyphen at
    a line's end joined to the next line, and typographic quotes made plain: a heading as
    the outline and as the sheet's text hold it."""
    text = unicodedata.normalize("NFKC", text)
    text = text.translate(str.maketrans("‘’“”", "''\"\""))
    return re.sub(r"\s+", " ", re.sub(r"-\s+", "-", text)).strip()


def printed_on(title_: str, text: str) -> bool:
    """Whether a bookmark's title is printed in a sheet's text: as it is, or, for a title
    with mathematics (TeX, which the sheet prints as MathJax's glyphs, and whose text pdfium
    may not read), word for word: each of its words of two letters or more, outside the
    TeX, is a word of the sheet. A title that glues two words or doubles itself is not."""
    title_, text = spaced(title_), spaced(text)
    if title_ in text:
        return True
    words = [w for w in title_.split() if not re.search(r"[\\^_{}=]", w)]
    letters = re.compile(r"[^\W\d_]{2,}")
    printed = set(letters.findall(text))
    return all(word in printed for w in words for word in letters.findall(w))


def test_bookmarks_are_clean():
    entries = outline()
    assert entries, "the PDF has no outline (bookmarks)"
    tex = [t for t, _ in entries if re.search(r"[\\{}]", t)]
    assert not tex, f"bookmarks that show raw TeX (a heading's mathematics): {tex}"
    doubled = [t for t, _ in entries if re.fullmatch(r"(.+)\1", squeeze(t))]
    assert not doubled, f"bookmarks whose title is written twice: {doubled}"
    twice = [(t, sheet + 1) for (t, sheet), (u, other) in itertools.pairwise(entries)
             if spaced(t) == spaced(u) and sheet == other]
    assert not twice, f"headings with two bookmarks (title, sheet): {twice}"
    unprinted = [(t, sheet + 1) for t, sheet in entries if not printed_on(t, texts()[sheet])]
    assert not unprinted, (
        f"bookmarks whose title, word for word, is not printed on the sheet they point to "
        f"(title, sheet): {unprinted}")


def test_contents_give_the_sheet_where_each_page_starts():
    sheets = chapter_sheets()
    assert sheets, "the outline does not give each page's sheets (see the outline test)"
    paths = toc_files()
    front = texts()[:sheets[paths[1]].start]  # the sheets before the first chapter
    contents = [i for i, text in enumerate(front) if re.search(r"^\s*Contents\s*$", text, re.M)]
    assert contents, "no sheet before the first chapter has the heading 'Contents'"
    listed = spaced(" ".join(FOOTER.sub("", text) for text in front[contents[0]:]))
    wrong = []
    for path in paths[1:]:  # the contents list every page but the first
        # "7.1 Sequence data and word embeddings 17 7.2 Recurrent ...": the number ends
        # where a space does.
        match = re.search(re.escape(spaced(title(path))) + r"\s*(\d+)(?=\s|$)", listed)
        number = int(match.group(1)) if match else None
        start = sheets[path].start
        if number != start + 1:
            wrong.append(f"{title(path)!r}: {number} in the contents, printed on sheet "
                         f"{start + 1}")
        else:
            assert re.search(rf"\b{number} / {len(texts())}\s*$", texts()[start]), (
                f"sheet {start + 1} does not print its number {number} at its foot")
    assert not wrong, "contents entries without the sheet where the page starts:\n" + "\n".join(
        wrong)


def sheet_drawing(index: int) -> tuple[int, int]:
    """(images, paths) that a sheet draws, inside forms too."""
    doc = pdfium.PdfDocument(str(PDF))
    try:
        page = doc[index]
        kinds = collections.Counter(obj.type for obj in page.get_objects(max_depth=8))
        return (kinds[pdfium.raw.FPDF_PAGEOBJ_IMAGE], kinds[pdfium.raw.FPDF_PAGEOBJ_PATH])
    finally:
        doc.close()


def test_no_sheet_is_blank():
    blank = []
    for index, text in enumerate(texts()):
        if FOOTER.sub("", text).strip():
            continue
        images, paths = sheet_drawing(index)
        if not images and paths < MIN_PATHS_OF_A_DRAWING:
            blank.append(index + 1)
    assert not blank, f"blank sheets (nothing but the page number): {blank}"


def colab_lines() -> list[str]:
    """The lines of the notebooks' Colab set-up cells (their first code cell) that name
    Colab or install: what the printed book must not show."""
    lines = set()
    for path in toc_files():
        if path.suffix != ".ipynb":
            continue
        cells = json.loads(path.read_text(encoding="utf8"))["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        if code and "google.colab" in code[0]:
            lines |= {line.strip() for line in code[0].splitlines()
                      if "colab" in line or "pip install" in line}
    return sorted(lines)


def test_no_colab_setup_cell_is_printed():
    lines = colab_lines()
    assert lines, "no notebook starts with a Colab set-up cell: the test would check nothing"
    printed = [(index + 1, line) for index, text in enumerate(texts())
               for line in lines if squeeze(line) in squeeze(text)]
    assert not printed, f"Colab set-up lines printed (sheet, line): {printed[:10]}"


def file_images() -> list[tuple[int, int]]:
    """(width, height) of every image of the file, wherever it is drawn from (a page, a form,
    a soft mask's group), less the soft masks that give an image its alpha channel."""
    r = reader()
    images, masks = {}, set()
    numbers = [(num, gen) for gen, objs in r.xref.items() for num in objs]
    numbers += [(num, 0) for num in r.xref_objStm]
    for num, gen in numbers:
        try:
            obj = r.get_object(pypdf.generic.IndirectObject(num, gen, r))
        except Exception:  # a free or broken entry: not an image
            continue
        if isinstance(obj, pypdf.generic.StreamObject) and obj.get("/Subtype") == "/Image":
            images[num] = (int(obj["/Width"]), int(obj["/Height"]))
            mask = obj.get("/SMask")
            if not isinstance(mask, pypdf.generic.IndirectObject):
                mask = getattr(mask, "indirect_reference", None)
            if mask is not None:
                masks.add(mask.idnum)
    return [size for num, size in images.items() if num not in masks]


def test_no_image_but_the_figures():
    expected = collections.Counter(size for path in toc_files() for size in source_figures(path))
    extra = collections.Counter(file_images()) - expected
    assert not extra, (
        f"{sum(extra.values())} images of the PDF are none of the book's figures (a "
        f"box-shadow or filter that Chromium rasterised?), by pixel size: "
        f"{extra.most_common(10)}")
