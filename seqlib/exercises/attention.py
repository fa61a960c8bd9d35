"""Checkers for the exercises of the attention chapter (Section 7.4): attention with the
additive score of Bahdanau et al., with a padding mask."""

import operator

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

# distinct sizes, so that a transposed or misplaced dimension shows in a shape
B, T_OUT, T_IN, M_Q, M_K, M_TILDE, M_V = 2, 3, 5, 4, 6, 7, 8
SUMS = dict(atol=1e-5, rtol=1e-5)  # weights and their sums: atol 1e-5, torch.allclose's rtol


def _inputs() -> dict:
    """Queries, keys, values, a padding mask and the parameters of an additive score, the
    same on every call (a generator of their own)."""
    gen = torch.Generator().manual_seed(8)
    mask = torch.ones(B, T_IN, dtype=torch.bool)
    mask[1, 3:] = False  # the second sequence: 3 real keys, 2 padded ones
    return {
        "queries": torch.randn(B, T_OUT, M_Q, generator=gen),  # z_q^<t>: (B, T_out, m_q)
        "keys": torch.randn(B, T_IN, M_K, generator=gen),  # z_k^<tau>: (B, T_in, m_k)
        "values": torch.randn(B, T_IN, M_V, generator=gen),  # v^<tau>: (B, T_in, m_v)
        "W_sa": torch.randn(M_TILDE, M_Q, generator=gen),  # m~ x m_q
        "W_sb": torch.randn(M_TILDE, M_K, generator=gen),  # m~ x m_k
        "w_s": torch.randn(M_TILDE, generator=gen),  # m~
        "mask": mask,
    }


def _reference(inputs: dict, mask) -> tuple:
    """seqlib.attention.Attention with the additive score and the given parameters."""
    with seeded(0):  # initial weights, replaced below: the caller's random numbers untouched
        attention = Attention(M_Q, M_K, "additive", attention_size=M_TILDE)
    with torch.no_grad():
        for name in ("W_sa", "W_sb", "w_s"):
            getattr(attention, name).copy_(inputs[name])
        return attention(inputs["queries"], inputs["keys"], inputs["values"], mask=mask)


def _call(attempt, inputs: dict, mask, what: str) -> tuple:
    """Run the attempt on copies of the inputs; check it returns (u, alpha) tensors."""
    args = [inputs[k].clone() for k in ("queries", "keys", "values", "W_sa", "W_sb", "w_s")]
    out = run_attempt(attempt, *args, what=what, mask=None if mask is None else mask.clone(),
                      returns=("u (outputs)", "alpha (weights)"))
    for name, x in zip(("u", "alpha"), out, strict=True):
        expect_tensor(f"{what}: {name}", x)
    return out


def _check_weights(alpha, inputs: dict, expected, what: str) -> None:
    """Compare the weights, naming the mistake where a typical one explains them."""
    name_mistake(f"{what}: alpha has shape {tuple(alpha.shape)}", tuple(alpha.shape),
                 [((B, T_IN, T_OUT), f"(B, T_in, T_out); expected (B, T_out, T_in) = "
                   f"{(B, T_OUT, T_IN)}, one row alpha^<t> per query")], same=operator.eq)
    expect_tensor(f"{what}: alpha", alpha, (B, T_OUT, T_IN), dims="(B, T_out, T_in)")
    alpha = alpha.detach().double()
    expect(bool(torch.isfinite(alpha).all()), f"{what}: alpha holds NaN or infinite values")
    name_mistake(f"{what}: the weights sum to 1 over the queries", alpha.sum(1),
                 [(torch.ones(B, T_IN), "take the softmax over the keys (the last dimension), "
                   "so that each row alpha^<t> sums to 1, (7.20)")], **SUMS)
    sums = alpha.sum(-1)
    expect(close(sums, torch.ones(B, T_OUT), **SUMS),
           f"{what}: the rows of alpha do not sum to 1 (sums "
           f"{[[round(float(v), 3) for v in row] for row in sums]}): alpha^<t> is a softmax "
           f"over the keys, (7.20)")
    a_q = inputs["queries"].double() @ inputs["W_sa"].double().T  # (B, T_out, m~)
    a_k = inputs["keys"].double() @ inputs["W_sb"].double().T  # (B, T_in, m~)
    pre = a_q[:, :, None] + a_k[:, None]  # (B, T_out, T_in, m~)
    w_s = inputs["w_s"].double()
    mistakes = [(pre @ w_s, "the tanh seems missing: s(z_q, z_k) = w_s^T "
                 "tanh(W_sa z_q + W_sb z_k)"),
                (torch.tanh(pre) @ w_s / M_TILDE ** 0.5, "the additive score has no "
                 "1/sqrt(m~) factor: that scaling belongs to the inner product"),
                (torch.tanh(pre).sum(-1), "the tanh layer's outputs are summed; weigh them "
                 "by w_s: s = w_s^T tanh(...)")]
    name_mistake(what, alpha, ((torch.softmax(scores, -1), message)
                               for scores, message in mistakes), **SUMS)
    expect_close(f"{what}: alpha", alpha, expected)


def check_additive_attention(attempt) -> None:
    """Check `attempt(queries, keys, values, W_sa, W_sb, w_s, mask=None)`, attention
    (7.20)-(7.21) with the additive score s(z_q, z_k) = w_s^T tanh(W_sa z_q + W_sb z_k):
    queries (B, T_out, m_q), keys (B, T_in, m_k), values (B, T_in, m_v), W_sa (m~, m_q),
    W_sb (m~, m_k), w_s (m~,), mask None or a (B, T_in) bool tensor, True at real keys.
    It must return (u, alpha), u (B, T_out, m_v) and alpha (B, T_out, T_in), compared with
    seqlib.attention.Attention(score="additive") without and with a padding mask.
    """
    require_callable(attempt, "additive_attention(queries, keys, values, W_sa, W_sb, w_s, "
                     "mask=None) -> (u, alpha)")
    inputs = _inputs()
    what = "without a mask"
    u, alpha = _call(attempt, inputs, None, what)
    u_ref, alpha_ref = _reference(inputs, None)
    _check_weights(alpha, inputs, alpha_ref, what)
    expect_tensor(f"{what}: u", u, (B, T_OUT, M_V), dims="(B, T_out, m_v)")
    expect(close(u, u_ref), f"{what}: the weights are right but the outputs u are not: u^<t> "
                            f"= sum_tau alpha^<t>_tau v^<tau>, (7.21), that is alpha @ values")

    mask = inputs["mask"]
    what = "with a padding mask (sequence 1 has 2 padded keys)"
    u, alpha = _call(attempt, inputs, mask, what)
    u_ref, alpha_ref = _reference(inputs, mask)
    expect_tensor(f"{what}: alpha", alpha, (B, T_OUT, T_IN), dims="(B, T_out, T_in)")
    padded = alpha.detach()[1, :, 3:]  # (T_out, 2): the weights on the padded keys
    real = alpha.detach()[1, :, :3]
    inverted = bool((real.abs() < 1e-12).all()) and not bool((padded.abs() < 1e-12).all())
    expect(not inverted, f"{what}: the real keys get weight 0 and the padded ones do not: mask "
                         f"is True at the real keys (False at the padding)")
    expect(bool((padded.abs() < 1e-7).all()),
           f"{what}: the padded keys get weights up to {padded.abs().max().item():.3g}; they "
           f"must get weight 0: give their scores -inf before the softmax "
           f"(masked_fill(~mask, -inf))")
    sums = alpha.detach().sum(-1)
    expect(close(sums, torch.ones_like(sums), **SUMS),
           f"{what}: the padded keys get weight 0 but the rows of the second sequence sum to "
           f"{[round(float(v), 3) for v in sums[1]]}: setting weights to 0 after the softmax "
           f"leaves the others unnormalised; mask the scores (-inf) before the softmax")
    expect_close(f"{what}: alpha", alpha, alpha_ref)
    expect_close(f"{what}: u", u, u_ref)
    passed("additive attention (7.20)-(7.21), s = w_s^T tanh(W_sa z_q + W_sb z_k), equals "
           "seqlib.attention.Attention(score='additive') in weights and outputs, without and "
           "with a padding mask")
