"""Positional embeddings of Section 7.5, equations (7.28)-(7.30).

Positional embeddings give each input its time t, counted from t = 1 as in the chapter:

- one-hot: append the unit vector e_t of R^T to x^<t> (p~ = p + T features);
- learned jointly with the input, (7.28): x~^<t> = W_1 S(W_2 x^<t> + W_3 e_t + b) in R^p~,
  with W_1 (p~ x p~), W_2 (p~ x p), W_3 (p~ x T), b in R^p~, S = ReLU (`JointPositionalEmbedding`);
- sinusoidal, (7.29): r^<t>_{2i} = sin(t / M^(2i / p_e)), r^<t>_{2i+1} = cos(t / M^(2i / p_e)),
  i = 0, ..., p_e / 2 - 1, M = 10,000 (Vaswani et al., 2017), appended to x^<t>
  (p + p_e features) or added to it (p_e = p), (7.30) (`PositionalEmbedding`);
- a learned table, x^<t> + r^<t> with one trained vector r^<t> per position: the common
  alternative of GPT-2 and nanoGPT, beyond the chapter (`PositionalEmbedding(kind="learned")`).

Row t - 1 of a table holds position t.
"""

import torch
from torch import nn

from seqlib.attention import uniform_parameter
from seqlib.checks import check_tensor, int_in_range, positive_int

KINDS = ("sinusoidal", "learned")
COMBINE = ("add", "append")


def one_hot_positions(x: torch.Tensor) -> torch.Tensor:
    """x (B, T, p) with e_t appended at each step t: (B, T, p + T), the chapter's x~^<t>."""
    check_tensor("x", x)
    B, T, _ = x.shape
    eye = torch.eye(T, dtype=x.dtype, device=x.device).expand(B, T, T)  # row t - 1 is e_t
    return torch.cat([x, eye], dim=-1)


def sinusoidal_table(T: int, p_e: int, M: float = 10_000.0) -> torch.Tensor:
    """The (T, p_e) table of (7.29), r^<1>, ..., r^<T>; an odd p_e ends with a sine. Computed
    in float64, returned in float32."""
    positive_int("T", T)
    positive_int("p_e", p_e)
    if isinstance(M, bool) or not isinstance(M, (int, float)) or M <= 1:
        raise ValueError(f"M must be a number > 1, got {M!r}")
    t = torch.arange(1, T + 1, dtype=torch.float64)[:, None]  # (T, 1): t = 1, ..., T
    two_i = torch.arange(0, p_e, 2, dtype=torch.float64)  # (ceil(p_e / 2),): 2i
    angle = t / M ** (two_i / p_e)  # (T, ceil(p_e / 2))
    table = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1)  # (T, p_e / 2, 2)
    return table.flatten(1)[:, :p_e].float()  # (T, p_e): columns 2i, 2i + 1 side by side


def _check_offset(offset, T: int, name: str, last: int) -> None:
    """Raise unless positions offset + 1, ..., offset + T are within 1, ..., `last`."""
    int_in_range("offset", offset, 0)
    if offset + T > last:
        raise ValueError(f"positions {offset + 1} to {offset + T} are past the last position "
                         f"{name}={last}: the sequence is too long for this embedding")


class JointPositionalEmbedding(nn.Module):
    """The chapter's learned positional embedding (7.28), which encodes each input and its
    position jointly:

        x~^<t> = W_1 S(W_2 x^<t> + W_3 e_t + b)  in R^p~,

    p~ = p by default. T is the longest sequence it can embed; forward(x, offset) embeds
    positions offset + 1, ..., offset + T' (offset > 0 when earlier steps were cached).
    """

    def __init__(self, p: int, T: int, p_tilde: int | None = None):
        super().__init__()
        self.p, self.T = positive_int("p", p), positive_int("T", T)
        self.p_tilde = p if p_tilde is None else positive_int("p_tilde", p_tilde)
        self.W_1 = uniform_parameter(self.p_tilde, self.p_tilde)
        self.W_2 = uniform_parameter(self.p_tilde, p)
        self.W_3 = uniform_parameter(self.p_tilde, T)
        self.b = nn.Parameter(torch.zeros(self.p_tilde))

    @property
    def output_size(self) -> int:
        return self.p_tilde

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        check_tensor("x", x, self.p, self.W_3.dtype)
        _check_offset(offset, x.shape[1], "T", self.T)
        W_3_e = self.W_3[:, offset:offset + x.shape[1]].T  # (T', p~): row t is W_3 e_t
        hidden = torch.relu(x @ self.W_2.T + W_3_e + self.b)  # S(W_2 x + W_3 e_t + b)
        return hidden @ self.W_1.T  # (B, T', p~)

    def extra_repr(self) -> str:
        return f"p={self.p}, T={self.T}, p_tilde={self.p_tilde}"


class PositionalEmbedding(nn.Module):
    """Position vectors r^<t> for positions t = 1, ..., max_len, added to or appended to x:
    kind "sinusoidal": the fixed table of (7.29); kind "learned": a trained table (beyond the
    chapter, whose learned embedding is JointPositionalEmbedding, (7.28)). combine "add"
    (p_e = p, the default, (7.30)) or "append" (output p + p_e features).
    """

    def __init__(self, max_len: int, p: int, *, kind: str = "sinusoidal",
                 combine: str = "add", p_e: int | None = None):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if combine not in COMBINE:
            raise ValueError(f"combine must be one of {COMBINE}, got {combine!r}")
        p_e = p if p_e is None else positive_int("p_e", p_e)
        if combine == "add" and p_e != p:
            raise ValueError(f"combine='add' needs p_e == p, got p_e={p_e} and p={p}")
        self.max_len, self.p, self.p_e = positive_int("max_len", max_len), p, p_e
        self.kind, self.combine = kind, combine
        if kind == "learned":
            self.table = nn.Parameter(torch.randn(max_len, p_e) * 0.02)  # (max_len, p_e)
        else:
            self.register_buffer("table", sinusoidal_table(max_len, p_e), persistent=False)

    @property
    def output_size(self) -> int:
        return self.p + self.p_e if self.combine == "append" else self.p

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x (B, T, p) with r^<offset + t> added or appended at each step t = 1, ..., T."""
        check_tensor("x", x, self.p)
        B, T, _ = x.shape
        _check_offset(offset, T, "max_len", self.max_len)
        r = self.table[offset:offset + T].to(x.dtype)  # (T, p_e): r^<offset + 1>, ...
        if self.combine == "add":
            return x + r
        return torch.cat([x, r.expand(B, T, self.p_e)], dim=-1)  # (B, T, p + p_e)

    def extra_repr(self) -> str:
        return (f"max_len={self.max_len}, p={self.p}, kind={self.kind!r}, "
                f"combine={self.combine!r}, p_e={self.p_e}")
