"""Checkers for the exercises of the page on fixed-window language models."""

import torch

from seqlib.exercises.toolkit import (
    close,
    expect,
    expect_close,
    expect_tensor,
    name_mistake,
    passed,
    require_callable,
    run_attempt,
)

TOL = dict(atol=1e-8, rtol=1e-5)  # float64 windows (torch.allclose's defaults)


def _reference(x: torch.Tensor, k: int) -> torch.Tensor:
    B, T, E = x.shape
    padded = torch.cat([x.new_zeros(B, k - 1, E), x], dim=1)  # (B, k - 1 + T, E)
    return torch.cat([padded[:, j:j + T] for j in range(k)], dim=-1)  # (B, T, k E)


def check_window_features(window_features) -> None:
    """`window_features(x, k)`: for embeddings x (B, T, E), the windows e^<t> = [x^<t-k+1>;
    ...; x^<t>] (B, T, k E), oldest first, with zero vectors before the first step."""
    require_callable(window_features, "window_features(x, k) -> (B, T, k E)",
                     name="window_features")
    gen = torch.Generator().manual_seed(0)
    for B, T, E, k in [(1, 1, 2, 1), (2, 5, 3, 2), (3, 4, 2, 6)]:
        x = torch.randn(B, T, E, generator=gen, dtype=torch.float64)
        what = f"window_features(x of shape {(B, T, E)}, k={k})"
        got, expected = run_attempt(window_features, x, k, what=what), _reference(x, k)
        expect_tensor(what, got, expected.shape)
        if k > 1 and not close(got, expected, **TOL):
            newest_first = torch.cat(expected.split(E, dim=-1)[::-1], dim=-1)
            name_mistake(f"for k = {k}", got, [(newest_first, "the window is newest first: put "
                                                "x^<t-k+1> first and x^<t> last")], **TOL)
            expect(not close(got[:, k - 1:], expected[:, k - 1:], **TOL),
                   f"for k = {k} the full windows are right but the first {k - 1} are not: "
                   f"before the first step the window holds zero vectors")
        expect_close(what, got, expected, atol=1e-12, rtol=0)
    passed("the windows agree, zero vectors before the start, on 3 shapes")
