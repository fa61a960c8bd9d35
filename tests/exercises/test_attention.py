"""The checker of the attention chapter's coding exercise accepts the book's solution and
rejects typical mistakes with a message that names them."""

import math

import pytest
import torch

from seqlib.exercises import ExerciseError, check_additive_attention


def additive_attention(queries, keys, values, W_sa, W_sb, w_s, mask=None):
    """The book's solution."""
    a_q = (queries @ W_sa.T)[:, :, None]  # W_sa z_q: (B, T_out, 1, m~)
    a_k = (keys @ W_sb.T)[:, None]  # W_sb z_k: (B, 1, T_in, m~)
    scores = torch.tanh(a_q + a_k) @ w_s  # (B, T_out, T_in)
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
    alpha = torch.softmax(scores, dim=-1)
    return alpha @ values, alpha


def with_mistake(mistake):
    def attention(queries, keys, values, W_sa, W_sb, w_s, mask=None):
        pre = (queries @ W_sa.T)[:, :, None] + (keys @ W_sb.T)[:, None]
        scores = (pre if mistake == "no-tanh" else torch.tanh(pre)) @ w_s
        if mistake == "scaled":
            scores = scores / math.sqrt(len(w_s))
        if mask is not None and mistake == "inverted":
            scores = scores.masked_fill(mask[:, None, :], float("-inf"))
        elif mask is not None and mistake not in ("ignore-mask", "zero-after"):
            scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
        alpha = torch.softmax(scores, dim=1 if mistake == "axis" else -1)
        if mask is not None and mistake == "zero-after":
            alpha = alpha * mask[:, None, :]
        u = alpha @ values
        if mistake == "values":
            u = alpha @ values.flip(1)
        if mistake == "transposed":
            alpha = alpha.transpose(1, 2)
        return u, alpha
    return attention


@pytest.mark.parametrize("mistake, message", [
    ("no-tanh", "tanh seems missing"),
    ("scaled", "no 1/sqrt"),
    ("axis", "sum to 1 over the queries"),
    ("transposed", r"\(B, T_in, T_out\)"),
    ("ignore-mask", "padded keys get weights"),
    ("zero-after", "after the softmax"),
    ("inverted", "mask is True at the real keys"),
    ("values", "the weights are right but the outputs"),
])
def test_typical_mistakes_are_named(mistake, message):
    with pytest.raises(ExerciseError, match=message):
        check_additive_attention(with_mistake(mistake))


def test_other_failures_are_reported():
    with pytest.raises(ExerciseError, match=r"return a tuple \(u \(outputs\), alpha"):
        check_additive_attention(lambda *args, mask=None: additive_attention(*args)[0])
    with pytest.raises(ExerciseError, match="raised TypeError"):
        check_additive_attention(lambda q, k, v, W_sa, W_sb, w_s: None)  # no mask argument
