"""Checkers for the exercises of the self-attention chapter (Section 7.5): multi-head
self-attention (7.25)-(7.26) computed for all the heads at once from the stacked matrices."""

import math

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
    seeded,
)
from seqlib.self_attention import MultiHeadAttention

# distinct sizes (m H != p, m != m_v), so that a confused size shows
B, T, P, H, M, M_V = 2, 5, 6, 3, 4, 2


def _inputs() -> dict:
    """x and the stacked matrices of H heads, the same on every call."""
    gen = torch.Generator().manual_seed(9)
    return {"x": torch.randn(B, T, P, generator=gen),  # (B, T, p)
            "W_q": torch.randn(H * M, P, generator=gen) / 2,  # heads' W_q^h stacked: (H m, p)
            "W_k": torch.randn(H * M, P, generator=gen) / 2,  # (H m, p)
            "W_v": torch.randn(H * M_V, P, generator=gen),  # (H m_v, p)
            "W_c": torch.randn(P, H * M_V, generator=gen)}  # W^O = [W_c^1 ... W_c^H]: (p, H m_v)


def _reference(inputs: dict, causal: bool) -> tuple:
    """seqlib.self_attention.MultiHeadAttention with the given matrices."""
    with seeded(0):  # initial weights, replaced below: the caller's random numbers untouched
        mha = MultiHeadAttention(P, H, M, M_V)
    with torch.no_grad():
        for name in ("W_q", "W_k", "W_v", "W_c"):
            getattr(mha, name).copy_(inputs[name])
        return mha(inputs["x"], causal=causal, need_weights=True)


def _variant(inputs: dict, causal: bool, *, scale: float = M, split: str = "right",
             future: bool = False, merge: str = "right") -> tuple:
    """Multi-head attention with one typical mistake: the scores divided by sqrt(scale);
    heads split by a plain view ("view") or from interleaved rows ("interleaved"); the
    causal mask hiding the past instead of the future; the heads merged without putting
    time first ("view"). Returns outputs (B, T, p) and weights (B, H, T, T)."""
    x = inputs["x"].double()

    def heads(W, size):
        y = x @ W.double().T  # (B, T, H size)
        if split == "view":
            return y.view(B, H, T, size)  # wrong: time and heads mixed up
        if split == "interleaved":
            return y.view(B, T, size, H).permute(0, 3, 1, 2)  # wrong rows for each head
        return y.view(B, T, H, size).transpose(1, 2)  # (B, H, T, size)

    q, k, v = heads(inputs["W_q"], M), heads(inputs["W_k"], M), heads(inputs["W_v"], M_V)
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale)  # (B, H, T, T)
    if causal:
        hidden = torch.ones(T, T, dtype=torch.bool).tril(-1 if future else 0)
        scores = scores.masked_fill(hidden if future else ~hidden, float("-inf"))
    alpha = torch.softmax(scores, -1)  # (B, H, T, T)
    u = alpha @ v  # (B, H, T, m_v)
    u = u.reshape(B, T, H * M_V) if merge == "view" else u.transpose(1, 2).reshape(B, T, H * M_V)
    return u @ inputs["W_c"].double().T, alpha  # (B, T, p)


MISTAKES = [
    (dict(scale=P), "the scores are divided by sqrt(p); divide by sqrt(m), the size of one "
                    "head's queries and keys"),
    (dict(scale=1.0), "the scores are not scaled: divide them by sqrt(m)"),
    (dict(scale=H * M), "the scores are divided by sqrt(H m); divide by sqrt(m), the size of "
                        "one head's queries and keys"),
    (dict(split="view"), "the heads are split with a plain view (B, H, T, m) of (B, T, H m), "
                         "which mixes times and heads: view as (B, T, H, m), then "
                         "transpose(1, 2)"),
    (dict(split="interleaved"), "each head takes every H-th row of the stacked matrices; "
                                "head h owns the consecutive rows (h-1) m, ..., h m - 1"),
    (dict(merge="view"), "the heads' outputs are merged with a plain reshape of "
                         "(B, H, T, m_v): transpose(1, 2) to (B, T, H, m_v) first, then "
                         "reshape to (B, T, H m_v)"),
]


def _call(attempt, inputs: dict, causal: bool, what: str) -> tuple:
    args = [inputs[k].clone() for k in ("x", "W_q", "W_k", "W_v", "W_c")]
    return run_attempt(attempt, *args, H, what=what, causal=causal,
                       returns=("u (B, T, p)", "alpha (B, H, T, T)"))


def check_multi_head_attention(attempt) -> None:
    """Check `attempt(x, W_q, W_k, W_v, W_c, H, causal=False)`, multi-head self-attention
    (7.25)-(7.26) for all heads at once: x (B, T, p); W_q, W_k (H m, p) and W_v (H m_v, p)
    stack the heads' matrices (head h in rows (h-1) m to h m - 1), W_c (p, H m_v) is
    W^O = [W_c^1 ... W_c^H]; the scores are divided by sqrt(m). It must return (u, alpha),
    u (B, T, p) and alpha (B, H, T, T), compared with seqlib.self_attention's
    MultiHeadAttention, non-causal and causal, with p = 6, H = 3, m = 4 and m_v = 2.
    """
    require_callable(attempt, "multi_head_attention(x, W_q, W_k, W_v, W_c, H, causal=False) "
                     "-> (u, alpha)")
    inputs = _inputs()
    for causal in (False, True):
        what = "causal" if causal else "non-causal"
        u, alpha = _call(attempt, inputs, causal, what)
        u_ref, alpha_ref = _reference(inputs, causal)
        expect_tensor(f"{what}: alpha", alpha, (B, H, T, T), dims="(B, H, T, T)",
                      why="one T x T matrix per head")
        expect_tensor(f"{what}: u", u, (B, T, P), dims="(B, T, p)")
        if not close(alpha, alpha_ref) or not close(u, u_ref):
            mistakes = MISTAKES + ([(dict(future=True), "the causal mask hides the past: "
                                    "query t may see the keys tau <= t and no later one")]
                                   if causal else [])
            name_mistake(what, (u, alpha), ((_variant(inputs, causal, **change), message)
                                            for change, message in mistakes),
                         same=lambda got, wrong: all(map(close, got, wrong)))
            if causal:
                name_mistake(what, u, [(_reference(inputs, False)[0], "the outputs are the "
                             "non-causal ones: with causal=True, give the scores of the keys "
                             "tau > t the value -inf before the softmax, (7.27)")])
            expect_close(f"{what}: alpha (B, H, T, T)", alpha, alpha_ref)
        expect(close(u, u_ref), f"{what}: the weights are right but the outputs u are not: "
                                "u^<t> = sum_h W_c^h u^{h,<t>}, (7.26), that is the heads' "
                                "outputs side by side, (B, T, H m_v), times W_c^T")
    passed(f"multi-head self-attention (7.25)-(7.26) from the stacked matrices equals "
           f"seqlib's MultiHeadAttention, non-causal and causal (p={P}, H={H}, m={M}, "
           f"m_v={M_V})")
