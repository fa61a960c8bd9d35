"""The basic recurrent neural network of Section 7.2 (Elman, 1990).

The unit, equation (7.2), maps the previous state and the current input to a new state,
and the output layer maps the state to an output:

    h^<t> = S_h(W_hh h^<t-1> + W_hx x^<t> + b_h)          hidden state, m units
    y_hat^<t> = S_y(W_yh h^<t> + b_y)                      output, q values

With output feedback, equation (7.3), the previous output enters the recurrence too:
h^<t> = S_h(W_hh h^<t-1> + W_hx x^<t> + W_hy y_hat^<t-1> + b_h), with y_hat^<0> = 0.

S_y is the softmax. `forward` returns the logits W_yh h^<t> + b_y, and the softmax lives
inside torch.nn.functional.cross_entropy, as in torch.nn; what is fed back in (7.3) is the
probability vector y_hat^<t-1> = softmax(logits^<t-1>), or, with teacher forcing, the
one-hot vector of the true previous output.
"""

import math

import torch
from torch import nn

ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}


def check_sequence(x: torch.Tensor, input_size: int, name: str = "x") -> None:
    """Raise a clear error unless `x` is a float (batch, time, input_size) tensor, T >= 1."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(
            f"{name} must hold floats (one-hot or embedded tokens), got dtype {x.dtype}; "
            "encode token ids with seqlib.text.one_hot or an nn.Embedding first"
        )
    if x.dim() != 3:
        raise ValueError(
            f"{name} must have 3 dimensions (batch, time, features), got shape {tuple(x.shape)}"
        )
    if x.shape[-1] != input_size:
        raise ValueError(
            f"{name} has {x.shape[-1]} features per step, expected input_size={input_size}"
        )
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} has an empty batch or sequence: shape {tuple(x.shape)}")


def check_state(h0: torch.Tensor, expected: tuple, name: str = "h0") -> None:
    """Raise a clear error unless the initial state `h0` has the `expected` shape."""
    if not isinstance(h0, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(h0).__name__}")
    if tuple(h0.shape) != tuple(expected):
        raise ValueError(f"{name} has shape {tuple(h0.shape)}, expected {tuple(expected)}")


class RNNCell(nn.Module):
    """The basic recurrent unit of Fig. 7.4, equation (7.2): one step of the recurrence."""

    def __init__(self, input_size: int, hidden_size: int, nonlinearity: str = "tanh"):
        super().__init__()
        for arg, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{arg} must be a positive int, got {value!r}")
        if nonlinearity not in ACTIVATIONS:
            raise ValueError(
                f"nonlinearity must be one of {sorted(ACTIVATIONS)}, got {nonlinearity!r}"
            )
        self.input_size, self.hidden_size, self.nonlinearity = input_size, hidden_size, nonlinearity
        self.S_h = ACTIVATIONS[nonlinearity]
        self.W_hh = nn.Parameter(torch.empty(hidden_size, hidden_size))
        self.W_hx = nn.Parameter(torch.empty(hidden_size, input_size))
        self.b_h = nn.Parameter(torch.empty(hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform(-1/sqrt(m), 1/sqrt(m)), torch.nn.RNN's initialisation."""
        bound = 1 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """h^<t> = S_h(W_hh h^<t-1> + W_hx x^<t> + b_h); x is (B, p), h is (B, m)."""
        return self.S_h(h @ self.W_hh.T + x @ self.W_hx.T + self.b_h)


class RNN(nn.Module):
    """Basic RNN over a (batch, time, features) sequence, equations (7.1)-(7.3).

    With `output_size` set, the output layer (W_yh, b_y) is applied at every step and
    `forward` returns the outputs y_hat (B, T, q); without it, the hidden states (B, T, m),
    as torch.nn.RNN does. Either way the last state h^<T> comes second, shaped (1, B, m)
    like torch.nn.RNN's h_n. `RNN(8, 20, 8)` has the chapter's 748 parameters.
    """

    def __init__(self, input_size: int, hidden_size: int, output_size: int | None = None, *,
                 output_feedback: bool = False, nonlinearity: str = "tanh"):
        super().__init__()
        if output_size is not None and (not isinstance(output_size, int) or output_size < 1):
            raise ValueError(f"output_size must be a positive int or None, got {output_size!r}")
        if output_feedback and output_size is None:
            raise ValueError("output_feedback=True (7.3) needs an output layer: set output_size")
        self.input_size, self.hidden_size, self.output_size = input_size, hidden_size, output_size
        self.output_feedback = output_feedback
        self.cell = RNNCell(input_size, hidden_size, nonlinearity)
        if output_size is not None:
            bound = 1 / math.sqrt(hidden_size)  # torch.nn.Linear's initialisation
            self.W_yh = nn.Parameter(torch.empty(output_size, hidden_size).uniform_(-bound, bound))
            self.b_y = nn.Parameter(torch.empty(output_size).uniform_(-bound, bound))
        if output_feedback:
            self.W_hy = nn.Parameter(torch.empty(hidden_size, output_size).uniform_(-bound, bound))

    def output(self, h: torch.Tensor) -> torch.Tensor:
        """The output layer: logits W_yh h^<t> + b_y for states h of shape (..., m)."""
        return h @ self.W_yh.T + self.b_y

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None,
                y_prev: torch.Tensor | None = None):
        """Run the recurrence over x (B, T, p) from h0 (1, B, m), zeros by default.

        Returns (outputs, h_n): outputs (B, T, q) logits, or (B, T, m) states when there is
        no output layer, and h_n (1, B, m) the state after the last step.

        With output feedback, `y_prev` (B, T, q) is teacher forcing: y_prev[:, t] is fed
        back in place of the model's own y_hat^<t-1> (typically the one-hot true output
        of the step before, zeros at t = 0).
        """
        check_sequence(x, self.input_size)
        if y_prev is not None:
            if not self.output_feedback:
                raise ValueError("y_prev (teacher forcing) needs output_feedback=True (7.3)")
            if tuple(y_prev.shape) != (*x.shape[:2], self.output_size):
                raise ValueError(f"y_prev has shape {tuple(y_prev.shape)}, expected "
                                 f"{(*x.shape[:2], self.output_size)} (batch, time, q)")
        B = x.shape[0]
        if h0 is None:
            h = x.new_zeros(B, self.hidden_size)
        else:
            check_state(h0, (1, B, self.hidden_size))
            h = h0[0]
        cell = self.cell
        # The input projection does not depend on h: compute it for every step at once.
        xw = x @ cell.W_hx.T + cell.b_h  # (B, T, m)
        states, outputs = [], []
        y_hat = x.new_zeros(B, self.output_size) if self.output_feedback else None
        fed = y_prev.unbind(1) if y_prev is not None else None
        for t, xw_t in enumerate(xw.unbind(1)):  # unbind, not indexing: quadratic backward
            pre = xw_t + h @ cell.W_hh.T
            if self.output_feedback:  # (7.3): the previous output feeds back
                pre = pre + (fed[t] if fed is not None else y_hat) @ self.W_hy.T
            h = cell.S_h(pre)
            states.append(h)
            if self.output_feedback:
                outputs.append(self.output(h))
                y_hat = torch.softmax(outputs[-1], dim=-1)  # S_y
        H = torch.stack(states, dim=1)  # (B, T, m)
        if self.output_feedback:
            Y = torch.stack(outputs, dim=1)  # (B, T, q)
        else:
            Y = self.output(H) if self.output_size is not None else H
        return Y, h.unsqueeze(0)

    @classmethod
    def from_torch(cls, rnn: nn.RNN, linear: nn.Linear | None = None) -> "RNN":
        """A seqlib RNN carrying the weights of a one-layer torch.nn.RNN (and output Linear).

        torch.nn.RNN has two bias vectors, b_ih and b_hh, that always appear summed:
        b_h = b_ih + b_hh. Outputs agree; the gradient of b_h equals that of each of them.
        """
        if not isinstance(rnn, nn.RNN):
            raise TypeError(f"rnn must be a torch.nn.RNN, got {type(rnn).__name__}")
        if rnn.num_layers != 1 or rnn.bidirectional:
            raise ValueError(
                f"expected a one-layer unidirectional torch.nn.RNN, got num_layers="
                f"{rnn.num_layers}, bidirectional={rnn.bidirectional}"
            )
        if linear is not None and linear.in_features != rnn.hidden_size:
            raise ValueError(
                f"linear.in_features={linear.in_features}, expected hidden_size={rnn.hidden_size}"
            )
        out = None if linear is None else linear.out_features
        model = cls(rnn.input_size, rnn.hidden_size, out, nonlinearity=rnn.nonlinearity)
        model = model.to(dtype=rnn.weight_hh_l0.dtype, device=rnn.weight_hh_l0.device)
        with torch.no_grad():
            model.cell.W_hh.copy_(rnn.weight_hh_l0)
            model.cell.W_hx.copy_(rnn.weight_ih_l0)
            model.cell.b_h.copy_(rnn.bias_ih_l0 + rnn.bias_hh_l0 if rnn.bias else 0.0)
            if linear is not None:
                model.W_yh.copy_(linear.weight)
                model.b_y.copy_(linear.bias if linear.bias is not None else 0.0)
        return model
