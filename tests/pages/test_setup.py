"""A page's set-up (seqlib.pages.setup): its thread count, and SEQLIB_THREADS, the count a
run of the ledger of claims may set instead."""

import pytest
import torch

from seqlib.pages import setup
from seqlib.pages.setup import THREADS_VARIABLE

# torch is imported before the set-up here, as in any test: its warning says so, rightly
pytestmark = pytest.mark.filterwarnings("ignore:seqlib.pages.kernels.pin.. ran after torch")


@pytest.fixture
def threads_back():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_a_page_runs_on_one_thread_unless_the_variable_says_otherwise(monkeypatch,
                                                                      threads_back):
    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    setup()
    assert torch.get_num_threads() == 1
    monkeypatch.setenv(THREADS_VARIABLE, "2")
    setup()
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("text", ["two", "0", "-1", "1.5"])
def test_a_thread_count_that_is_no_count_is_refused(monkeypatch, threads_back, text):
    monkeypatch.setenv(THREADS_VARIABLE, text)
    with pytest.raises(ValueError, match=f"{THREADS_VARIABLE}=.* is not a number of threads"):
        setup()
