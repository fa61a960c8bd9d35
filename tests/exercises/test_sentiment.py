"""The checkers of the sentiment chapter's exercises (seqlib.exercises.sentiment) accept the
book's answers and name what is wrong with typical wrong ones."""

import pytest
import torch

from seqlib.exercises import ExerciseError, check_bidirectional_ends, check_masked_mean


def masked_mean(z, mask):
    """The book's answer."""
    m = mask.unsqueeze(-1).to(z.dtype)  # (B, T, 1)
    return (z * m).sum(1) / m.sum(1)  # (B, d)


def reverse_real(x, lengths):
    """Each row's first lengths[b] steps reversed, the padding left in place."""
    out = x.clone()
    for b, n in enumerate(lengths.tolist()):
        out[b, :n] = x[b, :n].flip(0)
    return out


def bidirectional_ends(forward_unit, reverse_unit, x, mask):
    """The book's answer."""
    lengths = mask.sum(1)
    rows = torch.arange(len(x))
    h_f = forward_unit(x)[0][rows, lengths - 1]  # (B, m~)
    h_r = reverse_unit(reverse_real(x, lengths))[0][rows, lengths - 1]  # (B, m~)
    return torch.cat([h_f, h_r], dim=-1)


@pytest.mark.parametrize("wrong, message", [
    (lambda z, mask: z.mean(1), "averaged over every position"),
    (lambda z, mask: (z * mask[..., None]).sum(1) / z.shape[1], "divided by T = 7"),
    (lambda z, mask: z.sum(1) / mask.sum(1, keepdim=True), "entered the sum"),
    (lambda z, mask: masked_mean(z, mask).unsqueeze(1),
     r"has shape \(4, 1, 3\), expected \(B, d\) = \(4, 3\)"),
    (lambda z, mask: masked_mean(z, mask).tolist(),
     "the result should be a torch.Tensor, got list"),
])
def test_wrong_means_are_named(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_masked_mean(wrong)


def test_changing_the_input_in_place_is_named():
    def in_place(z, mask):
        z[~mask] = 0
        return z.sum(1) / mask.sum(1, keepdim=True)
    with pytest.raises(ExerciseError, match="changed z or mask in place"):
        check_masked_mean(in_place)


def test_any_other_wrong_mean_is_caught_with_the_largest_difference():
    def off_by_one(z, mask):
        return (z * mask[..., None]).sum(1) / (mask.sum(1, keepdim=True) + 1)
    with pytest.raises(ExerciseError, match="differs from the expected values: largest"):
        check_masked_mean(off_by_one)


def last_column(forward_unit, reverse_unit, x, mask):
    out = bidirectional_ends(forward_unit, reverse_unit, x, mask)
    return torch.cat([forward_unit(x)[0][:, -1], out[:, out.shape[1] // 2:]], dim=-1)


def flipped(forward_unit, reverse_unit, x, mask):
    out = bidirectional_ends(forward_unit, reverse_unit, x, mask)
    return torch.cat([out[:, :out.shape[1] // 2], reverse_unit(x.flip(1))[0][:, -1]], dim=-1)


def first_reverse_step(forward_unit, reverse_unit, x, mask):
    lengths = mask.sum(1)
    out = bidirectional_ends(forward_unit, reverse_unit, x, mask)
    h_r = reverse_unit(reverse_real(x, lengths))[0][:, 0]  # h_r^<T_i>: one word read
    return torch.cat([out[:, :out.shape[1] // 2], h_r], dim=-1)


def swapped(forward_unit, reverse_unit, x, mask):
    out = bidirectional_ends(forward_unit, reverse_unit, x, mask)
    m = out.shape[1] // 2
    return torch.cat([out[:, m:], out[:, :m]], dim=-1)


@pytest.mark.parametrize("wrong, message", [
    (last_column, "read at the last column, after the padding"),
    (flipped, "read the padding before the words"),
    (first_reverse_step, "after one word"),
    (swapped, "halves are swapped"),
    (lambda f, r, x, mask: bidirectional_ends(f, r, x, mask)[:, :4],
     r"has shape \(4, 4\), expected \(B, 2 m~\) = \(4, 8\)"),
])
def test_wrong_sentence_vectors_are_named(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_bidirectional_ends(wrong)
