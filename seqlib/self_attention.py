"""Self-attention of Section 7.5, equations (7.23)-(7.27).

In self-attention the queries, keys and values all come from the same sequence
x^<1>, ..., x^<T> (or, in cross-attention, the keys and values from another one):

- (7.23), no parameters: u^<t> = sum_tau alpha_{t,tau} x^<tau>, with alpha_{t,.} the softmax
  of the scaled inner products of x^<t> with every x^<tau>;
- (7.24), learned projections: q^<t> = W_q x^<t>, k^<t> = W_k x^<t> (m x p), v^<t> = W_v x^<t>
  (m_v x p), and softmax(Q K^T / sqrt(m)) V;
- (7.25)-(7.26), H heads: each head h has its own W_q^h, W_k^h, W_v^h, and the output is
  u^<t> = sum_h W_c^h u^{h,<t>} (W_c^h is p x m_v). Stacking the W_c^h side by side gives
  W^O = [W_c^1 ... W_c^H] (p x H m_v), so the sum is W^O applied to the concatenated heads:
  the form of Vaswani et al. (2017) and of torch.nn.MultiheadAttention;
- (7.27), masking: the score matrix plus M, with M = 0 where key tau may be seen and -inf
  where it may not (its future, for causal attention): exp(-inf) = 0 gives it weight 0.

Tensors are (batch, time, features); inside multi-head attention, (batch, heads, time,
head features). Padding masks are (batch, keys) booleans, True at real keys.

Two paths give the same numbers: the explicit one writes softmax(Q K^T / sqrt(m) + M) V
out and returns the weights (to plot them), the fast one calls
torch.nn.functional.scaled_dot_product_attention (fused kernels, no weights).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from seqlib.attention import _check_tensor, _uniform, inner_product_attention, visible_keys
from seqlib.rnn import positive_int


def causal_mask(T_q: int, T_k: int | None = None, device=None,
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The mask matrix M of (7.27), (T_q, T_k): 0 where the query may see the key, -inf in
    its future. Query i sits at time T_k - T_q + i (the last T_q times when earlier keys
    were cached), so with T_q = T_k the -inf entries are those above the diagonal."""
    T_k = T_q if T_k is None else T_k
    positive_int("T_q", T_q)
    positive_int("T_k", T_k)
    allowed = visible_keys(None, True, 1, T_q, T_k, device)[0]  # (T_q, T_k)
    return torch.zeros(T_q, T_k, device=device, dtype=dtype).masked_fill(~allowed, -math.inf)


def self_attention(x: torch.Tensor, *, mask: torch.Tensor | None = None,
                   causal: bool = False):
    """(7.23): every x^<t> (B, T, p) attends to the whole sequence with the scaled inner
    product score and no parameters. Returns outputs u (B, T, p) and weights (B, T, T)."""
    _check_tensor("x", x)
    return inner_product_attention(x, x, x, mask=mask, causal=causal)


def _check_heads(name: str, x) -> None:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() != 4:
        got = (f"{x.dtype} tensor of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor)
               else type(x).__name__)
        raise ValueError(f"{name} must be a float (batch, heads, time, features) tensor, "
                         f"got {got}")


def scaled_dot_product(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                       mask: torch.Tensor | None = None, causal: bool = False,
                       fast: bool = False):
    """softmax(Q K^T / sqrt(m) + M) V for every head at once, (7.24) and (7.27).

    q (B, H, T_q, m), k (B, H, T_k, m), v (B, H, T_k, m_v); `mask` (B, T_k) is True at real
    keys, `causal` hides each query's future. Returns outputs (B, H, T_q, m_v) and the
    weights (B, H, T_q, T_k), or None for them when `fast` (scaled_dot_product_attention).
    """
    for name, x in [("q", q), ("k", k), ("v", v)]:
        _check_heads(name, x)
    B, H, T_q, m = q.shape
    T_k = k.shape[2]
    if k.shape[:2] != (B, H) or k.shape[3] != m or v.shape[:3] != (B, H, T_k):
        raise ValueError(f"q, k, v must be (B, H, T_q, m), (B, H, T_k, m), (B, H, T_k, m_v); "
                         f"got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if T_k == 0:
        raise ValueError("there are no keys (T_k = 0): the attention weights are undefined")
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
        scores = scores.masked_fill(~allowed[:, None], -math.inf)  # + M of (7.27)
    weights = torch.softmax(scores, dim=-1)  # (B, H, T_q, T_k), rows sum to 1
    return weights @ v, weights  # (B, H, T_q, m_v)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (7.25)-(7.26), without biases as in the chapter (`bias=True`
    adds b_q, b_k, b_v and b_c, as torch.nn.MultiheadAttention has by default).

    p: model dimension (queries' features), heads: H, m: query/key size per head (default
    p // H), m_v: value size per head (default m), kv_size: features of the keys' and
    values' sequence for cross-attention (default p). The heads' matrices are stacked:
    W_q (H m, p), W_k (H m, kv_size), W_v (H m_v, kv_size), rows h m ... (h+1) m - 1 for
    head h; W_c (p, H m_v) is W^O = [W_c^1 ... W_c^H].

    forward(x (B, T, p), context=None (B, S, kv_size), *, mask=None (B, T_k), causal=False,
    cache=None, need_weights=False) -> (u (B, T, p), weights (B, H, T, T_k) or None).
    `cache`, a dict, makes step-by-step decoding cost one step per token: for
    self-attention it holds the keys and values of the earlier steps and is extended in
    place; for cross-attention it keeps the context's keys and values after the first call.
    Weights come from the explicit path (need_weights=True or fast=False); otherwise
    scaled_dot_product_attention computes the same outputs.
    """

    def __init__(self, p: int, heads: int, m: int | None = None, m_v: int | None = None, *,
                 kv_size: int | None = None, bias: bool = False, fast: bool = True):
        super().__init__()
        positive_int("p", p)
        positive_int("heads", heads)
        if m is None:
            if p % heads:
                raise ValueError(f"p={p} is not divisible by heads={heads}: choose p a "
                                 f"multiple of heads or give the head size m explicitly")
            m = p // heads
        m = positive_int("m", m)
        m_v = m if m_v is None else positive_int("m_v", m_v)
        kv_size = p if kv_size is None else positive_int("kv_size", kv_size)
        self.p, self.heads, self.m, self.m_v, self.kv_size = p, heads, m, m_v, kv_size
        self.fast = fast
        self.W_q = _uniform(heads * m, p)
        self.W_k = _uniform(heads * m, kv_size)
        self.W_v = _uniform(heads * m_v, kv_size)
        self.W_c = _uniform(p, heads * m_v)
        if bias:
            self.b_q, self.b_k = (nn.Parameter(torch.zeros(heads * m)) for _ in range(2))
            self.b_v, self.b_c = nn.Parameter(torch.zeros(heads * m_v)), nn.Parameter(
                torch.zeros(p))
        else:
            self.b_q = self.b_k = self.b_v = self.b_c = None

    def _heads(self, x, W, b, size):
        """x (B, T, f) -> W x + b split into heads, (B, H, T, size)."""
        B, T, _ = x.shape
        return F.linear(x, W, b).view(B, T, self.heads, size).transpose(1, 2)  # (B, H, T, s)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None, *,
                mask: torch.Tensor | None = None, causal: bool = False,
                cache: dict | None = None, need_weights: bool = False):
        """Outputs u (B, T, p) and, if computed, the weights (B, H, T, T_k)."""
        _check_tensor("x", x, self.p)
        B, T, _ = x.shape
        q = self._heads(x, self.W_q, self.b_q, self.m)  # (B, H, T, m)
        if context is None and cache is not None and "k" in cache:  # self-attention, later
            k = torch.cat([cache["k"], self._heads(x, self.W_k, self.b_k, self.m)], 2)
            v = torch.cat([cache["v"], self._heads(x, self.W_v, self.b_v, self.m_v)], 2)
        elif context is not None and cache is not None and "k" in cache:  # cross, later
            k, v = cache["k"], cache["v"]
        else:
            source = x if context is None else context
            _check_tensor("context", source, self.kv_size)
            if source.shape[0] != B:
                raise ValueError(f"context has batch size {source.shape[0]}, expected {B}")
            k = self._heads(source, self.W_k, self.b_k, self.m)  # (B, H, T_k, m)
            v = self._heads(source, self.W_v, self.b_v, self.m_v)  # (B, H, T_k, m_v)
        if cache is not None:
            cache["k"], cache["v"] = k, v
        fast = self.fast and not need_weights
        u, weights = scaled_dot_product(q, k, v, mask=mask, causal=causal, fast=fast)
        u = u.transpose(1, 2).reshape(B, T, self.heads * self.m_v)  # heads side by side
        return F.linear(u, self.W_c, self.b_c), weights  # W^O [u^1; ...; u^H] = sum_h W_c^h u^h

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """The same attention with the weights of a torch.nn.MultiheadAttention (whose
        in_proj_weight stacks W_q, W_k, W_v and whose out_proj is W^O)."""
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(f"mha must be a torch.nn.MultiheadAttention, got "
                            f"{type(mha).__name__}")
        if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError("only torch.nn.MultiheadAttention with kdim = vdim = embed_dim, "
                             "add_bias_kv=False and add_zero_attn=False has a seqlib twin")
        if mha.dropout:
            raise ValueError(f"mha has attention dropout {mha.dropout}; seqlib's attention "
                             "has none, so training outputs would differ: use dropout=0")
        p, H = mha.embed_dim, mha.num_heads
        bias = mha.in_proj_bias is not None
        model = cls(p, H, bias=bias).to(mha.in_proj_weight)
        with torch.no_grad():
            for W, rows in zip((model.W_q, model.W_k, model.W_v),
                               mha.in_proj_weight.chunk(3), strict=True):
                W.copy_(rows)
            model.W_c.copy_(mha.out_proj.weight)
            if bias:
                for b, part in zip((model.b_q, model.b_k, model.b_v),
                                   mha.in_proj_bias.chunk(3), strict=True):
                    b.copy_(part)
                model.b_c.copy_(mha.out_proj.bias)
        return model

    def extra_repr(self) -> str:
        return (f"p={self.p}, heads={self.heads}, m={self.m}, m_v={self.m_v}, "
                f"kv_size={self.kv_size}, bias={self.b_q is not None}, fast={self.fast}")

