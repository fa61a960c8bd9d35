"""Positional embeddings of Section 7.5, equations (7.28)-(7.30).

Self-attention without masking treats its inputs as a set: permuting x^<1>, ..., x^<T>
permutes the outputs the same way, so word order is lost. Positional embeddings give each
input its time t:

- one-hot: append the unit vector e_t of R^T to x^<t> (p + T features), the simplest form;
- learned (7.28): a trainable vector r^<t> per position, added to x^<t>;
- sinusoidal (7.29): r^t_j = sin(t / 10000^(j / p_e)) for even j and
  r^t_j = cos(t / 10000^((j - 1) / p_e)) for odd j, j = 0, ..., p_e - 1 (Vaswani et al.,
  2017), either appended to x^<t> (p + p_e features) or added to it (p_e = p), (7.30).

Positions t count from 0. Inputs are (batch, time, features).
"""

import torch
from torch import nn

from seqlib.attention import _check_tensor
from seqlib.rnn import positive_int

KINDS = ("sinusoidal", "learned")
COMBINE = ("add", "append")


def one_hot_positions(x: torch.Tensor) -> torch.Tensor:
    """x (B, T, p) with the one-hot position e_t appended at each step: (B, T, p + T)."""
    _check_tensor("x", x)
    B, T, _ = x.shape
    eye = torch.eye(T, dtype=x.dtype, device=x.device).expand(B, T, T)  # row t is e_t
    return torch.cat([x, eye], dim=-1)


def sinusoidal_table(T: int, p_e: int, base: float = 10_000.0) -> torch.Tensor:
    """The (T, p_e) table of (7.29): row t is r^<t>, for positions t = 0, ..., T - 1."""
    positive_int("T", T)
    positive_int("p_e", p_e)
    t = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    j = torch.arange(p_e, dtype=torch.float64)  # (p_e,)
    angle = t / base ** ((j - j % 2) / p_e)  # (T, p_e): the even j of each sin/cos pair
    return torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle)).float()


class PositionalEmbedding(nn.Module):
    """Position vectors r^<t> for up to `max_len` positions, added to or appended to x.

    kind "sinusoidal" (7.29), a fixed table, or "learned" (7.28), a trainable one;
    combine "add" (p_e = p, the default) or "append" (output p + p_e features), (7.30).
    forward(x (B, T, p), offset=0) uses positions offset, ..., offset + T - 1 (offset > 0
    when earlier steps were cached).
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
        """x (B, T, p) with r^<offset + t> added or appended at each step t."""
        _check_tensor("x", x, self.p)
        B, T, _ = x.shape
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        if offset + T > self.max_len:
            raise ValueError(f"positions {offset} to {offset + T - 1} are past the positional "
                             f"table of max_len={self.max_len}: the sequence is too long for "
                             "this model")
        r = self.table[offset:offset + T].to(x.dtype)  # (T, p_e)
        if self.combine == "add":
            return x + r
        return torch.cat([x, r.expand(B, T, self.p_e)], dim=-1)  # (B, T, p + p_e)

    def extra_repr(self) -> str:
        return (f"max_len={self.max_len}, p={self.p}, kind={self.kind!r}, "
                f"combine={self.combine!r}, p_e={self.p_e}")
