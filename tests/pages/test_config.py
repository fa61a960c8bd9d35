"""The settings of the book's experiments (seqlib.pages.config): the switch between the book and
full profiles, and the check of a run's settings."""

import pytest

from seqlib.experiments import shakespeare
from seqlib.pages.config import check_config, profile


def test_profile_reads_seqlib_full(monkeypatch):
    book, full = shakespeare.BOOK_PROFILE, shakespeare.FULL_PROFILE
    monkeypatch.delenv("SEQLIB_FULL", raising=False)
    assert profile(book, full) == book
    monkeypatch.setenv("SEQLIB_FULL", "1")
    assert profile(book, full) == full
    monkeypatch.setenv("SEQLIB_FULL", "0")
    config = profile({"nested": {"steps": 2000}}, full)
    config["nested"]["steps"] = 1  # a deep copy: the profile itself is unchanged
    assert profile({"nested": {"steps": 2000}}, full)["nested"]["steps"] == 2000
    assert shakespeare.BOOK_PROFILE["steps"] == 2000


def test_check_config_names_what_is_missing_or_misspelt():
    assert check_config({"steps": 3}, ("steps",), {"lr": 1e-3}) == {"steps": 3, "lr": 1e-3}
    with pytest.raises(ValueError, match=r"config must be a dict with the keys \('steps',\)"):
        check_config({"step": 3}, ("steps",))
    with pytest.raises(ValueError, match=r"config has the keys \['stpes'\], expected only"):
        check_config({"steps": 3, "stpes": 4}, ("steps",), strict=True)
