"""Checkers for the exercises of the page on attention score functions."""

import operator

import torch

from seqlib.attention import Attention
from seqlib.exercises.toolkit import (
    close,
    expect_close,
    expect_tensor,
    name_mistake,
    passed,
    require_callable,
    run_attempt,
)

TOL = dict(atol=1e-10, rtol=1e-10)  # float64 scores: round-off only


def check_additive_scores(scores) -> None:
    """`scores(queries, keys, W_sa, W_sb, w_s)`: the additive score w_s^T tanh(W_sa z_q +
    W_sb z_k) of every query against every key, queries (B, T_out, m_q) and keys
    (B, T_in, m_k) -> (B, T_out, T_in)."""
    require_callable(scores, "scores(queries, keys, W_sa, W_sb, w_s) -> scores", name="scores")
    gen = torch.Generator().manual_seed(0)
    for B, T_out, T_in, m_q, m_k, a in [(1, 1, 1, 2, 3, 4), (2, 3, 5, 4, 6, 3),
                                         (3, 4, 2, 5, 5, 7)]:
        reference = Attention(m_q, m_k, "additive", attention_size=a).double()
        queries = torch.randn(B, T_out, m_q, generator=gen, dtype=torch.float64)
        keys = torch.randn(B, T_in, m_k, generator=gen, dtype=torch.float64)
        W_sa, W_sb, w_s = (reference.W_sa.detach(), reference.W_sb.detach(),
                           reference.w_s.detach())
        what = f"scores for B={B}, T_out={T_out}, T_in={T_in}"
        got = run_attempt(scores, queries, keys, W_sa, W_sb, w_s, what=what)
        expected = reference.scores(queries, keys).detach()
        expect_tensor(what, got)
        if T_in != T_out:  # else the shape cannot tell
            name_mistake(f"{what}: the scores have shape {tuple(got.shape)}, expected "
                         f"{(B, T_out, T_in)}", tuple(got.shape), [((B, T_in, T_out), "query t "
                         "and key tau are swapped")], same=operator.eq)
        if not close(got, expected, **TOL):
            no_tanh = ((queries @ W_sa.T)[:, :, None] + (keys @ W_sb.T)[:, None]) @ w_s
            name_mistake(what, got, [(no_tanh, "these are the scores without the tanh"),
                                     (expected.transpose(1, 2), "query t and key tau are "
                                      "swapped")], atol=1e-8, rtol=1e-5)
        expect_close(what, got, expected, **TOL)
    passed("the additive scores agree with seqlib.attention.Attention on 3 shapes")
