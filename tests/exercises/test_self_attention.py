"""The checker of the self-attention chapter's coding exercise accepts the book's solution
and rejects typical mistakes with a message that names them."""

import math

import pytest
import torch

from seqlib.exercises import ExerciseError, check_multi_head_attention


def multi_head_attention(x, W_q, W_k, W_v, W_c, H, causal=False):
    """The book's solution."""
    B, T, _ = x.shape
    m, m_v = W_q.shape[0] // H, W_v.shape[0] // H
    q = (x @ W_q.T).view(B, T, H, m).transpose(1, 2)  # (B, H, T, m)
    k = (x @ W_k.T).view(B, T, H, m).transpose(1, 2)  # (B, H, T, m)
    v = (x @ W_v.T).view(B, T, H, m_v).transpose(1, 2)  # (B, H, T, m_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(m)  # (B, H, T, T)
    if causal:
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    alpha = torch.softmax(scores, dim=-1)
    u = (alpha @ v).transpose(1, 2).reshape(B, T, H * m_v)  # (B, T, H m_v)
    return u @ W_c.T, alpha


def with_mistake(mistake):
    def attention(x, W_q, W_k, W_v, W_c, H, causal=False):
        B, T, p = x.shape
        m, m_v = W_q.shape[0] // H, W_v.shape[0] // H

        def split(y, size):
            if mistake == "view":
                return y.view(B, H, T, size)
            return y.view(B, T, H, size).transpose(1, 2)

        q, k, v = split(x @ W_q.T, m), split(x @ W_k.T, m), split(x @ W_v.T, m_v)
        scale = {"sqrt-p": p, "no-scale": 1}.get(mistake, m)
        scores = q @ k.transpose(-2, -1) / math.sqrt(scale)
        if causal and mistake != "never-causal":
            past = torch.ones(T, T, dtype=torch.bool).tril(-1)
            hidden = past if mistake == "past" else torch.ones(T, T, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(hidden, float("-inf"))
        alpha = torch.softmax(scores, dim=-1)
        u = alpha @ v
        u = u.reshape(B, T, H * m_v) if mistake == "merge" else u.transpose(1, 2).reshape(
            B, T, H * m_v)
        out = u @ W_c.T
        if mistake == "mean-heads":
            out = out / H
        return out, alpha
    return attention


@pytest.mark.parametrize("mistake, message", [
    ("sqrt-p", r"divided by sqrt\(p\)"),
    ("no-scale", "not scaled"),
    ("view", "plain view"),
    ("merge", "merged with a plain reshape"),
    ("past", "hides the past"),
    ("never-causal", "the outputs are the non-causal ones"),
    ("mean-heads", "the weights are right but the outputs"),
])
def test_typical_mistakes_are_named(mistake, message):
    with pytest.raises(ExerciseError, match=message):
        check_multi_head_attention(with_mistake(mistake))


def test_other_failures_are_reported():
    with pytest.raises(ExerciseError, match=r"alpha has shape \(2, 5, 5\)"):
        check_multi_head_attention(
            lambda *args, causal=False: (multi_head_attention(*args, causal=causal)[0],
                                         multi_head_attention(*args, causal=causal)[1][:, 0]))
    with pytest.raises(ExerciseError, match="raised"):
        check_multi_head_attention(lambda x, W_q, W_k, W_v, W_c, H: x)  # no causal argument
