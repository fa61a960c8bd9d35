"""The shared argument checks of seqlib.checks: an integer argument is an int (never a bool)
in its range, and the error names the argument, what was expected and what was given."""

import pytest

from seqlib.checks import check_int, check_warmup, int_in_range, positive_int


def test_an_int_in_range_is_returned():
    assert int_in_range("k", 3, 1, 3) == 3 and int_in_range("k", 0, 0) == 0
    assert positive_int("n", 1) == 1 and check_warmup(0, 1) == 0 and check_int("i", -2) == -2


@pytest.mark.parametrize(("call", "message"), [
    (lambda: int_in_range("k", 4, 1, 3), "k must be an int from 1 to 3, got 4"),
    (lambda: int_in_range("k", -1, 0), "k must be an int >= 0, got -1"),
    (lambda: int_in_range("k", True, 0), "k must be an int >= 0, got True"),
    (lambda: int_in_range("k", 2.0, 0), "k must be an int >= 0, got 2.0"),
    (lambda: int_in_range("h", 0, 1, 2, expected="an int from 1 to H=2"),
     "h must be an int from 1 to H=2, got 0"),
    (lambda: positive_int("n", 0), "n must be a positive int, got 0"),
    (lambda: positive_int("n", "3"), "n must be a positive int, got '3'"),
    (lambda: check_warmup(5, 5), r"warmup must be an int in \[0, steps=5\), got 5"),
    (lambda: check_int("window", 0, 1), "window must be >= 1, got 0"),
])
def test_a_bad_value_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_non_int_is_a_type_error_for_check_int():
    for value in (1.5, False, None):
        with pytest.raises(TypeError, match=f"i must be an int, got {type(value).__name__}"):
            check_int("i", value)
