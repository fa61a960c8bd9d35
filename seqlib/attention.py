"""The attention mechanism of Section 7.4: the weights (7.20), the output (7.21) and the
score functions s, for z_q (B, T_out, m_q), z_k (B, T_in, m_k) and v (B, T_in, m_v):

    alpha^<t> = S_softmax(s(z_q^<t>, z_k^<1>), ..., s(z_q^<t>, z_k^<T_in>)),     (7.20)
    u^<t> = sum_{tau=1}^{T_in} alpha^<t>_tau v^<tau>     (non-causal), or
    u^<t> = sum_{tau=1}^{t} alpha^<t>_tau v^<tau>        (causal, T_out <= T_in).  (7.21)

The scores of Section 7.4 (an unnumbered display), m~ being `attention_size` and W~_s `W`:

    "inner"     z_q^T z_k / sqrt(max(m_q, m_k))   no parameters; needs m_q = m_k
    "general"   z_q^T W_s z_k                     W_s: m_q x m_k
    "concat"    w_s^T tanh(W~_s [z_q; z_k])       W~_s: m~ x (m_q + m_k), w_s: m~
    "additive"  w_s^T tanh(W_sa z_q + W_sb z_k)   W_sa: m~ x m_q, W_sb: m~ x m_k, w_s: m~

"concat" and "additive" are one family (W~_s = [W_sa, W_sb]); "additive" (Bahdanau et al.,
2015) projects queries and keys apart and needs much less memory.

A padding mask (B, T_in) is True at real keys; hidden keys score -inf, and a query that sees
no key raises a ValueError. With `causal=True` and fewer queries than keys, the queries sit
at the last T_out times (earlier keys cached in decoding; the chapter puts query t at t).
"""

import math

import torch
from torch import nn

from seqlib.checks import check_keys, check_tensor, model_dtype, positive_int

SCORES = ("inner", "general", "concat", "additive")


def visible_keys(mask: torch.Tensor | None, causal: bool, B: int, T_q: int, T_k: int,
                 device=None) -> torch.Tensor | None:
    """Which keys each query may see, (B, T_q, T_k) bool or None for all: the real keys of
    `mask` and, with `causal`, those up to query i's time T_k - T_q + i."""
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise TypeError(f"mask must be a bool tensor (True at real keys), got {got}")
        if tuple(mask.shape) != (B, T_k):
            raise ValueError(f"mask has shape {tuple(mask.shape)}, expected (batch, keys) = "
                             f"{(B, T_k)}")
    if causal and T_q > T_k:
        raise ValueError(f"causal attention needs no more queries than keys, got T_q={T_q} "
                         f"queries and T_k={T_k} keys")
    if mask is None and not causal:
        return None
    allowed = torch.ones(B, T_q, T_k, dtype=torch.bool, device=device)
    if mask is not None:
        allowed = allowed & mask[:, None, :]  # (B, 1, T_k): the same keys for every query
    if causal:
        t_q = torch.arange(T_k - T_q, T_k, device=device)  # time of each query
        allowed = allowed & (torch.arange(T_k, device=device) <= t_q[:, None])  # (T_q, T_k)
    if not allowed.any(-1).all():
        b, i = (~allowed.any(-1)).nonzero()[0].tolist()
        raise ValueError(f"query {i} of batch entry {b} sees no key (all its keys are masked "
                         "or in its future): its attention weights are undefined")
    return allowed


def attention_weights(scores: torch.Tensor, *, mask: torch.Tensor | None = None,
                      causal: bool = False) -> torch.Tensor:
    """(7.20): the weight vectors alpha^<t> = S_softmax(s(z_q^<t>, z_k^<1>), ...,
    s(z_q^<t>, z_k^<T_in>)), one row per query, from the scores (B, T_out, T_in).

    Keys hidden by `mask` (B, T_in) or by `causal` get the score -inf, hence the weight 0.
    Returns alpha (B, T_out, T_in), rows summing to 1.
    """
    B, T_q, T_k = scores.shape
    if T_k == 0:
        raise ValueError("there are no keys (T_in = 0): the attention weights are undefined")
    allowed = visible_keys(mask, causal, B, T_q, T_k, scores.device)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))  # exp(-inf) = 0: weight 0
    return torch.softmax(scores, dim=-1)  # (B, T_out, T_in), rows sum to 1


def attend(scores: torch.Tensor, values: torch.Tensor, *, mask: torch.Tensor | None = None,
           causal: bool = False):
    """The weights (7.20) of the scores (B, T_out, T_in), then the outputs (7.21): u^<t> =
    sum_tau alpha^<t>_tau v^<tau> over the values (B, T_in, m_v), over every key, or with
    `causal` over tau <= t. Returns outputs u (B, T_out, m_v) and weights alpha (B, T_out,
    T_in).
    """
    B, T_q, T_k = scores.shape
    if values.shape[:2] != (B, T_k):
        raise ValueError(f"values has shape {tuple(values.shape)}, expected (batch, keys, "
                         f"features) with batch, keys = {(B, T_k)}")
    alpha = attention_weights(scores, mask=mask, causal=causal)  # (B, T_out, T_in)
    return alpha @ values, alpha  # (7.21): u (B, T_out, m_v)


def inner_product_attention(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *,
                            mask: torch.Tensor | None = None, causal: bool = False):
    """Attention (7.20)-(7.21) with the score z_q^T z_k / sqrt(m): outputs u, weights alpha."""
    check_tensor("queries", queries)
    check_keys("keys", keys)
    check_tensor("values", values)
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(f"the inner-product score needs queries and keys of the same size, "
                         f"got m_q={queries.shape[-1]} and m_k={keys.shape[-1]}; use the "
                         "'general', 'concat' or 'additive' score")
    if queries.shape[0] != keys.shape[0]:
        raise ValueError(f"queries and keys have batch sizes {queries.shape[0]} and "
                         f"{keys.shape[0]}, expected equal")
    scores = queries @ keys.transpose(1, 2) / math.sqrt(keys.shape[-1])  # (B, T_out, T_in)
    return attend(scores, values, mask=mask, causal=causal)


def uniform_parameter(*shape: int) -> nn.Parameter:
    """A parameter drawn like torch.nn.Linear's weights: uniform(+-1/sqrt(fan_in))."""
    bound = 1 / math.sqrt(shape[-1])
    return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))


class Attention(nn.Module):
    """Attention (7.20)-(7.21) with a score of Section 7.4 (default "additive", Bahdanau's);
    `attention_size` is m~, the width of the tanh layer (default: query_size)."""

    def __init__(self, query_size: int, key_size: int, score: str = "additive",
                 attention_size: int | None = None):
        super().__init__()
        for name, value in [("query_size", query_size), ("key_size", key_size)]:
            positive_int(name, value)
        if score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {score!r}")
        if score == "inner" and query_size != key_size:
            raise ValueError(f"the 'inner' score needs query_size == key_size, got "
                             f"{query_size} and {key_size}; use 'general', 'concat' or "
                             "'additive'")
        if attention_size is not None and score in ("inner", "general"):
            raise ValueError(f"attention_size is for the 'concat' and 'additive' scores, "
                             f"not {score!r}")
        a = query_size if attention_size is None else attention_size
        positive_int("attention_size", a)
        self.query_size, self.key_size, self.score = query_size, key_size, score
        if score == "general":
            self.W_s = uniform_parameter(query_size, key_size)
        elif score == "concat":
            self.W = uniform_parameter(a, query_size + key_size)
            self.w_s = uniform_parameter(a)
        elif score == "additive":
            self.W_sa = uniform_parameter(a, query_size)
            self.W_sb = uniform_parameter(a, key_size)
            self.w_s = uniform_parameter(a)
        self.attention_size = a if score in ("concat", "additive") else None

    def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """The part of the score that reads the keys alone (W_s z_k, W_sb z_k, or z_k), which
        a decoder computes once per sentence."""
        if self.score == "general":
            return keys @ self.W_s.T
        return keys @ self.W_sb.T if self.score == "additive" else keys

    def scores(self, queries: torch.Tensor, keys: torch.Tensor, *,
               projected: torch.Tensor | None = None) -> torch.Tensor:
        """s(z_q^<t>, z_k^<tau>) for every pair, (B, T_out, T_in); `projected`: project_keys."""
        z_k = self.project_keys(keys) if projected is None else projected
        if self.score == "inner":
            return queries @ z_k.transpose(1, 2) / math.sqrt(self.key_size)
        if self.score == "general":
            return queries @ z_k.transpose(1, 2)  # z_q^T (W_s z_k)
        if self.score == "concat":
            T_q, T_k = queries.shape[1], keys.shape[1]
            pairs = torch.cat([queries[:, :, None].expand(-1, -1, T_k, -1),  # (B, T_q, T_k, m_q)
                               keys[:, None].expand(-1, T_q, -1, -1)],  # (B, T_q, T_k, m_k)
                              dim=-1)  # [z_q; z_k] for every pair: (B, T_q, T_k, m_q + m_k)
            return torch.tanh(pairs @ self.W.T) @ self.w_s  # W~_s = W: (B, T_q, T_k)
        a_q = (queries @ self.W_sa.T)[:, :, None]  # W_sa z_q: (B, T_q, 1, a)
        a_k = z_k[:, None]  # W_sb z_k: (B, 1, T_k, a)
        return torch.tanh(a_q + a_k) @ self.w_s  # (B, T_q, T_k)

    def forward(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *,
                mask: torch.Tensor | None = None, causal: bool = False,
                projected: torch.Tensor | None = None):
        """Outputs u (7.21) and weights alpha (7.20); `projected` as in `scores`."""
        check_tensor("queries", queries, self.query_size, model_dtype(self))
        check_keys("keys", keys, self.key_size)
        check_tensor("values", values)
        if queries.shape[0] != keys.shape[0]:
            raise ValueError(f"queries and keys have batch sizes {queries.shape[0]} and "
                             f"{keys.shape[0]}, expected equal")
        if projected is not None and projected.shape[:2] != keys.shape[:2]:
            raise ValueError(f"projected keys have shape {tuple(projected.shape)}, expected "
                             f"project_keys(keys), of batch and time {tuple(keys.shape[:2])}")
        return attend(self.scores(queries, keys, projected=projected), values, mask=mask,
                      causal=causal)

    def extra_repr(self) -> str:
        return (f"query_size={self.query_size}, key_size={self.key_size}, "
                f"score={self.score!r}, attention_size={self.attention_size}")
