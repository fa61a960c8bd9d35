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
    close,
    expect,
    expect_close,
    expect_tensor,
    name_mistake,
    passed,
    require_callable,
    run_attempt,
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
    u, alpha = run_attempt(attempt, *inputs, what="grid_attention on random float64 inputs",
                           returns=("u", "alpha"))
    u_ref, alpha_ref = _reference(grid, s_prev, W_sa, W_sb, w_s)
    expect_tensor("alpha", alpha, (B, h, w), dims="(B, h, w)",
                  why="one weight per location of the grid")
    alpha = alpha.detach().double()
    if not close(alpha, alpha_ref, **TOL):
        for dim, part in ((2, "row"), (1, "column")):
            sums = alpha.sum(dim)  # (B, h) or (B, w)
            name_mistake(f"each {part} of the grid has weights summing to 1", sums,
                         [(torch.ones_like(sums), "the softmax of (7.20) runs over all h w "
                           "locations of an image at once")], **TOL)
        totals = alpha.sum((1, 2))  # (B,)
        expect(close(totals, torch.ones(B), **TOL),
               f"the weights of each image should sum to 1 over its {h * w} locations, (7.20); "
               f"they sum to {[round(t, 4) for t in totals.tolist()]}")
        v = grid.reshape(B, h * w, d)  # (B, h w, d)
        linear = s_prev @ W_sa.T @ w_s  # (B,): without tanh the query's part is a constant
        no_tanh = torch.softmax((v @ W_sb.T @ w_s) + linear[:, None], -1).view(B, h, w)
        name_mistake("alpha", alpha, [
            (alpha_ref.transpose(1, 2).reshape(B, h, w), "the weights are right but in the "
             "wrong places: alpha was computed column by column and reshaped row by row; "
             "flatten the grid and reshape the weights back in the same order"),
            (no_tanh, "it matches the score w_s^T (W_sa z_q + W_sb z_k) without the tanh: the "
             "additive score is w_s^T tanh(W_sa z_q + W_sb z_k)")], **TOL)
        expect_close("alpha", alpha, alpha_ref)
    name_mistake("alpha is right, but u", u, [(grid.mean((1, 2)), "it is the plain mean of "
                 "the grid's vectors: weight each v^<tau> by its alpha^<t>_tau, (7.21)")], **TOL)
    expect_tensor("u", u, (B, d), dims="(B, d)", why="one output vector per image")
    expect_close("alpha is right, but u = sum_tau alpha^<t>_tau v^<tau> (7.21)", u, u_ref)
    passed(f"alpha (B, h, w) = {(B, h, w)} and u (B, d) = {(B, d)} agree with "
           "seqlib.attention.Attention(score='additive') on the grid read row by row")


__all__ = ["check_grid_attention"]
