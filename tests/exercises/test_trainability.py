"""The checker of the trainability page's coding exercise."""

import pytest
import torch

from seqlib.exercises import ExerciseError, check_masked_batch_norm


def masked(x, mask, eps):
    real = x[mask]  # (N, p): the real tokens of every sentence
    mu, var = real.mean(0), real.var(0, unbiased=False)
    return torch.where(mask[..., None], (x - mu) / torch.sqrt(var + eps), 0.0)


def test_the_checker_says_what_is_wrong():
    def all_positions(x, mask, eps):  # statistics over the padding too
        flat = x.reshape(-1, x.shape[-1])
        return torch.where(mask[..., None], (x - flat.mean(0)) / (flat.var(0, unbiased=False)
                                                                  + eps).sqrt(), 0.0)

    def unbiased(x, mask, eps):
        real = x[mask]
        return torch.where(mask[..., None], (x - real.mean(0)) / (real.var(0) + eps).sqrt(), 0.0)

    def padding_kept(x, mask, eps):
        real = x[mask]
        return (x - real.mean(0)) / (real.var(0, unbiased=False) + eps).sqrt()

    def eps_ignored(x, mask, eps):
        return masked(x, mask, 1e-5)

    for attempt, message in [(all_positions, "differs from the expected"),
                             (unbiased, "differs from the expected"),
                             (padding_kept, "differs from the expected"),
                             (eps_ignored, "eps=0.5"),
                             (lambda x, mask, eps: x[mask], "has shape"),
                             (lambda x, mask, eps: 1 / 0, "raised ZeroDivisionError")]:
        with pytest.raises(ExerciseError, match=message):
            check_masked_batch_norm(attempt)
