"""Self-attention of Section 7.5, equations (7.23)-(7.27): (7.23) without parameters
(`self_attention`), (7.24) with learned proxies (`SelfAttention`), (7.25)-(7.26) with H heads
(`MultiHeadAttention`, W^O = [W_c^1 ... W_c^H] as in torch.nn.MultiheadAttention), and the
masking of (7.27), as the chapter writes it (`masked_key_scores`) and as an additive mask
Lambda (`causal_mask`, `causal=True`).

The score is the scaled inner product of Section 7.4 unless another is given; multi-head
tensors are (batch, heads, time, head features); padding masks are (batch, keys), True at
real keys. The explicit path returns the weights; the fast one, the same numbers without
them, calls torch.nn.functional.scaled_dot_product_attention.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from seqlib.attention import attend, uniform_parameter, visible_keys
from seqlib.checks import check_keys, check_tensor, int_in_range, positive_int


def causal_mask(T_q: int, T_k: int | None = None, device=None,
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The additive mask Lambda (T_q, T_k) of (7.27), softmax(scores + Lambda): -inf in the
    future of query i, at time T_k - T_q + i (above the diagonal when T_q = T_k), else 0."""
    T_k = T_q if T_k is None else T_k
    positive_int("T_q", T_q)
    positive_int("T_k", T_k)
    allowed = visible_keys(None, True, 1, T_q, T_k, device)[0]  # (T_q, T_k)
    return torch.zeros(T_q, T_k, device=device, dtype=dtype).masked_fill(~allowed, -math.inf)


def scaled_inner_product(z_q: torch.Tensor, z_k: torch.Tensor) -> torch.Tensor:
    """s(z_q, z_k) = z_q^T z_k / sqrt(m) (the chapter's sqrt(max(m_q, m_k)), m_q = m_k = m) for
    every pair of query proxies z_q (B, T_q, m) and key proxies z_k (B, T_k, m): (B, T_q, T_k)."""
    check_tensor("z_q", z_q)
    check_tensor("z_k", z_k, z_q.shape[-1])
    return z_q @ z_k.transpose(1, 2) / math.sqrt(z_q.shape[-1])  # (B, T_q, T_k)


def _scores(score, z_q: torch.Tensor, z_k: torch.Tensor) -> torch.Tensor:
    """score(z_q, z_k), checked to be the (B, T_q, T_k) scores of every pair."""
    if not callable(score):
        raise TypeError(f"score must be a function of (z_q, z_k), got {type(score).__name__}")
    scores = score(z_q, z_k)
    expected = (z_q.shape[0], z_q.shape[1], z_k.shape[1])
    if not isinstance(scores, torch.Tensor) or tuple(scores.shape) != expected:
        got = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"score must return the (B, T_q, T_k) = {expected} scores of every "
                         f"pair, got {got}")
    return scores


def self_attention(x: torch.Tensor, *, score=None, causal: bool = True,
                   mask: torch.Tensor | None = None):
    """(7.23): simple self-attention, with z_q^<t> = z_k^<t> = v^<t> = x^<t> and no parameters.

    x (B, T, p). Causal by default, as in the chapter: u^<t> = sum_{tau <= t} alpha^t_tau
    x^<tau>, alpha^t the softmax of s(x^<t>, x^<1>), ..., s(x^<t>, x^<t>); causal=False gives
    the non-causal form, over tau = 1, ..., T. `score(z_q, z_k)` -> (B, T_q, T_k) is s
    (default: scaled_inner_product). `mask` (B, T) is True at real (unpadded) times.
    Returns outputs u (B, T, p) and weights alpha (B, T, T), row t holding alpha^t.
    """
    check_keys("x", x)
    scores = _scores(scaled_inner_product if score is None else score, x, x)  # (B, T, T)
    return attend(scores, x, mask=mask, causal=causal)


class SelfAttention(nn.Module):
    """(7.24): u^<t> = sum_{tau <= t} alpha^t_tau W_v x^<tau>, alpha^t the softmax over
    tau <= t of s(W_q x^<t>, W_k x^<tau>), W_q, W_k, W_v each p x p; causal by default, as
    in the chapter; `score` as in self_attention. forward(x, *, mask) -> (u, alpha).
    """

    def __init__(self, p: int, *, causal: bool = True, score=None):
        super().__init__()
        self.p, self.causal = positive_int("p", p), causal
        self.W_q, self.W_k, self.W_v = (uniform_parameter(p, p) for _ in range(3))
        self.score = scaled_inner_product if score is None else score

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None):
        check_keys("x", x, self.p, self.W_q.dtype)
        z_q, z_k, v = x @ self.W_q.T, x @ self.W_k.T, x @ self.W_v.T  # (B, T, p) each
        return attend(_scores(self.score, z_q, z_k), v, mask=mask, causal=self.causal)

    def extra_repr(self) -> str:
        return f"p={self.p}, causal={self.causal}"


def masked_key_scores(z_q: torch.Tensor, z_k: torch.Tensor, score=None) -> torch.Tensor:
    """(7.27) as the chapter writes it. For the query z_q^<t>, the key proxies of the later
    times are set to -inf, z_k^<t+1> = ... = z_k^<T> = -inf, and a key of -inf scores -inf:
    s(z_q^<t>, -inf) = -inf, so that its weight is e^-inf = 0.

    z_q (B, T, m_q) and z_k (B, T, m_k) on one time axis -> scores (B, T, T), -inf above the
    diagonal. Each query gets its own copy of the keys, as the equation reads, so this takes
    T times the memory of the scores: it shows the chapter's form; attention itself uses
    the mask matrix Lambda of causal_mask (the same softmax), or causal=True.
    """
    check_tensor("z_q", z_q)
    check_tensor("z_k", z_k)
    B, T, m_q = z_q.shape
    m_k = z_k.shape[-1]
    if z_k.shape[:2] != (B, T):
        raise ValueError(f"z_q and z_k must share batch and time, got {tuple(z_q.shape)} "
                         f"and {tuple(z_k.shape)}")
    keys = z_k[:, None].expand(B, T, T, m_k).clone()  # (B, query t, key tau, m_k)
    later = torch.ones(T, T, dtype=torch.bool, device=z_k.device).triu(1)  # tau > t
    keys[:, later] = -math.inf  # (7.27): z_k^<tau> = -inf for tau > t
    masked = torch.isneginf(keys).all(-1)  # (B, T, T): the keys set to -inf
    finite = keys.masked_fill(masked[..., None], 0.0)  # scored, then overwritten below
    scores = _scores(scaled_inner_product if score is None else score,
                     z_q.reshape(B * T, 1, m_q), finite.view(B * T, T, m_k))  # (B T, 1, T)
    return scores.view(B, T, T).masked_fill(masked, -math.inf)  # s(z_q, -inf) = -inf


def _check_heads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raise unless q, k, v are float (B, H, T_q, m), (B, H, T_k, m), (B, H, T_k, m_v)
    tensors with at least one key."""
    for name, x in [("q", q), ("k", k), ("v", v)]:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() != 4:
            got = (f"{x.dtype} tensor of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor)
                   else type(x).__name__)
            raise ValueError(f"{name} must be a float (batch, heads, time, features) tensor, "
                             f"got {got}")
    B, H, _, m = q.shape
    T_k = k.shape[2]
    if k.shape[:2] != (B, H) or k.shape[3] != m or v.shape[:3] != (B, H, T_k):
        raise ValueError(f"q, k, v must be (B, H, T_q, m), (B, H, T_k, m), (B, H, T_k, m_v); "
                         f"got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if T_k == 0:
        raise ValueError("there are no keys (T_k = 0): the attention weights are undefined")


def scaled_dot_product(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                       mask: torch.Tensor | None = None, causal: bool = False,
                       fast: bool = False):
    """softmax(Q K^T / sqrt(m) + Lambda) V for every head at once, (7.25) and (7.27).

    q (B, H, T_q, m), k (B, H, T_k, m), v (B, H, T_k, m_v); `mask` (B, T_k) is True at real
    keys, `causal` hides each query's future. Returns outputs (B, H, T_q, m_v) and the
    weights (B, H, T_q, T_k), or None for them when `fast` (scaled_dot_product_attention).
    """
    _check_heads(q, k, v)
    B, H, T_q, m = q.shape
    T_k = k.shape[2]
    if fast and mask is None and (not causal or T_q == 1 and T_k >= 1):
        # no mask, or one query at the last time (it sees every cached key)
        return F.scaled_dot_product_attention(q, k, v), None
    if fast and mask is None and T_q == T_k:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True), None
    allowed = visible_keys(mask, causal, B, T_q, T_k, q.device)  # (B, T_q, T_k) or None
    if fast:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed[:, None]), None
    scores = q @ k.transpose(-2, -1) / math.sqrt(m)  # (B, H, T_q, T_k)
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None], -math.inf)  # + Lambda, (7.27)
    weights = torch.softmax(scores, dim=-1)  # (B, H, T_q, T_k), rows sum to 1
    return weights @ v, weights  # (B, H, T_q, m_v)


def head_sizes(p: int, heads: int, m: int | None, m_v: int | None) -> tuple:
    """(m, m_v), checked: m = p // H and m_v = m unless given."""
    positive_int("p", p)
    positive_int("heads", heads)
    if m is None:
        if p % heads:
            raise ValueError(f"p={p} is not divisible by heads={heads}: choose p a "
                             f"multiple of heads or give the head size m explicitly")
        m = p // heads
    m = positive_int("m", m)
    return m, m if m_v is None else positive_int("m_v", m_v)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (7.25)-(7.26), without biases as in the chapter (`bias=True` adds
    b_q, b_k, b_v, b_c, as torch.nn.MultiheadAttention). m, m_v: query/key and value size per
    head; kv_size: the features of a cross-attention's context, (7.33). W_q, W_k, W_v stack
    the heads' matrices (`head(h)`); W_c (p, H m_v) is W^O. `cache`, a dict, makes decoding
    cost one step per token (beyond the chapter); weights need need_weights or fast=False.
    """

    def __init__(self, p: int, heads: int, m: int | None = None, m_v: int | None = None, *,
                 kv_size: int | None = None, bias: bool = False, fast: bool = True):
        super().__init__()
        m, m_v = head_sizes(p, heads, m, m_v)
        kv_size = p if kv_size is None else positive_int("kv_size", kv_size)
        self.p, self.heads, self.m, self.m_v, self.kv_size = p, heads, m, m_v, kv_size
        self.fast = fast
        self.W_q = uniform_parameter(heads * m, p)
        self.W_k = uniform_parameter(heads * m, kv_size)
        self.W_v = uniform_parameter(heads * m_v, kv_size)
        self.W_c = uniform_parameter(p, heads * m_v)
        self.b_q = self.b_k = self.b_v = self.b_c = None
        if bias:
            self.b_q, self.b_k = (nn.Parameter(torch.zeros(heads * m)) for _ in range(2))
            self.b_v, self.b_c = (nn.Parameter(torch.zeros(n)) for n in (heads * m_v, p))

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None, *,
                mask: torch.Tensor | None = None, causal: bool = False,
                cache: dict | None = None, need_weights: bool = False):
        """Outputs u (B, T, p) and, if computed, the weights (B, H, T, T_k)."""
        check_tensor("x", x, self.p, self.W_q.dtype)
        B, T, _ = x.shape
        q = self._heads(x, self.W_q, self.b_q, self.m)  # W_q^h x^<t>, every h: (B, H, T, m)
        k, v = self.keys_values(x, context, cache)  # W_k^h x^<tau>, W_v^h x^<tau>
        fast = self.fast and not need_weights
        u, weights = scaled_dot_product(q, k, v, mask=mask, causal=causal, fast=fast)  # (7.25)
        u = u.transpose(1, 2).reshape(B, T, self.heads * self.m_v)  # [u^1; ...; u^H]
        return F.linear(u, self.W_c, self.b_c), weights  # W^O [u^1; ...; u^H], (7.26)

    def _heads(self, x, W, b, size):
        """x (B, T, f) -> W x + b split into heads, (B, H, T, size)."""
        B, T, _ = x.shape
        return F.linear(x, W, b).view(B, T, self.heads, size).transpose(1, 2)  # (B, H, T, s)

    def keys_values(self, x: torch.Tensor, context: torch.Tensor | None, cache: dict | None):
        """W_k^h and W_v^h of every time of the context, or of x: (B, H, T_k, m), (B, H, T_k,
        m_v). A `cache` holds them: self-attention appends, cross-attention computes once."""
        if cache is not None and "k" in cache and context is None:  # self-attention, later
            k = torch.cat([cache["k"], self._heads(x, self.W_k, self.b_k, self.m)], 2)
            v = torch.cat([cache["v"], self._heads(x, self.W_v, self.b_v, self.m_v)], 2)
        elif cache is not None and "k" in cache:  # cross-attention, later
            k, v = cache["k"], cache["v"]
        else:
            source = x if context is None else context
            check_keys("x" if context is None else "context", source, self.kv_size,
                       self.W_k.dtype)
            if source.shape[0] != x.shape[0]:
                raise ValueError(f"context has batch size {source.shape[0]}, expected "
                                 f"{x.shape[0]}")
            k = self._heads(source, self.W_k, self.b_k, self.m)  # (B, H, T_k, m)
            v = self._heads(source, self.W_v, self.b_v, self.m_v)  # (B, H, T_k, m_v)
        if cache is not None:
            cache["k"], cache["v"] = k, v
        return k, v

    def head(self, h: int):
        """The matrices of head h = 1, ..., H, views of the stacked ones: W_q^h, W_k^h
        (m x p), W_v^h (m_v x p) and W_c^h (p x m_v), as in (7.25)-(7.26)."""
        int_in_range("h", h, 1, self.heads, expected=f"an int from 1 to H={self.heads}")
        qk, v = slice((h - 1) * self.m, h * self.m), slice((h - 1) * self.m_v, h * self.m_v)
        return self.W_q[qk], self.W_k[qk], self.W_v[v], self.W_c[:, v]

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """The same attention with the weights of a torch.nn.MultiheadAttention."""
        check_torch_twin(mha)
        bias = mha.in_proj_bias is not None
        model = cls(mha.embed_dim, mha.num_heads, bias=bias).to(mha.in_proj_weight)
        ours = [model.W_q, model.W_k, model.W_v, model.W_c]
        theirs = [*mha.in_proj_weight.chunk(3), mha.out_proj.weight]
        if bias:
            ours += [model.b_q, model.b_k, model.b_v, model.b_c]
            theirs += [*mha.in_proj_bias.chunk(3), mha.out_proj.bias]
        with torch.no_grad():
            for W, value in zip(ours, theirs, strict=True):
                W.copy_(value)
        return model

    def extra_repr(self) -> str:
        return (f"p={self.p}, heads={self.heads}, m={self.m}, m_v={self.m_v}, "
                f"kv_size={self.kv_size}, bias={self.b_q is not None}, fast={self.fast}")


def check_torch_twin(mha) -> None:
    """Raise unless `mha` is a torch.nn.MultiheadAttention that MultiHeadAttention can copy."""
    if not isinstance(mha, nn.MultiheadAttention):
        raise TypeError(f"mha must be a torch.nn.MultiheadAttention, got {type(mha).__name__}")
    if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
        raise ValueError("only torch.nn.MultiheadAttention with kdim = vdim = embed_dim, "
                         "add_bias_kv=False and add_zero_attn=False has a seqlib twin")
    if mha.dropout:
        raise ValueError(f"mha has attention dropout {mha.dropout}; seqlib's attention "
                         "has none, so training outputs would differ: use dropout=0")
