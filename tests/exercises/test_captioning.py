"""The captioning page's checker accepts the book's solution and says what is wrong with
typical wrong attempts."""

import pytest
import torch

from seqlib.exercises import ExerciseError, check_grid_attention


def grid_attention(grid, s_prev, W_sa, W_sb, w_s, *, flatten="rows", tanh=True,
                   softmax="all", weighted=True):
    """The book's solution, and (through the keywords) the mistakes the tests make."""
    B, h, w, d = grid.shape
    if flatten == "rows":
        v = grid.reshape(B, h * w, d)  # (B, h w, d)
    else:
        v = grid.transpose(1, 2).reshape(B, h * w, d)  # column by column
    pre = (s_prev @ W_sa.T)[:, None] + v @ W_sb.T  # (B, h w, a)
    scores = (torch.tanh(pre) if tanh else pre) @ w_s  # (B, h w)
    if softmax == "all":
        alpha = torch.softmax(scores, -1)
    else:
        alpha = torch.softmax(scores.view(B, h, w), -1).view(B, h * w)  # per grid row
    u = (alpha[..., None] * v).sum(1) if weighted else v.mean(1)  # (B, d)
    return u, alpha.view(B, h, w)


@pytest.mark.parametrize("mistake, message", [
    (dict(tanh=False), "without the tanh"),
    (dict(softmax="rows"), "each row of the grid"),
    (dict(weighted=False), "plain mean of the grid"),
    (dict(flatten="columns"), "in the wrong places"),
])
def test_typical_mistakes_are_named(mistake, message):
    with pytest.raises(ExerciseError, match=message):
        check_grid_attention(lambda *args: grid_attention(*args, **mistake))


def test_wrong_shapes_and_types_are_reported():
    def flat(*args):
        u, alpha = grid_attention(*args)
        return u, alpha.flatten(1)  # (B, h w) instead of (B, h, w)

    with pytest.raises(ExerciseError, match=r"alpha has shape \(3, 10\), expected \(B, h, w\)"):
        check_grid_attention(flat)
    with pytest.raises(ExerciseError, match="u has shape"):
        check_grid_attention(lambda *args: (grid_attention(*args)[0][:, :2],
                                            grid_attention(*args)[1]))
    with pytest.raises(ExerciseError, match=r"return a tuple \(u, alpha\), got Tensor"):
        check_grid_attention(lambda *args: grid_attention(*args)[1])
