"""The basic recurrent neural network of Section 7.2 (Elman, 1990): the state
h^<t> = f(h^<t-1>, x^<t>) from h^<0> = 0, (7.1), with the unit (7.2) as f:

    h^<t> = S_h(W_hh h^<t-1> + W_hx x^<t> + b_h)          state, m neurons
    y_hat^<t> = S_y(W_yh h^<t> + b_y)                      output, q values

With output feedback (7.3), the previous output joins the input before W_hx:

    h^<t> = S_h(W_hh h^<t-1> + W_hx (x^<t> + T(y_hat^<t-1>)) + b_h),

where T maps y_hat (q values) to p dimensions (the identity when p = q). `feedback="matrix"`
feeds W_hy y_hat^<t-1> instead, (7.3) with T(y) = A y when W_hy = W_hx A. S_y, the softmax,
is left to the loss: `forward` returns the logits W_yh h^<t> + b_y.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from seqlib import fastpath
from seqlib.checks import check_mask, check_sequence, check_state, model_dtype, positive_int

ACTIVATIONS = {
    "tanh": torch.tanh,
    "relu": torch.relu,
    "identity": torch.positive,  # returns its input: the linear RNN of (7.12)
}


class Cell(nn.Module):
    """What every recurrent unit shares: G gate blocks stacked in W_hx (G m, p), W_hh (G m, m)
    and b_h (G m), a state tuple ((h,), or (h, c) for the LSTM) and two paths with the same
    results: the textbook `step`, one product per gate; the fast `fast_scan`, the input terms
    of all steps in one product, fused gates and BPTT by hand (seqlib.fastpath).
    """

    gates = 1

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.input_size = positive_int("input_size", input_size)
        self.hidden_size = positive_int("hidden_size", hidden_size)
        G, m = self.gates, hidden_size
        self.W_hh = nn.Parameter(torch.empty(G * m, m))
        self.W_hx = nn.Parameter(torch.empty(G * m, input_size))
        self.b_h = nn.Parameter(torch.empty(G * m))

    def reset_parameters(self) -> None:
        """Uniform(-1/sqrt(m), 1/sqrt(m)), torch.nn's initialisation of recurrent layers."""
        bound = 1 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def block(self, k: int, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """The affine map of gate k alone: W_hx[k] x + W_hh[k] h + b_h[k] (textbook path)."""
        rows = slice(k * self.hidden_size, (k + 1) * self.hidden_size)
        return x @ self.W_hx[rows].T + h @ self.W_hh[rows].T + self.b_h[rows]

    def input_projection(self, x: torch.Tensor) -> torch.Tensor:
        """W_hx x^<t> + b_h for every step at once: (..., p) -> (..., G m), one product."""
        return F.linear(x, self.W_hx, self.b_h)

    def scan(self, x: torch.Tensor, state: tuple, fast: bool = True,
             mask: torch.Tensor | None = None, reverse: bool = False):
        """Run the unit over x (B, T, p) from `state`; return states h (B, T, m), last state.
        The fast path runs `fast_scan` on the time-major x; the textbook path calls `step`,
        the equations as written, at every step. With `mask` (B, T), bool, the state is held
        at the steps where it is False (padding); `reverse` runs the steps from the last."""
        if fast and mask is None:
            H, state = self.fast_scan(x.transpose(0, 1).contiguous(), state)  # x (T, B, p)
            return H.transpose(0, 1), state  # (B, T, m)
        step, inputs = ((self.fused_step, self.input_projection(x).unbind(1)) if fast else
                        (self.step, x.unbind(1)))  # unbind: indexing is quadratic in backward
        hs = [None] * len(inputs)
        for t in reversed(range(len(inputs))) if reverse else range(len(inputs)):
            new = step(inputs[t], state)
            state = new if mask is None else tuple(  # update real steps, hold padded ones
                torch.where(mask[:, t, None], n, s) for n, s in zip(new, state, strict=True))
            hs[t] = state[0]
        return torch.stack(hs, dim=1), state

    def fast_scan(self, x: torch.Tensor, state: tuple):
        """The fast path over a time-major x (T, B, p) -> (T, B, m), by autograd."""
        hs = []
        for u in self.input_projection(x).unbind(0):
            state = self.fused_step(u, state)
            hs.append(state[0])
        return torch.stack(hs), state

    def load_torch(self, w_ih, w_hh, b_ih, b_hh) -> None:
        """Copy one layer and direction of the torch.nn module; b_h = b_ih + b_hh."""
        with torch.no_grad():
            self.W_hx.copy_(w_ih)
            self.W_hh.copy_(w_hh)
            self.b_h.copy_(b_ih + b_hh if b_ih is not None else torch.zeros_like(self.b_h))


class RNNCell(Cell):
    """The basic recurrent unit of Fig. 7.4, equation (7.2): one step of the recurrence."""

    def __init__(self, input_size: int, hidden_size: int, nonlinearity: str = "tanh"):
        super().__init__(input_size, hidden_size)
        if nonlinearity not in ACTIVATIONS:
            raise ValueError(f"nonlinearity must be one of {sorted(ACTIVATIONS)}, "
                             f"got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        self.S_h = ACTIVATIONS[nonlinearity]
        self.reset_parameters()

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """h^<t> = S_h(W_hh h^<t-1> + W_hx x^<t> + b_h); x is (B, p), h is (B, m)."""
        return self.S_h(h @ self.W_hh.T + x @ self.W_hx.T + self.b_h)

    def step(self, x, state):
        return (self(x, state[0]),)

    def fused_step(self, u, state):
        return (self.S_h(torch.addmm(u, state[0], self.W_hh.T)),)

    def fast_scan(self, x, state):
        if self.nonlinearity not in fastpath.RNNScan.slopes:  # no hand-written backward
            return super().fast_scan(x, state)
        H, h = fastpath.RNNScan.apply(x, state[0], self.W_hx, self.W_hh, self.b_h,
                                      self.nonlinearity)
        return H, (h,)


def cell_name(layer: int, direction: int) -> str:
    """cell, cell_reverse, cell_l1, cell_l1_reverse, ...: torch.nn's l0/l1/_reverse naming."""
    return ("cell" if layer == 0 else f"cell_l{layer}") + ("_reverse" if direction else "")


class Recurrent(nn.Module):
    """Reversing (7.14) and stacking (7.15), written once for any unit, and combined.

    (7.14): a forward and a reverse unit, concatenated [h_f^<t>; h_r^<t>] (2 m features);
    (7.15): layer l > 1 reads h^<t>_[l-1] (for the LSTM only h goes up, not c). States are
    shaped like torch.nn's: (num_layers * D, B, m), D = 2 if bidirectional else 1.
    """

    cell_class = RNNCell
    state_count = 1  # 2 for the LSTM: (h, c)

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bidirectional: bool = False, fast: bool = True, *,
                 output_size: int | None = None, **cell_options):
        super().__init__()
        self.input_size = positive_int("input_size", input_size)
        self.hidden_size = positive_int("hidden_size", hidden_size)
        self.num_layers = positive_int("num_layers", num_layers)
        self.bidirectional, self.fast = bool(bidirectional), bool(fast)
        self.directions = 2 if bidirectional else 1
        for layer in range(num_layers):
            size = input_size if layer == 0 else self.directions * hidden_size
            for direction in range(self.directions):
                cell = self.cell_class(size, hidden_size, **cell_options)
                self.add_module(cell_name(layer, direction), cell)
        # The output layer of (7.2), y_hat = S_y(W_yh h + b_y), on the top layer's states;
        # S_y (the softmax) is left to the loss.
        self.output_size = output_size
        if output_size is not None:
            features = self.directions * hidden_size
            bound = 1 / math.sqrt(features)  # torch.nn.Linear's initialisation
            positive_int("output_size", output_size)
            self.W_yh = nn.Parameter(torch.empty(output_size, features).uniform_(-bound, bound))
            self.b_y = nn.Parameter(torch.empty(output_size).uniform_(-bound, bound))

    def output(self, h: torch.Tensor) -> torch.Tensor:
        """The output layer: logits W_yh h^<t> + b_y for states h of shape (..., D m)."""
        if self.output_size is None:
            raise ValueError("this model has no output layer: construct it with output_size")
        return h @ self.W_yh.T + self.b_y

    def outputs(self, H: torch.Tensor) -> torch.Tensor:
        """What forward returns per step: the logits with an output layer, else the states."""
        return H if self.output_size is None else self.output(H)

    @property
    def cells(self) -> list[Cell]:
        """The units, layer by layer, forward direction first."""
        return [getattr(self, cell_name(layer, d))
                for layer in range(self.num_layers) for d in range(self.directions)]

    def zero_state(self, batch_size: int, like: torch.Tensor) -> tuple:
        """Zeros: state_count tensors (L D, B, m), like `like`."""
        shape = (self.num_layers * self.directions, batch_size, self.hidden_size)
        return tuple(like.new_zeros(shape) for _ in range(self.state_count))

    def initial_state(self, batch_size: int, like: torch.Tensor):
        """`zero_state` in the form forward takes and returns: h0 (L D, B, m), or (h0, c0)."""
        state = self.zero_state(batch_size, like)
        return state if self.state_count > 1 else state[0]

    def recur(self, x: torch.Tensor, state: tuple | None = None,
              mask: torch.Tensor | None = None):
        """All layers and directions over x (B, T, p). `state`: a tuple of state_count
        tensors (L D, B, m), zeros by default. Returns output (B, T, D m), last states.

        With `mask` (B, T), bool, True at the real steps of a right-padded batch, every
        state is held at the padded steps: each direction ends on the state after the
        sentence's last real token (the reverse one starts there), and the outputs and last
        states are those of each sentence alone (padded steps repeat the held state)."""
        check_sequence(x, self.input_size, dtype=model_dtype(self))
        shape = (self.num_layers * self.directions, x.shape[0], self.hidden_size)
        if state is None:
            state = self.zero_state(x.shape[0], x)
        names = ("h0", "c0")
        for name, s in zip(names, state, strict=False):
            check_state(s, shape, name, x)
        if mask is not None:
            check_mask(mask, x.shape[:2])
        layer_input, finals = x, []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self.directions):
                k = layer * self.directions + direction
                cell, start = self.cells[k], tuple(s[k] for s in state)
                if mask is None:
                    seq = layer_input.flip(1) if direction else layer_input  # (7.14): reversed
                    hs, last = cell.scan(seq, start, self.fast)
                    hs = hs.flip(1) if direction else hs
                else:  # the reverse unit starts at each sentence's last real token
                    hs, last = cell.scan(layer_input, start, self.fast, mask, bool(direction))
                outputs.append(hs)
                finals.append(last)
            layer_input = torch.cat(outputs, dim=-1)  # (B, T, D m): feeds layer l + 1
        last = tuple(torch.stack([f[i] for f in finals]) for i in range(self.state_count))
        return layer_input, last

    @classmethod
    def from_torch(cls, module: nn.Module, **options):
        """A seqlib module carrying the weights of the same torch.nn recurrent module."""
        expected = {"RNN": nn.RNN, "LSTM": nn.LSTM, "GRU": nn.GRU}[cls.torch_name]
        if not isinstance(module, expected):
            raise TypeError(f"expected a torch.nn.{cls.torch_name}, got {type(module).__name__}")
        if getattr(module, "proj_size", 0):
            raise ValueError("LSTM projections (proj_size > 0) are not in the chapter")
        model = cls(module.input_size, module.hidden_size, num_layers=module.num_layers,
                    bidirectional=module.bidirectional, **options)
        w = module.weight_hh_l0
        model = model.to(dtype=w.dtype, device=w.device)
        for layer in range(module.num_layers):
            for direction in range(model.directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                bias = [getattr(module, f"bias_{k}{suffix}", None) for k in ("ih", "hh")]
                model.cells[layer * model.directions + direction].load_torch(
                    getattr(module, f"weight_ih{suffix}"), getattr(module, f"weight_hh{suffix}"),
                    *bias)
        return model


class RNN(Recurrent):
    """Basic RNN: the recursion (7.1) of the unit (7.2), with output feedback (7.3), stacked
    (7.15) and bidirectional (7.14) when asked. `RNN(8, 20, 8)` has the chapter's 748
    parameters. With `output_feedback=True`, T is `feedback_map`, (B, q) -> (B, p), by
    default the identity (needs p == q).
    """

    torch_name = "RNN"
    feedback_forms = ("input", "matrix")

    def __init__(self, input_size: int, hidden_size: int, output_size: int | None = None, *,
                 num_layers: int = 1, bidirectional: bool = False,
                 output_feedback: bool = False, feedback: str = "input", feedback_map=None,
                 nonlinearity: str = "tanh", fast: bool = True):
        super().__init__(input_size, hidden_size, num_layers, bidirectional, fast,
                         output_size=output_size, nonlinearity=nonlinearity)
        if feedback not in self.feedback_forms:
            raise ValueError(f"feedback must be one of {self.feedback_forms}, got {feedback!r}")
        if not output_feedback and (feedback != "input" or feedback_map is not None):
            raise ValueError("feedback and feedback_map describe output feedback (7.3): "
                             "set output_feedback=True")
        if output_feedback and output_size is None:
            raise ValueError("output_feedback=True (7.3) needs an output layer: set output_size")
        if output_feedback and (num_layers > 1 or bidirectional):
            raise ValueError("output_feedback=True (7.3) is defined for one unidirectional layer")
        self.output_feedback, self.feedback = bool(output_feedback), feedback
        if not output_feedback:
            return
        if feedback == "matrix":
            if feedback_map is not None:
                raise ValueError("feedback_map (the T of (7.3)) is used with feedback='input' "
                                 "only; feedback='matrix' feeds y_hat through W_hy")
            bound = 1 / math.sqrt(hidden_size)
            self.W_hy = nn.Parameter(torch.empty(hidden_size, output_size).uniform_(-bound, bound))
            return
        if feedback_map is None:
            if input_size != output_size:
                raise ValueError(
                    f"output_feedback=True feeds x + T(y_hat) through W_hx (7.3), so T must map "
                    f"the q={output_size} outputs to the p={input_size} inputs: pass "
                    f"feedback_map (the identity is the default only when p == q)")
            feedback_map = nn.Identity()
        if not callable(feedback_map):
            raise TypeError(f"feedback_map must be a callable or nn.Module mapping (B, q) to "
                            f"(B, p), got {type(feedback_map).__name__}")
        self.feedback_map = feedback_map  # the chapter's T; an nn.Module is registered

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None,
                y_prev: torch.Tensor | None = None):
        """x (B, T, p), h0 (L D, B, m) -> logits (B, T, q) (states (B, T, D m) without an
        output layer) and h_n. `y_prev` (B, T, q), with output feedback, is teacher forcing:
        y_prev[:, t-1] is fed back at step t in place of y_hat^<t-1>."""
        if y_prev is not None and not self.output_feedback:
            raise ValueError("y_prev (teacher forcing) needs output_feedback=True (7.3)")
        if self.output_feedback:
            return self._feedback(x, h0, y_prev)
        H, (h_n,) = self.recur(x, None if h0 is None else (h0,))
        return self.outputs(H), h_n

    def recursion(self, x: torch.Tensor) -> torch.Tensor:
        """(7.1) as a plain loop: h^<t> = f(h^<t-1>, x^<t>) from h^<0> = 0, f the unit (7.2),
        one call per step. x (B, T, p) -> the states h^<1>, ..., h^<T> (B, T, m). `forward`
        computes the same states on the fast path (`Cell.scan`)."""
        if self.num_layers > 1 or self.bidirectional or self.output_feedback:
            raise ValueError("recursion is (7.1) for one unidirectional layer without output "
                             "feedback; use forward for the other models")
        check_sequence(x, self.input_size, dtype=model_dtype(self))
        h, states = x.new_zeros(x.shape[0], self.hidden_size), []  # h^<0> = 0
        for x_t in x.unbind(1):  # t = 1, ..., T
            h = self.cell(x_t, h)  # h^<t> = f(h^<t-1>, x^<t>)
            states.append(h)
        return torch.stack(states, dim=1)  # (B, T, m)

    def feedback_step(self, x: torch.Tensor, h: torch.Tensor, y: torch.Tensor):
        """One step with output feedback: x (B, p), h (B, m) and the fed-back output
        y (B, q); returns h^<t> (B, m)."""
        cell = self.cell
        if self.feedback == "matrix":  # the alternative: W_hy y_hat^<t-1>
            return cell.S_h(h @ cell.W_hh.T + x @ cell.W_hx.T + y @ self.W_hy.T + cell.b_h)
        fed = self.feedback_map(y)  # T(y_hat^<t-1>), (B, q) -> (B, p)
        if not isinstance(fed, torch.Tensor) or fed.shape != x.shape:
            got = tuple(fed.shape) if isinstance(fed, torch.Tensor) else type(fed).__name__
            raise ValueError(f"feedback_map (T of (7.3)) returned {got}, expected a tensor "
                             f"of shape {tuple(x.shape)} (batch, p)")
        return cell(x + fed, h)  # (7.3): x^<t> + T(y_hat^<t-1>) goes through W_hx

    def _feedback(self, x, h0, y_prev):
        """The recurrence with output feedback (7.3), one step at a time."""
        check_sequence(x, self.input_size, dtype=model_dtype(self))
        B = x.shape[0]
        if y_prev is not None and tuple(y_prev.shape) != (*x.shape[:2], self.output_size):
            raise ValueError(f"y_prev has shape {tuple(y_prev.shape)}, expected "
                             f"{(*x.shape[:2], self.output_size)} (batch, time, q)")
        if h0 is None:
            h0 = self.initial_state(B, x)  # (1, B, m): one unidirectional layer
        check_state(h0, (1, B, self.hidden_size), x=x)
        h, y_hat, outputs = h0[0], x.new_zeros(B, self.output_size), []  # y_hat^<0> = 0
        for t, x_t in enumerate(x.unbind(1)):
            h = self.feedback_step(x_t, h, y_prev[:, t] if y_prev is not None else y_hat)
            outputs.append(self.output(h))  # logits W_yh h^<t> + b_y
            y_hat = torch.softmax(outputs[-1], dim=-1)  # S_y: y_hat^<t>, fed back at t + 1
        return torch.stack(outputs, dim=1), h.unsqueeze(0)  # (B, T, q), (1, B, m)

    @classmethod
    def from_torch(cls, rnn: nn.RNN, linear: nn.Linear | None = None) -> "RNN":
        """A seqlib RNN with the weights of a torch.nn.RNN (and an output nn.Linear)."""
        if not isinstance(rnn, nn.RNN):
            raise TypeError(f"rnn must be a torch.nn.RNN, got {type(rnn).__name__}")
        features = rnn.hidden_size * (2 if rnn.bidirectional else 1)
        if linear is not None and linear.in_features != features:
            raise ValueError(f"linear.in_features={linear.in_features}, expected {features}")
        model = super().from_torch(rnn, nonlinearity=rnn.nonlinearity,
                                   output_size=None if linear is None else linear.out_features)
        if linear is not None:
            with torch.no_grad():
                model.W_yh.copy_(linear.weight)
                model.b_y.copy_(linear.bias if linear.bias is not None else 0.0)
        return model
