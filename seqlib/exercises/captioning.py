"""Checkers for the exercises of the image-captioning page (attention over an image's grid).

`check_grid_attention(attempt)` checks a function

    grid_attention(grid, s_prev, W_sa, W_sb, w_s) -> (u, alpha)

that attends from the decoder's state to a CNN's grid of annotation vectors with the
additive score: grid (B, h, w, d) holds the vectors v^<tau> at their locations, s_prev
(B, m) is the query z_q^<t> = s^<t-1>, W_sa (a, m), W_sb (a, d) and w_s (a,) are the score's
parameters. It returns the output u^<t> (B, d) of (7.21) and the weights alpha^<t> of (7.20)
laid out on the grid, (B, h, w), summing to 1 over all h w locations of each image. The
reference is seqlib.attention.Attention run on the grid read row by row.
"""

import torch

from seqlib.attention import Attention
from seqlib.exercises.toolkit import (
    ExerciseError,
    close,
    expect,
    expect_close,
    passed,
    require_callable,
    seeded,
)

TOL = dict(atol=1e-6, rtol=1e-4)  # float64 inputs: round-off only


def _reference(grid, s_prev, W_sa, W_sb, w_s):
    """u (B, d) and alpha (B, h, w) by seqlib.attention.Attention with these parameters."""
    B, h, w, d = grid.shape
    with seeded(0):  # initial weights, replaced below: the caller's random numbers untouched
        attention = Attention(s_prev.shape[-1], d, "additive", W_sa.shape[0]).double()
    with torch.no_grad():
        attention.W_sa.copy_(W_sa)
        attention.W_sb.copy_(W_sb)
        attention.w_s.copy_(w_s)
        v = grid.reshape(B, h * w, d)  # (B, h w, d): the locations row by row
        u, alpha = attention(s_prev[:, None], v, v)  # (B, 1, d), (B, 1, h w)
    return u[:, 0], alpha[:, 0].view(B, h, w)  # (B, d), (B, h, w)


def check_grid_attention(attempt) -> None:
    """Check `attempt(grid, s_prev, W_sa, W_sb, w_s) -> (u, alpha)` (see the module's
    docstring) against seqlib.attention.Attention on random float64 inputs."""
    require_callable(attempt, "grid_attention(grid, s_prev, W_sa, W_sb, w_s) -> (u, alpha)")
    gen = torch.Generator().manual_seed(15)
    B, h, w, d, m, a = 3, 2, 5, 6, 4, 7  # h != w: a grid read in the wrong order shows

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    grid, s_prev = randn(B, h, w, d), randn(B, m)
    W_sa, W_sb, w_s = randn(a, m), randn(a, d), randn(a)
    inputs = [x.clone() for x in (grid, s_prev, W_sa, W_sb, w_s)]
    result = attempt(*inputs)
    expect(isinstance(result, tuple) and len(result) == 2,
           f"grid_attention should return a pair (u, alpha), got {type(result).__name__}")
    u, alpha = result
    u_ref, alpha_ref = _reference(grid, s_prev, W_sa, W_sb, w_s)
    expect(isinstance(alpha, torch.Tensor),
           f"alpha should be a torch.Tensor, got {type(alpha).__name__}")
    expect(tuple(alpha.shape) == (B, h, w),
           f"alpha has shape {tuple(alpha.shape)}, expected (B, h, w) = {(B, h, w)}: one "
           "weight per location of the grid")
    alpha = alpha.detach().double()
    if not close(alpha, alpha_ref, **TOL):
        totals = alpha.sum((1, 2))  # (B,)
        if close(alpha.sum(2), torch.ones(B, h), **TOL):
            raise ExerciseError("each row of the grid has weights summing to 1: the softmax "
                                "of (7.20) runs over all h w locations of an image at once")
        if close(alpha.sum(1), torch.ones(B, w), **TOL):
            raise ExerciseError("each column of the grid has weights summing to 1: the "
                                "softmax of (7.20) runs over all h w locations at once")
        expect(close(totals, torch.ones(B), **TOL),
               f"the weights of each image should sum to 1 over its {h * w} locations, (7.20); "
               f"they sum to {[round(t, 4) for t in totals.tolist()]}")
        if close(alpha, alpha_ref.transpose(1, 2).reshape(B, h, w), **TOL):
            raise ExerciseError("the weights are right but in the wrong places: alpha was "
                                "computed column by column and reshaped row by row; flatten "
                                "the grid and reshape the weights back in the same order")
        v = grid.reshape(B, h * w, d)  # (B, h w, d)
        linear = s_prev @ W_sa.T @ w_s  # (B,): without tanh the query's part is a constant
        no_tanh = torch.softmax((v @ W_sb.T @ w_s) + linear[:, None], -1).view(B, h, w)
        if close(alpha, no_tanh, **TOL):
            raise ExerciseError("alpha matches the score w_s^T (W_sa z_q + W_sb z_k) without "
                                "the tanh: the additive score is w_s^T tanh(W_sa z_q + W_sb z_k)")
        expect_close("alpha", alpha, alpha_ref)
    if close(u, grid.mean((1, 2)), **TOL):
        raise ExerciseError("alpha is right, but u is the plain mean of the grid's vectors: "
                            "weight each v^<tau> by its alpha^<t>_tau, (7.21)")
    expect(not isinstance(u, torch.Tensor) or tuple(u.shape) == (B, d),
           f"u has shape {tuple(u.shape) if isinstance(u, torch.Tensor) else None}, expected "
           f"(B, d) = {(B, d)}: one output vector per image")
    try:
        expect_close("u", u, u_ref)
    except ExerciseError as error:
        raise ExerciseError(f"alpha is right but u is not, u = sum_tau alpha^<t>_tau v^<tau> "
                            f"(7.21): {error}") from None
    passed(f"alpha (B, h, w) = {(B, h, w)} and u (B, d) = {(B, d)} agree with "
           "seqlib.attention.Attention(score='additive') on the grid read row by row")


__all__ = ["check_grid_attention"]
