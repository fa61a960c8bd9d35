"""The checker of the score-function page's coding exercise."""

import pytest
import torch

from seqlib.exercises import ExerciseError, check_additive_scores


def additive(queries, keys, W_sa, W_sb, w_s):
    return torch.tanh((queries @ W_sa.T)[:, :, None] + (keys @ W_sb.T)[:, None]) @ w_s


def test_the_checker_says_what_is_wrong():
    with pytest.raises(ExerciseError, match="without the tanh"):
        check_additive_scores(
            lambda q, k, A, B, w: ((q @ A.T)[:, :, None] + (k @ B.T)[:, None]) @ w)
    with pytest.raises(ExerciseError, match="query t and key tau are swapped"):
        check_additive_scores(lambda q, k, A, B, w: additive(q, k, A, B, w).transpose(1, 2))
    with pytest.raises(ExerciseError, match=r"has shape \(1, 1\), expected \(1, 1, 1\)"):
        check_additive_scores(lambda q, k, A, B, w: additive(q, k, A, B, w)[0])
