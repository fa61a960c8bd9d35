"""Backpropagation through time written out, for the basic RNN of (7.2), with the loss
(7.4)-(7.5), C = (1/T) sum_t C_t, averaged over the batch. The adjoint zeta^<t> = dC/dh^<t>
obeys the backward recursion of (7.6),

    zeta^<T> = (1/T) Cdot_T(h^<T>),
    zeta^<t> = (1/T) Cdot_t(h^<t>) + (dh^<t+1>/dh^<t>) zeta^<t+1>,     t = T-1, ..., 1,

where Cdot_t(h^<t>) = W_yh^T (y_hat^<t> - y^<t>) and the Jacobian is (7.11). The chapter's
(7.6) places all of (1/T) sum_tau Cdot_tau at t = T: `bptt(..., lumped=True)`, which
coincides when only the last step carries loss. With zeta, the double sum (7.10) of the
terms (7.9) becomes one sum over states tau; (7.13) keeps the terms from T_0 on.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from seqlib.checks import check_sequence, check_state, int_in_range, model_dtype, positive_int
from seqlib.rnn import RNN

# sigma_dot, the derivative of the scalar activation, written in terms of its value h = sigma(z)
SIGMA_DOT = {
    "tanh": lambda h: 1 - h**2,
    "relu": lambda h: (h > 0).to(h.dtype),
    "identity": torch.ones_like,
}


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


def sigma_dot(rnn: RNN, h: torch.Tensor) -> torch.Tensor:
    """sigma_dot(z) of the unit's activation, from the state h = sigma(z) it produced."""
    name = rnn.cell.nonlinearity
    if name not in SIGMA_DOT:
        raise ValueError(f"no derivative known for nonlinearity {name!r}; expected one of "
                         f"{sorted(SIGMA_DOT)}")
    return SIGMA_DOT[name](h)


def jacobian(rnn: RNN, h_next: torch.Tensor) -> torch.Tensor:
    """dh^<t+1>/dh^<t> = W_hh^T diag(sigma_dot(W_hh h^<t> + W_hx x^<t+1> + b_h)), (7.11),
    from the states h^<t+1> (B, m) that the step produced.

    The layout is the one of (7.6), where the Jacobian multiplies the adjoint zeta^<t+1>:
    entry (i, j) is dh_j^<t+1>/dh_i^<t> (the transpose of torch.autograd's Jacobian).
    Returns (B, m, m), one Jacobian per sequence of the batch.
    """
    return rnn.cell.W_hh.T * sigma_dot(rnn, h_next).unsqueeze(-2)  # (B, m, m)


def neuron_derivative(rnn: RNN, h_prev: torch.Tensor, x_t: torch.Tensor, j: int):
    """dh_j^<tau>/dW_hh = sigma_dot([W_hh h^<tau-1> + W_hx x^<tau> + b_h]_j) e_j h^<tau-1>^T,
    the m x m matrix of (7.9), with h^<tau-1> (..., m) held fixed and x^<tau> (..., p).

    Returns (..., m, m): zero except row j.
    """
    m = rnn.hidden_size
    int_in_range("j", j, 0, m - 1, expected=f"a neuron index in 0..{m - 1}")
    cell = rnn.cell
    z = h_prev @ cell.W_hh.T + x_t @ cell.W_hx.T + cell.b_h  # (..., m)
    dh_j = torch.zeros(*z.shape, m, dtype=z.dtype, device=z.device)  # (..., m, m)
    dh_j[..., j, :] = sigma_dot(rnn, cell.S_h(z))[..., j, None] * h_prev  # row j
    return dh_j


def forward_states(rnn: RNN, x: torch.Tensor, h0: torch.Tensor | None = None):
    """The forward pass, storing every state: h (B, T+1, m) with h^<0>, and logits (B, T, q)."""
    if (not isinstance(rnn, RNN) or rnn.output_size is None or rnn.output_feedback
            or len(rnn.cells) > 1):
        raise ValueError("bptt covers the basic one-layer RNN (7.2) with an output layer and "
                         "no feedback")
    check_sequence(x, rnn.input_size, dtype=model_dtype(rnn))
    B = x.shape[0]
    if h0 is None:
        h0 = x.new_zeros(1, B, rnn.hidden_size)
    check_state(h0, (1, B, rnn.hidden_size))
    states = [h0[0]]
    for x_t in x.unbind(1):
        states.append(rnn.cell(x_t, states[-1]))
    h = torch.stack(states, dim=1)  # (B, T+1, m)
    return h, rnn.output(h[:, 1:])


def output_error(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """dC_t/d(logits^<t>) = (y_hat^<t> - y^<t>) / B for every step, with C_t the batch mean of
    the cross-entropy (7.5) at step t and y^<t> one-hot: (B, T, q)."""
    q = logits.shape[-1]
    return (torch.softmax(logits, dim=-1) - F.one_hot(targets, q).to(logits.dtype)) / len(logits)


def adjoints(rnn: RNN, h: torch.Tensor, dC: torch.Tensor, truncate: int | None = None):
    """The backward recursion (7.6), zeta^<t> = dC^<t> + (dh^<t+1>/dh^<t>) zeta^<t+1> from
    t = T down to 1, where dC^<t> (B, ..., T, m) is what the loss adds at step t directly.

    h (B, T+1, m) are the states of the forward pass; any dimensions of dC between the batch
    and time run separate recursions through the same states (one per loss term, say).
    With `truncate=k`, the term that would cross from step t = ck + 1 to t - 1 is dropped.
    Returns zeta (B, ..., T, m) and the adjoint of h^<0>, (dh^<1>/dh^<0>) zeta^<1>.
    """
    T = h.shape[1] - 1
    zeta = torch.zeros_like(dC)
    carried = torch.zeros_like(dC[..., 0, :])  # (dh^<t+1>/dh^<t>) zeta^<t+1>, none after T
    for t in range(T, 0, -1):  # t is the chapter's time index, zeta[..., t-1, :] is zeta^<t>
        zeta[..., t - 1, :] = dC[..., t - 1, :] + carried
        if truncate is not None and (t - 1) % truncate == 0 and t > 1:
            carried = torch.zeros_like(carried)
        else:
            carried = torch.einsum("bij,b...j->b...i", jacobian(rnn, h[:, t]),
                                   zeta[..., t - 1, :])
    return zeta, carried


def state_terms(rnn: RNN, h: torch.Tensor, zeta: torch.Tensor) -> torch.Tensor:
    """The term of each state tau in (7.10), sum_j (dh_j^<tau>/dW_hh) zeta_j^<tau>, with
    (7.9): (sigma_dot(z^<tau>) * zeta^<tau>) h^<tau-1>^T, summed over the batch.

    h (B, T+1, m) the states, zeta (B, ..., T, m) adjoints. Returns (..., T, m, m).
    """
    s = sigma_dot(rnn, h[:, 1:])  # (B, T, m)
    local = zeta * s.view(len(s), *[1] * (zeta.dim() - 3), *s.shape[1:])  # (B, ..., T, m)
    return torch.einsum("b...tm,btn->...tmn", local, h[:, :-1])


@torch.no_grad()
def bptt(rnn: RNN, x: torch.Tensor, targets: torch.Tensor, h0: torch.Tensor | None = None, *,
         last_only: bool = False, truncate: int | None = None,
         lumped: bool = False) -> BPTTResult:
    """Loss, gradients of every parameter and adjoints by the explicit recursion (7.6)-(7.11).

    By default the exact gradient: each step's own loss term (1/T) Cdot_t(h^<t>) enters the
    recursion at its step t. With `lumped=True`, the chapter's (7.6) literally: all of
    (1/T) sum_tau Cdot_tau(h^<tau>) enters at t = T, which is exact only when the last step
    alone carries loss (`last_only`). With `truncate=k`, truncated BPTT: the sequence is cut
    into chunks of k steps, the state is carried from chunk to chunk as a constant, and the
    term of (7.6) that would cross a chunk boundary is dropped.
    """
    if truncate is not None:
        positive_int("truncate", truncate)
    h, logits = forward_states(rnn, x, h0)
    T = logits.shape[1]
    loss = sequence_loss(logits, targets, last_only)
    # dC/d(logits^<t>) of C = (1/B) sum_b (1/T) sum_t C_t: (y_hat - e_y) / (B T)
    delta = output_error(logits, targets)  # (B, T, q)
    if last_only:
        delta[:, :-1] = 0  # only the last step is in the loss, C = C_T
    else:
        delta = delta / T
    dC = delta @ rnn.W_yh  # (B, T, m): (1/T) Cdot_t(h^<t>), over the batch
    if lumped:  # (7.6) as printed: every Cdot_tau added at t = T
        dC = torch.cat([torch.zeros_like(dC[:, :-1]), dC.sum(1, keepdim=True)], dim=1)
    zeta, carried = adjoints(rnn, h, dC, truncate)
    local = zeta * sigma_dot(rnn, h[:, 1:])  # (B, T, m): dC/dz^<t>
    grads = {
        "cell.W_hh": state_terms(rnn, h, zeta).sum(0),  # (7.9)-(7.10)
        "cell.W_hx": torch.einsum("btm,btp->mp", local, x),
        "cell.b_h": local.sum((0, 1)),
        "W_yh": torch.einsum("btq,btm->qm", delta, h[:, 1:]),
        "b_y": delta.sum((0, 1)),
        "h0": carried.unsqueeze(0),  # dC/dh^<0>, shaped like h0
    }
    return BPTTResult(loss=loss, grads=grads, zeta=zeta, h=h)


@torch.no_grad()
def per_term_adjoints(rnn: RNN, x: torch.Tensor, targets: torch.Tensor,
                      h0: torch.Tensor | None = None):
    """The adjoints of the single loss terms, zeta_(t)^<tau> = dC_t/dh^<tau> for tau <= t
    (zero for tau > t), with C_t the batch mean of the cross-entropy (7.5) at step t.

    Returns (zeta_terms, h): zeta_terms (B, T, T, m), entry [:, t-1, tau-1], and the states
    h (B, T+1, m). Since C = (1/T) sum_t C_t, (1/T) zeta_terms.sum(1) is the adjoint zeta of
    (7.6). One recursion per term: O(T^2) work, against O(T) for `bptt`.
    """
    h, logits = forward_states(rnn, x, h0)
    B, T, _ = logits.shape
    dC = output_error(logits, targets) @ rnn.W_yh  # (B, T, m): Cdot_t(h^<t>) over B
    steps = torch.arange(T)
    dC_terms = dC.new_zeros(B, T, T, rnn.hidden_size)  # term t adds only at its own step
    dC_terms[:, steps, steps] = dC
    return adjoints(rnn, h, dC_terms)[0], h


def near_effects(rnn: RNN, x: torch.Tensor, targets: torch.Tensor, T0: int,
                 h0: torch.Tensor | None = None, *, last_only: bool = False) -> torch.Tensor:
    """g_W_hh of (7.13): the double sum (7.10) over t and tau from T_0 on only, which is
    the exact gradient with zeta^<t> set to 0 for t < T_0.

    Exchanging the sums, (1/T) sum_{t>=T_0} sum_{T_0<=tau<=t} is the sum over tau >= T_0 of
    the terms of the full adjoints, so one backward pass is enough.
    """
    T = x.shape[1]
    int_in_range("T0", T0, 1, T, expected=f"an int in 1..T = {T}")
    result = bptt(rnn, x, targets, h0, last_only=last_only)
    return state_terms(rnn, result.h, result.zeta)[T0 - 1:].sum(0)


def rnn_with_spectral_radius(radius: float, input_size: int, hidden_size: int,
                             output_size: int, *, nonlinearity: str = "tanh",
                             generator: torch.Generator | None = None) -> RNN:
    """A float64 RNN (7.2) with zero biases whose W_hh has the spectral radius `radius`:
    W_hh, W_hx, W_yh drawn from `generator` in that order, W_hx, W_yh scaled by 1/sqrt(fan-in)."""
    if not isinstance(radius, (int, float)) or not radius > 0:
        raise ValueError(f"radius must be a positive number, got {radius!r}")
    m, p, q = hidden_size, input_size, output_size
    rnn = RNN(p, m, q, nonlinearity=nonlinearity).double()
    W_hh = torch.randn(m, m, generator=generator, dtype=torch.float64)
    W_hh *= radius / torch.linalg.eigvals(W_hh).abs().max()  # spectral radius = radius
    with torch.no_grad():
        rnn.cell.W_hh.copy_(W_hh)
        rnn.cell.W_hx.copy_(torch.randn(m, p, generator=generator, dtype=torch.float64) / p**0.5)
        rnn.cell.b_h.zero_()
        rnn.W_yh.copy_(torch.randn(q, m, generator=generator, dtype=torch.float64) / m**0.5)
        rnn.b_y.zero_()
    return rnn


def autograd_reference(rnn: RNN, x: torch.Tensor, targets: torch.Tensor,
                       h0: torch.Tensor | None = None, *, last_only: bool = False,
                       truncate: int | None = None) -> dict[str, torch.Tensor]:
    """The same gradients by torch.autograd (truncation: detach() at chunk boundaries)."""
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
