"""Backpropagation through time written out, for the basic RNN of (7.2).

The loss (7.4)-(7.5) of a batch of B sequences is the cross-entropy of the outputs averaged
over time and over the batch, C = (1/B) sum_b (1/T) sum_t CE(y^<t>, y_hat^<t>).

The adjoint zeta^<t> = dC/dh^<t> obeys the backward recursion (7.6)

    zeta^<T> = W_yh^T delta^<T>,
    zeta^<t> = W_yh^T delta^<t> + J^<t+1>^T zeta^<t+1>,     t = T-1, ..., 1,

with the output error delta^<t> = dC/d(logits^<t>) = (softmax(logits^<t>) - e_y^<t>) / (B T) and
the Jacobian (7.11) of one step of the recurrence,

    J^<t> = dh^<t>/dh^<t-1> = diag(S_h'(z^<t>)) W_hh,

where z^<t> is the pre-activation. The gradient of each weight sums, over time, the
local error zeta^<t> * S_h'(z^<t>) times what the weight multiplies, (7.9)-(7.10):

    g_W_hh = sum_t (zeta^<t> * S_h'(z^<t>)) h^<t-1>^T,     g_W_hx = ... x^<t>^T,
    g_b_h  = sum_t  zeta^<t> * S_h'(z^<t>),                g_W_yh = sum_t delta^<t> h^<t>^T.

Products of T - t Jacobians carry the loss at time T back to time t: their norm shrinks
or grows geometrically with the spectral radius of W_hh (7.12), the vanishing and
exploding gradients of the chapter.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from seqlib.rnn import RNN, check_sequence, check_state


@dataclass
class BPTTResult:
    """What the explicit backward pass computes."""

    loss: torch.Tensor  # scalar C
    grads: dict[str, torch.Tensor]  # keyed like rnn.named_parameters(), plus "h0"
    zeta: torch.Tensor  # (B, T, m): zeta[:, t-1] = dC/dh^<t>
    h: torch.Tensor  # (B, T+1, m): h[:, t] = h^<t>, h^<0> included


def sequence_loss(logits: torch.Tensor, targets: torch.Tensor, last_only: bool = False,
                  mask: torch.Tensor | None = None):
    """C(theta) of (7.4)-(7.5): the mean over time of the cross-entropies C_t of one
    sequence, C = (1/T) sum_t C_t, averaged over the B sequences of the batch.

    logits (B, T, q), targets (B, T) class ids. With `last_only`, only the loss at the
    last step counts, C = C_T (a many-to-one task). A (B, T) boolean `mask` (True at real
    tokens, as seqlib.text.pad_batch returns) leaves padded steps out: sequence b is
    averaged over its own T_b real steps, exactly its loss alone.
    """
    if targets.shape != logits.shape[:2]:
        raise ValueError(
            f"targets has shape {tuple(targets.shape)}, expected (batch, time) = "
            f"{tuple(logits.shape[:2])}"
        )
    if mask is not None and mask.shape != targets.shape:
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected {tuple(targets.shape)}")
    if last_only:
        logits, targets = logits[:, -1:], targets[:, -1:]
        mask = None if mask is None else mask[:, -1:]
    B, T, q = logits.shape
    C_t = F.cross_entropy(logits.reshape(B * T, q), targets.reshape(B * T),
                          reduction="none").view(B, T)  # (B, T): C_t of (7.5)
    if mask is None:
        return C_t.mean(1).mean()  # (1/T) sum_t, then the mean over the batch
    if not mask.any(1).all():
        raise ValueError("mask leaves a sequence without any real step: its loss (7.4) "
                         "is undefined")
    lengths = mask.sum(1)  # (B,): T_b
    return ((C_t * mask).sum(1) / lengths).mean()


def _activation_derivative(rnn: RNN, h: torch.Tensor) -> torch.Tensor:
    """S_h'(z) written in terms of h = S_h(z): 1 - h^2 for tanh, 1[h > 0] for ReLU."""
    return 1 - h**2 if rnn.cell.nonlinearity == "tanh" else (h > 0).to(h.dtype)


def jacobian(rnn: RNN, h_t: torch.Tensor) -> torch.Tensor:
    """J^<t> = dh^<t>/dh^<t-1> = diag(S_h'(z^<t>)) W_hh, equation (7.11), for states (B, m).

    Returns (B, m, m), one Jacobian per sequence of the batch.
    """
    return _activation_derivative(rnn, h_t).unsqueeze(-1) * rnn.cell.W_hh  # (B, m, m)


def forward_states(rnn: RNN, x: torch.Tensor, h0: torch.Tensor | None = None):
    """The forward pass, storing every state: h (B, T+1, m) with h^<0>, and logits (B, T, q)."""
    if (not isinstance(rnn, RNN) or rnn.output_size is None or rnn.output_feedback
            or len(rnn.cells) > 1):
        raise ValueError("bptt covers the basic one-layer RNN (7.2) with an output layer and "
                         "no feedback")
    check_sequence(x, rnn.input_size)
    B = x.shape[0]
    if h0 is None:
        h0 = x.new_zeros(1, B, rnn.hidden_size)
    check_state(h0, (1, B, rnn.hidden_size))
    states = [h0[0]]
    for x_t in x.unbind(1):
        states.append(rnn.cell(x_t, states[-1]))
    h = torch.stack(states, dim=1)  # (B, T+1, m)
    return h, rnn.output(h[:, 1:])


@torch.no_grad()
def bptt(rnn: RNN, x: torch.Tensor, targets: torch.Tensor, h0: torch.Tensor | None = None, *,
         last_only: bool = False, truncate: int | None = None) -> BPTTResult:
    """Loss, gradients of every parameter and adjoints by the explicit recursion (7.6)-(7.11).

    With `truncate=k`, truncated BPTT: the sequence is cut into chunks of k steps, the
    state is carried from chunk to chunk as a constant, and the term J^T zeta that would
    cross a chunk boundary is dropped.
    """
    if truncate is not None and (not isinstance(truncate, int) or truncate < 1):
        raise ValueError(f"truncate must be a positive int or None, got {truncate!r}")
    h, logits = forward_states(rnn, x, h0)
    B, T, q = logits.shape
    loss = sequence_loss(logits, targets, last_only)
    # dC/d(logits^<t>) of C = (1/B) sum_b (1/T) sum_t C_t: (y_hat - e_y) / (B T)
    delta = (torch.softmax(logits, dim=-1) - F.one_hot(targets, q).to(logits.dtype)) / B
    if last_only:
        delta[:, :-1] = 0  # only the last step is in the loss, C = C_T
    else:
        delta = delta / T
    zeta = torch.zeros_like(h[:, 1:])  # (B, T, m)
    W = rnn.cell.W_hh
    carried = torch.zeros_like(h[:, 0])  # J^<t+1>^T zeta^<t+1>, nothing after T
    for t in range(T, 0, -1):  # t is the chapter's time index, zeta[:, t-1] is zeta^<t>
        zeta[:, t - 1] = delta[:, t - 1] @ rnn.W_yh + carried
        local = zeta[:, t - 1] * _activation_derivative(rnn, h[:, t])  # dC/dz^<t>
        cut = truncate is not None and (t - 1) % truncate == 0 and t > 1
        carried = torch.zeros_like(local) if cut else local @ W  # J^<t>^T zeta^<t>
    local = zeta * _activation_derivative(rnn, h[:, 1:])  # (B, T, m)
    grads = {
        "cell.W_hh": torch.einsum("btm,btn->mn", local, h[:, :-1]),  # (7.9)-(7.10)
        "cell.W_hx": torch.einsum("btm,btp->mp", local, x),
        "cell.b_h": local.sum((0, 1)),
        "W_yh": torch.einsum("btq,btm->qm", delta, h[:, 1:]),
        "b_y": delta.sum((0, 1)),
        "h0": carried.unsqueeze(0),  # dC/dh^<0>, shaped like h0
    }
    return BPTTResult(loss=loss, grads=grads, zeta=zeta, h=h)


def autograd_reference(rnn: RNN, x: torch.Tensor, targets: torch.Tensor,
                       h0: torch.Tensor | None = None, *, last_only: bool = False,
                       truncate: int | None = None) -> dict[str, torch.Tensor]:
    """The same gradients by torch.autograd, to check `bptt` against.

    Truncation is the usual detach() of the carried state at every chunk boundary.
    """
    if h0 is None:
        h0 = x.new_zeros(1, x.shape[0], rnn.hidden_size)
    h0 = h0.detach().clone().requires_grad_(True)
    h, outputs = h0[0], []
    for t, x_t in enumerate(x.unbind(1)):
        if truncate is not None and t > 0 and t % truncate == 0:
            h = h.detach()
        h = rnn.cell(x_t, h)
        outputs.append(h)
    logits = rnn.output(torch.stack(outputs, dim=1))  # (B, T, q)
    loss = sequence_loss(logits, targets, last_only)
    params = dict(rnn.named_parameters())
    grads = torch.autograd.grad(loss, [*params.values(), h0], allow_unused=True)
    return dict(zip([*params, "h0"], grads, strict=True))
