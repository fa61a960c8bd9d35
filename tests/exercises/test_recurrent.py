"""The checkers of the coding exercises of the RNN and BPTT pages accept the book's solutions
and reject typical wrong attempts with a message that says what is wrong."""

import pytest
import torch
import torch.nn.functional as F

from seqlib import bptt
from seqlib.exercises import (
    ExerciseError,
    check_rnn_forward,
    check_sequence_loss,
    check_truncated_bptt,
)

# --- the recursion (7.2) with torch.nn.RNN's weights -------------------------------------


def rnn_forward(rnn, x, *, bias="both", transpose=False, carry=True, S_h=None):
    """The book's solution (default options) and typical wrong variants of it."""
    W_hh, W_hx = rnn.weight_hh_l0, rnn.weight_ih_l0  # (m, m), (m, p)
    b_h = {"both": rnn.bias_ih_l0 + rnn.bias_hh_l0, "ih": rnn.bias_ih_l0}[bias]  # (m,)
    if S_h is None:
        S_h = torch.tanh if rnn.nonlinearity == "tanh" else torch.relu
    if transpose:
        W_hh = W_hh.T
    h0 = x.new_zeros(x.shape[0], rnn.hidden_size)  # h^<0> = 0, (B, m)
    h, states = h0, []
    for x_t in x.unbind(1):  # x_t (B, p)
        h = S_h((h if carry else h0) @ W_hh.T + x_t @ W_hx.T + b_h)
        states.append(h)
    return torch.stack(states, dim=1), h  # (B, T, m), (B, m)


@pytest.mark.parametrize("options, message", [
    (dict(bias="ih"), "bias_ih alone"),
    (dict(transpose=True), "looks transposed"),
    (dict(carry=False), "carry h"),
    (dict(S_h=torch.tanh), "nonlinearity is ReLU"),
])
def test_rnn_forward_mistakes_are_named(options, message):
    with pytest.raises(ExerciseError, match=message):
        check_rnn_forward(lambda rnn, x: rnn_forward(rnn, x, **options))


def test_rnn_forward_wrong_shapes_and_types():
    with pytest.raises(ExerciseError, match=r"h_T .* has shape \(1, 2, 5\), expected \(2, 5\)"):
        check_rnn_forward(lambda rnn, x: rnn(x))  # torch's own h_n is (1, B, m)
    with pytest.raises(ExerciseError, match=r"return a tuple \(H, h_T\), got Tensor"):
        check_rnn_forward(lambda rnn, x: rnn_forward(rnn, x)[0])


# --- the loss (7.4)-(7.5) of a padded batch -----------------------------------------------


def sequence_loss(logits, targets, mask):
    """The book's solution."""
    log_y_hat = F.log_softmax(logits, dim=-1)  # (B, T, q): log of S_y
    C_t = -log_y_hat.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T), (7.5)
    real = mask.to(logits.dtype)  # (B, T), 1 at the real steps
    return ((C_t * real).sum(1) / real.sum(1)).mean()  # (7.4) per sequence, then over B


def per_token(logits, targets, mask):
    return F.cross_entropy(logits[mask], targets[mask])


def unmasked(logits, targets, mask):
    return F.cross_entropy(logits.transpose(1, 2), targets)


def padded_length(logits, targets, mask):
    C_t = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    return ((C_t * mask).sum(1) / mask.shape[1]).mean()


def no_log_softmax(logits, targets, mask):
    C_t = -logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return ((C_t * mask).sum(1) / mask.sum(1)).mean()


def summed(logits, targets, mask):
    C_t = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    return ((C_t * mask).sum(1) / mask.sum(1)).sum()


@pytest.mark.parametrize("attempt, message", [
    (per_token, "a long sequence weighs more"),
    (unmasked, "padded steps are counted"),
    (padded_length, "divided by the padded length"),
    (no_log_softmax, "scores before the softmax"),
    (summed, "sum over the batch"),
    (lambda logits, targets, mask: sequence_loss(logits, targets, mask).item(),
     "should return a tensor"),
    (lambda logits, targets, mask: sequence_loss(logits, targets, mask).detach(),
     "does not depend on the logits"),
    (lambda logits, targets, mask: sequence_loss(logits, targets, mask) * torch.ones(1),
     r"the loss .* has shape \(1,\), expected a scalar = \(\)"),
])
def test_sequence_loss_mistakes_are_named(attempt, message):
    with pytest.raises(ExerciseError, match=message):
        check_sequence_loss(attempt)


# --- truncated backpropagation through time ----------------------------------------------


def truncated_bptt(rnn, x, targets, k, *, detach=True, reset=False, weigh_by_T=True):
    """The book's solution (default options) and typical wrong variants of it."""
    B, T, _ = x.shape
    rnn.zero_grad(set_to_none=True)
    h = x.new_zeros(1, B, rnn.hidden_size)  # h^<0> = 0, (1, B, m)
    total = 0
    for start in range(0, T, k):
        chunk = slice(start, min(start + k, T))
        if reset:
            h = x.new_zeros(1, B, rnn.hidden_size)
        logits, h = rnn(x[:, chunk], h)  # (B, k, q), (1, B, m)
        n = logits.shape[1]
        loss = bptt.sequence_loss(logits, targets[:, chunk]) * (n / T if weigh_by_T else 1)
        if detach:
            loss.backward()  # accumulates into .grad
            h = h.detach()  # the state goes on as a constant
        else:
            total = total + loss
    if not detach:
        total.backward()
    return {name: p.grad.clone() for name, p in rnn.named_parameters()}


@pytest.mark.parametrize("options, message", [
    (dict(detach=False), "gradients of full BPTT"),
    (dict(reset=True), "starts again from a zero state"),
    (dict(weigh_by_T=False), "weighs 1/T"),
])
def test_truncated_bptt_mistakes_are_named(options, message):
    with pytest.raises(ExerciseError, match=message):
        check_truncated_bptt(lambda rnn, x, targets, k: truncated_bptt(rnn, x, targets, k,
                                                                        **options))


def test_truncated_bptt_accumulating_gradients_is_reported():
    def without_zero_grad(rnn, x, targets, k):
        T = x.shape[1]
        h = x.new_zeros(1, x.shape[0], rnn.hidden_size)
        for start in range(0, T, k):
            chunk = slice(start, min(start + k, T))
            logits, h = rnn(x[:, chunk], h)
            (bptt.sequence_loss(logits, targets[:, chunk]) * logits.shape[1] / T).backward()
            h = h.detach()
        return {name: p.grad.clone() for name, p in rnn.named_parameters()}

    with pytest.raises(ExerciseError, match="zero gradients"):
        check_truncated_bptt(without_zero_grad)


def test_truncated_bptt_wrong_results():
    def missing_a_parameter(rnn, x, targets, k):
        grads = truncated_bptt(rnn, x, targets, k)
        del grads["b_y"]
        return grads

    with pytest.raises(ExerciseError, match="keyed by the names"):
        check_truncated_bptt(missing_a_parameter)

    def a_training_step(rnn, x, targets, k):
        grads = truncated_bptt(rnn, x, targets, k)
        with torch.no_grad():
            for p in rnn.parameters():
                p -= 0.1 * p.grad
        return grads

    with pytest.raises(ExerciseError, match="no optimizer step"):
        check_truncated_bptt(a_training_step)
