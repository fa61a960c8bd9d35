"""Checkers for the exercises of the transformer language model's page (beyond the chapter):
min-p sampling, a rule that keeps the tokens whose probability is at least a fraction of
the most probable one's."""

import torch

from seqlib.exercises.toolkit import (
    expect,
    expect_close,
    expect_tensor,
    name_mistake,
    passed,
    require_callable,
    run_attempt,
)


def _reference(logits: torch.Tensor, p_min: float) -> torch.Tensor:
    """Logits with every token whose probability is below p_min times the largest set to
    -inf."""
    probs = torch.softmax(logits, dim=-1)
    keep = probs >= p_min * probs.amax(dim=-1, keepdim=True)
    return logits.masked_fill(~keep, -float("inf"))


def _cases() -> list:
    """(name, logits, p_min): a peaked and a flat distribution, batches of 1 to 3 dims."""
    gen = torch.Generator().manual_seed(0)
    flat = 0.3 * torch.randn(3, 12, generator=gen)  # (N, V): many tokens near the top
    peaked = 4 * torch.randn(2, 4, 12, generator=gen)  # (B, T, V): one or two tokens stand out
    single = torch.randn(12, generator=gen)  # (V,)
    return [("flat logits (3, 12), p_min = 0.5", flat, 0.5),
            ("peaked logits (2, 4, 12), p_min = 0.1", peaked, 0.1),
            ("logits (12,), p_min = 0.2", single, 0.2),
            ("peaked logits (2, 4, 12), p_min = 1.0", peaked, 1.0)]


def _slips(logits: torch.Tensor, p_min: float) -> list:
    probs = torch.softmax(logits, dim=-1)
    inf = -float("inf")
    top = logits.amax(dim=-1, keepdim=True)
    return [  # the tie first: with p_min = 1 it removes every token, as the next slip does
        (logits.masked_fill(probs <= p_min * probs.amax(dim=-1, keepdim=True), inf),
         "a token whose probability equals p_min times the largest is kept (>=), so the "
         "most probable token always survives"),
        (logits.masked_fill(probs < p_min, inf),
         "you compared the probabilities with p_min itself: the threshold is p_min times the "
         "probability of the most probable token"),
        (logits.masked_fill(logits < p_min * top, inf),
         "you compared the logits with p_min times the largest logit: compare probabilities "
         "(softmax of the logits), p >= p_min * max p"),
        (logits.masked_fill(probs >= p_min * probs.amax(dim=-1, keepdim=True), inf),
         "you removed the tokens that should be kept and kept the others"),
    ]


def check_min_p_filter(min_p_filter) -> None:
    """Check `min_p_filter(logits (..., V), p_min) -> logits (..., V)`: the logits of the
    tokens with probability below p_min times the largest probability set to -inf, the
    others unchanged (or shifted by one constant per row: the softmax is the same). The
    input must be left unchanged."""
    require_callable(min_p_filter, "min_p_filter(logits, p_min) -> logits", name="min_p_filter")
    for name, logits, p_min in _cases():
        original = logits.clone()
        got = run_attempt(min_p_filter, logits, p_min, what=f"min_p_filter({name})")
        expect(torch.equal(logits, original), f"min_p_filter changed its input in place "
                                              f"({name}): return a new tensor")
        expect_tensor(f"min_p_filter({name})", got, logits.shape)
        expected = _reference(logits, p_min)
        removed, expected_removed = torch.isneginf(got), torch.isneginf(expected)
        if not torch.equal(removed, expected_removed):  # a slip may remove the right ones
            name_mistake(name, removed, ((torch.isneginf(value), message)
                                         for value, message in _slips(logits, p_min)),
                         same=torch.equal)
        expect(torch.equal(removed, expected_removed),
               f"{name}: the tokens set to -inf are not the right ones: "
               f"{(~removed).sum().item()} kept in all, expected "
               f"{(~expected_removed).sum().item()}")
        expect_close(f"softmax(min_p_filter({name}))", torch.softmax(got, dim=-1),
                     torch.softmax(expected, dim=-1), atol=1e-6, rtol=1e-5)
    passed("min_p_filter keeps exactly the tokens with p >= p_min * max p, leaves their "
           "relative probabilities unchanged, for batches of logits of 1 to 3 dimensions")


__all__ = ["check_min_p_filter"]
