"""The checker of the pretraining page's coding exercise."""

import pytest
import torch

from seqlib.exercises import ExerciseError, check_lm_targets
from seqlib.experiments.pretraining import lm_targets


def test_the_checker_says_what_is_wrong():
    def padding_kept(ids, mask, output_size):
        target = torch.where(ids < output_size, ids, torch.ones_like(ids))
        none = torch.full_like(target[:, :1], -100)
        return torch.cat([target[:, 1:], none], 1), torch.cat([none, target[:, :-1]], 1)

    def no_unk(ids, mask, output_size):
        return lm_targets(ids, mask, 10**6)

    def swapped(ids, mask, output_size):
        return lm_targets(ids, mask, output_size)[::-1]

    with pytest.raises(ExerciseError, match="no word there"):
        check_lm_targets(padding_kept)
    with pytest.raises(ExerciseError, match="a rare word"):
        check_lm_targets(no_unk)
    with pytest.raises(ExerciseError, match="forward target"):
        check_lm_targets(swapped)
    with pytest.raises(ExerciseError, match=r"return a tuple \(forward targets, backward"):
        check_lm_targets(lambda ids, mask, output_size: ids)
    with pytest.raises(ExerciseError, match="raised ValueError"):
        check_lm_targets(lambda ids, mask, output_size: int("x"))
