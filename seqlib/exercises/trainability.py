"""The checker of the coding exercise of the page on what makes a transformer trainable."""

import torch
import torch.nn.functional as F

from seqlib.exercises.toolkit import expect, expect_close, passed, require_callable, run_attempt


def _reference(x: torch.Tensor, mask: torch.Tensor, eps: float) -> torch.Tensor:
    """Batch statistics of the real tokens only: each feature normalised by the mean and
    (biased) variance over the positions where mask is True; 0 at padding."""
    out = torch.zeros_like(x)  # (B, T, p)
    out[mask] = F.batch_norm(x[mask], None, None, training=True, eps=eps)  # (N, p) real
    return out


def check_masked_batch_norm(masked_batch_norm) -> None:
    """`masked_batch_norm(x (B, T, p), mask (B, T), eps)` -> (B, T, p): batch normalisation
    whose statistics come from the real tokens alone (mask True), zeros at the padding, so
    that a sentence's output does not depend on how much padding its batch holds."""
    require_callable(masked_batch_norm, "masked_batch_norm(x, mask, eps) -> (B, T, p)",
                     name="masked_batch_norm")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 6, 4, generator=gen) * 2 + 1  # (B, T, p)
    lengths = torch.tensor([6, 2, 4])
    mask = torch.arange(6) < lengths[:, None]  # (B, T), True at real tokens
    x = x.masked_fill(~mask[..., None], 0.0)  # padding vectors are zero, as <empty>'s
    for eps in (1e-5, 0.5):
        got = run_attempt(masked_batch_norm, x, mask, eps, what=f"on a batch (3, 6, 4), eps={eps}")
        expect_close(f"masked_batch_norm(x, mask, eps={eps})", got, _reference(x, mask, eps))
    longer = F.pad(x, (0, 0, 0, 5))  # 5 more padding positions per sentence: (3, 11, 4)
    longer_mask = F.pad(mask, (0, 5), value=False)
    got = run_attempt(masked_batch_norm, longer, longer_mask, 1e-5, what="with more padding")
    expect_close("the real tokens' outputs with 5 more padding positions",
                 got[longer_mask], _reference(x, mask, 1e-5)[mask])
    expect(bool((got[~longer_mask] == 0).all()), "the outputs at padding positions must be 0")
    passed("statistics over the real tokens only; the output ignores how much padding "
           "there is")
