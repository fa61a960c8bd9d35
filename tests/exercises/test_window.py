"""The checker of the fixed-window page's coding exercise."""

import pytest
import torch

from seqlib.exercises import ExerciseError, check_window_features


def windows(x, k):
    B, T, E = x.shape
    padded = torch.cat([x.new_zeros(B, k - 1, E), x], dim=1)
    return padded.unfold(1, k, 1).transpose(2, 3).reshape(B, T, k * E)


def test_the_checker_says_what_is_wrong():
    def newest_first(x, k):
        E = x.shape[-1]
        return torch.cat(windows(x, k).split(E, dim=-1)[::-1], dim=-1)

    def no_start(x, k):
        w = windows(x, k).clone()
        w[:, :k - 1] = 1.0
        return w

    with pytest.raises(ExerciseError, match="newest first"):
        check_window_features(newest_first)
    with pytest.raises(ExerciseError, match="zero vectors"):
        check_window_features(no_start)
    with pytest.raises(ExerciseError, match=r"has shape \(1, 1, 1\), expected \(1, 1, 2\)"):
        check_window_features(lambda x, k: x[..., :1])
