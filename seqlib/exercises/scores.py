"""Checkers for the exercises of the page on attention score functions."""

import torch

from seqlib.attention import Attention
from seqlib.exercises import ExerciseError, expect_close, passed


def check_additive_scores(scores) -> None:
    """`scores(queries, keys, W_sa, W_sb, w_s)`: the additive score w_s^T tanh(W_sa z_q +
    W_sb z_k) of every query against every key, queries (B, T_out, m_q) and keys
    (B, T_in, m_k) -> (B, T_out, T_in)."""
    if not callable(scores):
        raise TypeError(f"scores must be a function, got {type(scores).__name__}")
    gen = torch.Generator().manual_seed(0)
    for B, T_out, T_in, m_q, m_k, a in [(1, 1, 1, 2, 3, 4), (2, 3, 5, 4, 6, 3),
                                         (3, 4, 2, 5, 5, 7)]:
        reference = Attention(m_q, m_k, "additive", attention_size=a).double()
        queries = torch.randn(B, T_out, m_q, generator=gen, dtype=torch.float64)
        keys = torch.randn(B, T_in, m_k, generator=gen, dtype=torch.float64)
        W_sa, W_sb, w_s = (reference.W_sa.detach(), reference.W_sb.detach(),
                           reference.w_s.detach())
        got = scores(queries, keys, W_sa, W_sb, w_s)
        expected = reference.scores(queries, keys).detach()
        if isinstance(got, torch.Tensor) and T_in != T_out and got.shape == (B, T_in, T_out):
            raise ExerciseError(f"scores have shape {tuple(got.shape)}, expected "
                                f"{(B, T_out, T_in)}: query t and key tau are swapped")
        try:
            expect_close(f"scores for B={B}, T_out={T_out}, T_in={T_in}", got, expected,
                         atol=1e-10, rtol=1e-10)
        except ExerciseError as error:
            if isinstance(got, torch.Tensor) and got.shape == expected.shape:
                no_tanh = ((queries @ W_sa.T)[:, :, None] + (keys @ W_sb.T)[:, None]) @ w_s
                if torch.allclose(got.double(), no_tanh, atol=1e-8):
                    raise ExerciseError(f"{error}: these are the scores without the tanh") \
                        from None
                if torch.allclose(got.double(), expected.transpose(1, 2), atol=1e-8):
                    raise ExerciseError(f"{error}: query t and key tau are swapped") from None
            raise
    passed("the additive scores agree with seqlib.attention.Attention on 3 shapes")
