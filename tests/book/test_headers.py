"""Every page opens with the box of book/headers.py: the chapter's section with links to
the equations and figures whose home it is, what the page needs, its measured time and its
reading time."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("headers", ROOT / "book" / "headers.py")
headers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(headers)
CHAPTERS, COVERAGE = headers.load()


def test_every_page_has_an_entry_and_every_entry_a_page():
    assert sorted(CHAPTERS) == [p.stem for p in headers.notebooks()]
    for page, entry in CHAPTERS.items():
        assert "section" in entry or page in COVERAGE["beyond"], page  # where it belongs
        assert isinstance(entry.get("seconds"), (int, float)) and entry["seconds"] > 0, page


@pytest.mark.parametrize("path", headers.notebooks(), ids=lambda p: p.name)
def test_the_box_at_the_top_is_up_to_date(path):
    second = "".join(json.loads(path.read_text())["cells"][1]["source"])
    assert second == headers.render(path.stem, CHAPTERS, COVERAGE), \
        "run `python book/headers.py`"


def test_the_box_links_each_equation_and_figure_home():
    box = headers.render("05_lstm_and_gru", CHAPTERS, COVERAGE)
    assert "Section 7.3" in box and "[(7.16)](eq-7-16)" in box and "[(7.19)](eq-7-19)" in box
    assert "**Beyond Chapter 7**" in headers.render("13_time_series_lookahead", CHAPTERS,
                                                      COVERAGE)


def test_a_page_that_loads_models_of_other_pages_gives_its_cold_time_too():
    """As on a fresh Colab runtime: with an empty model cache such a page trains them first."""
    loaders = [page for page, entry in CHAPTERS.items() if headers.takes_models(entry)]
    assert "08_attention" in loaders and "01_sequence_data_and_embeddings" not in loaders
    for page, entry in CHAPTERS.items():
        assert ("cold" in entry) == (page in loaders), page
        if page in loaders:
            assert entry["cold"] > entry["seconds"], page  # it trains more
            assert "cold, with an empty model cache" in headers.render(page, CHAPTERS, COVERAGE)


def test_the_box_gives_the_reading_time_of_the_page_before_its_exercises():
    """Words at READING_WORDS and code lines in view at READING_LINES a minute, to five."""
    for page in CHAPTERS:
        minutes = headers.reading_minutes(page)
        assert minutes % 5 == 0 and 5 <= minutes <= 60, (page, minutes)
        assert f"**Reading:** about {minutes} minutes" in headers.render(page, CHAPTERS,
                                                                          COVERAGE)
