"""Gated units of Section 7.3: the LSTM (7.16)-(7.17) and the GRU (7.18)-(7.19).

Both are `Cell`s of seqlib.rnn: reversing (7.14), stacking (7.15) and the textbook and fast
paths come from `Recurrent`. `hidden_size` is the chapter's m~, the size of each group of
neurons (an LSTM has m = 6 m~ neurons, a GRU m = 4 m~). The gate blocks are stacked in
torch.nn's order, (g_i, g_f, c_tilde, g_o) and (g_r, g_u, h_tilde); `chapter_parameters`
names them as the chapter does (W_fh, W_fx, b_f, ...). The GRU's update gate follows the
chapter (g_u near 1 updates the state); torch.nn.GRU's z is 1 - g_u.
"""

import torch
from torch import nn

from seqlib import fastpath
from seqlib.rnn import RNN, Cell, Recurrent


class LSTMCell(Cell):
    """The LSTM unit, equations (7.16)-(7.17), on a state (h, c) of two (B, m~) tensors:

        g_f = S_Sig(W_fh h + W_fx x + b_f), and g_i, g_o alike (W_ih, ..., b_o)   (7.17)
        c_tilde = S_Tanh(W_c~h h + W_c~x x + b_c~)                               (7.16)
        c = g_f * c + g_i * c_tilde,   h = g_o * S_Tanh(c)                       (7.16)
    """

    gates = 4
    blocks = ("i", "f", "c~", "o")  # the chapter's W_ih, W_fh, W_c~h, W_oh, ... in order

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__(input_size, hidden_size)
        self.reset_parameters()

    def neurons(self, x: torch.Tensor, state: tuple) -> dict:
        """One step, as the chapter writes it, one affine map per gate; returns its six
        groups of m~ neurons: the gates of (7.17), c_tilde, and c and h of (7.16)."""
        h, c = state
        g_i = torch.sigmoid(self.block(0, x, h))  # input gate: how much news to write
        g_f = torch.sigmoid(self.block(1, x, h))  # forget gate: how much memory to keep
        c_tilde = torch.tanh(self.block(2, x, h))  # internal cell state (the candidate)
        g_o = torch.sigmoid(self.block(3, x, h))  # output gate: how much memory to show
        h, c = self.combine(g_i, g_f, c_tilde, g_o, c)
        return {"g_f": g_f, "g_i": g_i, "g_o": g_o, "c_tilde": c_tilde, "c": c, "h": h}

    def forward(self, x: torch.Tensor, state: tuple) -> tuple:
        """One step of (7.16)-(7.17) from x (B, p) and (h, c); returns the new (h, c)."""
        n = self.neurons(x, state)
        return n["h"], n["c"]

    step = forward

    @staticmethod
    def combine(g_i, g_f, c_tilde, g_o, c):
        """(7.16): c = g_f * c + g_i * c_tilde, h = g_o * S_Tanh(c)."""
        c = torch.addcmul(g_f * c, g_i, c_tilde)
        return g_o * torch.tanh(c), c

    def fused_step(self, u: torch.Tensor, state: tuple) -> tuple:
        """The same step from u = W_hx x + b_h (precomputed) with one product for 4 gates."""
        h, c = state
        z = torch.addmm(u, h, self.W_hh.T)  # (B, 4 m): u + h W_hh^T in one call
        i, f, g, o = z.chunk(4, dim=-1)
        return self.combine(torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g),
                            torch.sigmoid(o), c)

    def fast_scan(self, x: torch.Tensor, state: tuple):
        """All steps of a time-major x (T, B, p), backward pass by hand (seqlib.fastpath)."""
        H, h, c = fastpath.LSTMScan.apply(x, *state, self.W_hx, self.W_hh, self.b_h)
        return H, (h, c)


class GRUCell(Cell):
    """The GRU unit, (7.18)-(7.19), on a state h (B, m~):

        g_r, g_u = S_Sig(W_rh h + W_rx x + b_r), S_Sig(W_uh h + W_ux x + b_u)   (7.19)
        h_tilde = S_Tanh(W_h~h (g_r * h) + W_h~x x + b_h~)                      (7.18)
        h = (1 - g_u) * h + g_u * h_tilde                                       (7.18)

    `reset_after=True` applies the reset gate after the product, with a bias b_hn, as PyTorch
    and cuDNN do: h_tilde = tanh(W_h~x x + b_h~ + g_r * (W_h~h h + b_hn)).
    """

    gates = 3
    blocks = ("r", "u", "h~")  # the chapter's W_rh, W_uh, W_h~h, ... in order

    def __init__(self, input_size: int, hidden_size: int, reset_after: bool = False):
        super().__init__(input_size, hidden_size)
        self.reset_after = bool(reset_after)
        if reset_after:
            self.b_hn = nn.Parameter(torch.empty(hidden_size))
        self.reset_parameters()

    def neurons(self, x: torch.Tensor, h: torch.Tensor) -> dict:
        """One step, as the chapter writes it, one affine map per gate; returns its four
        groups of m~ neurons: the gates of (7.19), h_tilde and h of (7.18)."""
        g_r = torch.sigmoid(self.block(0, x, h))  # reset gate
        g_u = torch.sigmoid(self.block(1, x, h))  # update gate
        if self.reset_after:  # PyTorch/cuDNN form
            m = self.hidden_size
            recurrent = h @ self.W_hh[2 * m:].T + self.b_hn
            h_tilde = torch.tanh(x @ self.W_hx[2 * m:].T + self.b_h[2 * m:] + g_r * recurrent)
        else:  # the chapter's form: reset before the product
            h_tilde = torch.tanh(self.block(2, x, g_r * h))  # internal hidden state
        h = (1 - g_u) * h + g_u * h_tilde  # (7.18): g_u near 1 updates
        return {"g_r": g_r, "g_u": g_u, "h_tilde": h_tilde, "h": h}

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """One step of (7.18)-(7.19) from x (B, p) and h (B, m~); returns the new h."""
        return self.neurons(x, h)["h"]

    def step(self, x, state):
        return (self(x, state[0]),)

    def fused_step(self, u: torch.Tensor, state: tuple) -> tuple:
        """The same step from u = W_hx x + b_h (precomputed), gates fused."""
        (h,) = state
        m = self.hidden_size
        if self.reset_after:  # all three recurrent products in one
            hr, hu, hn = (h @ self.W_hh.T).chunk(3, dim=-1)  # one product for 3 gates
            g_r, g_u = torch.sigmoid(u[:, :m] + hr), torch.sigmoid(u[:, m:2 * m] + hu)
            h_tilde = torch.tanh(u[:, 2 * m:] + g_r * (hn + self.b_hn))
        else:  # the reset gate must be known before the candidate's product
            gates = torch.sigmoid(torch.addmm(u[:, :2 * m], h, self.W_hh[:2 * m].T))
            g_r, g_u = gates.chunk(2, dim=-1)
            h_tilde = torch.tanh(torch.addmm(u[:, 2 * m:], g_r * h, self.W_hh[2 * m:].T))
        return (torch.lerp(h, h_tilde, g_u),)  # (1 - g_u) h + g_u h_tilde in one call

    def fast_scan(self, x: torch.Tensor, state: tuple):
        """All steps of a time-major x (T, B, p), backward pass by hand (seqlib.fastpath)."""
        if self.reset_after:
            H, h = fastpath.GRUResetAfterScan.apply(x, state[0], self.W_hx, self.W_hh,
                                                     self.b_h, self.b_hn)
        else:
            H, h = fastpath.GRUScan.apply(x, state[0], self.W_hx, self.W_hh, self.b_h)
        return H, (h,)

    def torch_signs(self) -> torch.Tensor:
        """(3 m,) signs to torch.nn.GRU's rows: -1 on the update gate's (z = 1 - g_u)."""
        m = self.hidden_size
        signs = torch.ones(3 * m, dtype=self.W_hh.dtype, device=self.W_hh.device)
        signs[m:2 * m] = -1
        return signs

    def load_torch(self, w_ih, w_hh, b_ih, b_hh) -> None:
        """torch.nn.GRU keeps b_hn apart (it is multiplied by the reset gate) and its update
        gate is z = 1 - g_u: the rows of that gate are negated (`torch_signs`)."""
        if not self.reset_after:
            raise ValueError("torch.nn.GRU applies the reset gate after the product: "
                             "load it into a GRU with reset_after=True")
        m = self.hidden_size
        if b_ih is None:
            b_ih = b_hh = torch.zeros_like(self.b_h)
        signs = self.torch_signs()
        summed = torch.cat([b_ih[:2 * m] + b_hh[:2 * m], b_ih[2 * m:]])
        super().load_torch(signs[:, None] * w_ih, signs[:, None] * w_hh, signs * summed,
                           torch.zeros_like(summed))
        with torch.no_grad():
            self.b_hn.copy_(b_hh[2 * m:])


def chapter_parameters(cell: Cell) -> dict:
    """The chapter's matrices and vectors of an LSTMCell or GRUCell, views of its blocks:
    W_ih, W_ix, b_i, ... of (7.16)-(7.17), or W_rh, ..., b_h~ of (7.18)-(7.19)."""
    if not isinstance(cell, LSTMCell | GRUCell):
        raise TypeError(f"cell must be an LSTMCell or a GRUCell, got {type(cell).__name__}")
    m, named = cell.hidden_size, {}
    for k, s in enumerate(cell.blocks):
        rows = slice(k * m, (k + 1) * m)  # block k: rows k m .. (k + 1) m - 1
        named |= {f"W_{s}h": cell.W_hh[rows], f"W_{s}x": cell.W_hx[rows], f"b_{s}": cell.b_h[rows]}
    return named


class LSTM(Recurrent):
    """LSTM over (B, T, p) -> output (B, T, D m~) and (h, c), as torch.nn.LSTM(batch_first=True)
    does; with `output_size` q, (B, T, q) logits W_yh h + b_y."""

    cell_class = LSTMCell
    state_count = 2
    torch_name = "LSTM"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bidirectional: bool = False, *, output_size: int | None = None,
                 fast: bool = True):
        super().__init__(input_size, hidden_size, num_layers, bidirectional, fast,
                         output_size=output_size)

    def forward(self, x: torch.Tensor, state: tuple | None = None):
        if state is not None and (not isinstance(state, tuple) or len(state) != 2):
            raise TypeError("the LSTM's state is a tuple (h0, c0), as for torch.nn.LSTM")
        H, state = self.recur(x, state)
        return self.outputs(H), state


class GRU(Recurrent):
    """GRU over (B, T, p) -> output (B, T, D m~) and h, as torch.nn.GRU(batch_first=True)
    does; with `output_size` q, (B, T, q) logits W_yh h + b_y."""

    cell_class = GRUCell
    torch_name = "GRU"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bidirectional: bool = False, reset_after: bool = False, *,
                 output_size: int | None = None, fast: bool = True):
        super().__init__(input_size, hidden_size, num_layers, bidirectional, fast,
                         output_size=output_size, reset_after=reset_after)
        self.reset_after = reset_after

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None):
        H, (h,) = self.recur(x, None if h0 is None else (h0,))
        return self.outputs(H), h

    @classmethod
    def from_torch(cls, gru: nn.GRU, **options) -> "GRU":
        """A seqlib GRU, in PyTorch's form (reset_after=True), with the weights of `gru`."""
        return super().from_torch(gru, reset_after=True, **options)


UNITS = {"rnn": RNN, "lstm": LSTM, "gru": GRU}  # the recurrent units by name


def make_unit(unit: str, input_size: int, hidden_size: int, **options) -> Recurrent:
    """seqlib.RNN, LSTM or GRU by name, "rnn", "lstm" or "gru", with Recurrent's options."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {sorted(UNITS)}, got {unit!r}")
    return UNITS[unit](input_size, hidden_size, **options)
