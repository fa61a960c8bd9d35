"""The checker of the exercise on nucleus (top-p) sampling accepts the book's solution and
explains typical wrong attempts."""

import math

import pytest
import torch

from seqlib.exercises import ExerciseError, check_top_p


def top_p_filter(logits, top_p):
    """The book's solution."""
    probabilities, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
    before = probabilities.cumsum(-1) - probabilities  # the total of the tokens ranked above
    drop = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before >= top_p)
    return logits.masked_fill(drop, -math.inf)


def test_stopping_before_the_token_that_crosses_p():
    def attempt(logits, top_p):
        probabilities, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
        drop = probabilities.cumsum(-1) > top_p  # drops the crossing token
        drop = torch.zeros_like(drop).scatter(-1, order, drop)
        return logits.masked_fill(drop, -math.inf)

    with pytest.raises(ExerciseError, match="kept fewer tokens than the nucleus"):
        check_top_p(attempt)


def test_forgetting_to_map_back_to_the_original_positions():
    def attempt(logits, top_p):
        probabilities = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True).values
        drop = probabilities.cumsum(-1) - probabilities >= top_p  # in sorted order
        return logits.masked_fill(drop, -math.inf)

    with pytest.raises(ExerciseError, match="the right number of tokens, but not the most "
                                            "probable ones"):
        check_top_p(attempt)


def test_renormalised_logits():
    with pytest.raises(ExerciseError, match="their logits changed"):
        check_top_p(lambda logits, p: torch.log_softmax(top_p_filter(logits, p), dim=-1))


def test_a_large_negative_number_instead_of_minus_infinity():
    def attempt(logits, top_p):
        filtered = top_p_filter(logits, top_p)
        return filtered.masked_fill(filtered == -math.inf, -1e9)

    with pytest.raises(ExerciseError, match="not to a large negative number"):
        check_top_p(attempt)


def test_in_place_changes_and_wrong_shapes():
    def in_place(logits, top_p):
        filtered = top_p_filter(logits, top_p)
        logits.copy_(filtered)
        return filtered

    with pytest.raises(ExerciseError, match="changed its input logits in place"):
        check_top_p(in_place)
    with pytest.raises(ExerciseError, match="the result has shape"):
        check_top_p(lambda logits, p: top_p_filter(logits, p).flatten())
    with pytest.raises(ExerciseError, match="the result should be a torch.Tensor, got list"):
        check_top_p(lambda logits, p: top_p_filter(logits, p).tolist())
