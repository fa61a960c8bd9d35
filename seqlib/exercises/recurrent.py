"""Checkers for the exercises of the pages on the basic RNN and on backpropagation through
time (Section 7.2).

- `check_rnn_forward`: the recursion (7.2) run by hand with the weights of a torch.nn.RNN.
- `check_sequence_loss`: the loss (7.4)-(7.5) of a padded batch, each sequence averaged
  over its own steps.
- `check_truncated_bptt`: truncated backpropagation through time, chunk by chunk, with the
  state carried forward as a constant.

Every checker builds its own float64 inputs from seeded generators and leaves the global
random state as it found it.
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from seqlib import bptt
from seqlib.exercises.toolkit import (
    close,
    expect,
    expect_close,
    expect_tensor,
    name_mistake,
    passed,
    require_callable,
    run_attempt,
    seeded,
)
from seqlib.rnn import RNN

TOL = dict(atol=1e-8, rtol=1e-6)  # float64 states and losses: round-off only
GRADIENTS = dict(atol=1e-10, rtol=1e-6)  # gradients, smaller than the states


# The basic RNN (7.2) from torch.nn.RNN's weights

def _elman(x: torch.Tensor, W_hh, W_hx, b_h, S_h, carry: bool = True) -> torch.Tensor:
    """States h^<1..T> (B, T, m) of (7.2) from h^<0> = 0; with carry=False every step
    starts again from h = 0 (a typical mistake)."""
    zero = x.new_zeros(x.shape[0], W_hh.shape[0])
    h, hs = zero, []
    for x_t in x.unbind(1):
        h = S_h((h if carry else zero) @ W_hh.T + x_t @ W_hx.T + b_h)
        hs.append(h)
    return torch.stack(hs, dim=1)


def check_rnn_forward(attempt: Callable) -> None:
    """Check `attempt(rnn, x) -> (H, h_T)`: the states of the recursion (7.2) written out with
    the weights of the torch.nn.RNN `rnn` (one layer, batch_first=True) on x (B, T, p), from
    h^<0> = 0; H (B, T, m) holds h^<1>, ..., h^<T> and h_T (B, m) is the last state.
    Compared with what `rnn(x)` itself returns."""
    require_callable(attempt, "rnn_forward(rnn, x) -> (H, h_T)")
    with seeded(7):
        modules = [nn.RNN(3, 5, batch_first=True).double(),
                   nn.RNN(4, 3, nonlinearity="relu", batch_first=True).double()]
    g = torch.Generator().manual_seed(7)
    for rnn in modules:
        x = torch.randn(2, 6, rnn.input_size, generator=g, dtype=torch.float64)  # (B, T, p)
        with torch.no_grad():
            H_ref, h_n = rnn(x)  # (B, T, m), (1, B, m)
        where = f"on an nn.RNN(input_size={rnn.input_size}, hidden_size={rnn.hidden_size}, " \
                f"nonlinearity={rnn.nonlinearity!r})"
        H, h_T = run_attempt(attempt, rnn, x, what=f"rnn_forward {where}", returns=("H", "h_T"))
        if not close(H, H_ref, **TOL):
            W_hh, W_hx = rnn.weight_hh_l0.detach(), rnn.weight_ih_l0.detach()
            b_ih, b_hh = rnn.bias_ih_l0.detach(), rnn.bias_hh_l0.detach()
            S_h = torch.tanh if rnn.nonlinearity == "tanh" else torch.relu
            mistakes = [
                (dict(b_h=b_ih), "it uses bias_ih alone: PyTorch keeps two bias vectors, and "
                 "the chapter's b_h is their sum, bias_ih_l0 + bias_hh_l0"),
                (dict(b_h=b_hh), "it uses bias_hh alone: the chapter's b_h is bias_ih_l0 + "
                 "bias_hh_l0"),
                (dict(W_hh=W_hh.T), "the recurrent matrix looks transposed: for states stored "
                 "as rows (B, m), W_hh h^<t-1> is h @ W_hh.T with W_hh = weight_hh_l0"),
                (dict(carry=False), "every step looks like it starts again from h = 0: carry "
                 "h^<t-1> from one step to the next"),
                (dict(S_h=torch.tanh), "S_h looks like tanh, but this module's nonlinearity is "
                 "ReLU: follow rnn.nonlinearity"),
            ]
            base = dict(W_hh=W_hh, W_hx=W_hx, b_h=b_ih + b_hh, S_h=S_h)
            name_mistake(f"H differs from torch.nn.RNN's output {where}", H,
                         ((_elman(x, **{**base, **change}), say) for change, say in mistakes),
                         **TOL)
            expect_close(f"H {where}", H, H_ref)
        expect_close(f"h_T {where} (the last state, (B, m))", h_T, h_n[0])
    passed("rnn_forward gives torch.nn.RNN's states and last state, for tanh and ReLU")


# The loss (7.4)-(7.5) of a padded batch

def check_sequence_loss(attempt: Callable) -> None:
    """Check `attempt(logits, targets, mask) -> C`: logits (B, T, q) (scores before the
    softmax S_y), targets (B, T) class ids and a (B, T) boolean mask, True at the real steps
    (each sequence's real steps come first). C is the scalar loss (7.4) with C_t of (7.5),
    each sequence averaged over its own T_b real steps, then averaged over the batch.
    Compared in value and in gradient with seqlib.bptt.sequence_loss."""
    require_callable(attempt, "sequence_loss(logits, targets, mask) -> C")
    g = torch.Generator().manual_seed(5)
    B, T, q = 3, 5, 4
    for lengths in ([5, 5, 5], [5, 2, 4]):
        mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
        logits = torch.randn(B, T, q, generator=g, dtype=torch.float64).requires_grad_()
        targets = torch.randint(0, q, (B, T), generator=g) * mask  # id 0 at the padding
        expected = bptt.sequence_loss(logits, targets, mask=mask)
        (grad_expected,) = torch.autograd.grad(expected, logits)
        where = f"for sequences of lengths {lengths} (T = {T})"
        got = run_attempt(attempt, logits, targets, mask, what=f"sequence_loss {where}",
                          grad=True)  # the loss is differentiated
        expect(isinstance(got, torch.Tensor),
               f"sequence_loss should return a tensor (keep it differentiable: no .item()), "
               f"got {type(got).__name__}")
        expect_tensor(f"the loss {where}", got, (), dims="a scalar")
        what = f"the loss is {got.item():.6f} {where}, expected {expected.item():.6f}"
        if not close(got, expected, **TOL):
            C_t = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, T)
            real = mask.double()
            picked = -logits.gather(-1, targets[..., None])[..., 0]  # (B, T): -logit, no log
            mistakes = [
                (((picked * real).sum(1) / real.sum(1)).mean(), "the logits are scores before "
                 "the softmax S_y: C_t of (7.5) is -log y_hat_k with y_hat = softmax(logits), "
                 "for instance -log_softmax"),
                (C_t[mask].mean(), "it is the mean over all the real steps of the batch, so a "
                 "long sequence weighs more than a short one (the weighting the translation "
                 "pages choose, which is not (7.4)); (7.4) first averages each sequence over "
                 "its own T_b steps, then the B sequences"),
                (C_t.mean(), "the padded steps are counted: leave them out with the mask"),
                (((C_t * real).sum(1) / T).mean(), "each sequence is divided by the padded "
                 "length T; divide by its own number of real steps T_b"),
                (((C_t * real).sum(1) / real.sum(1)).sum(), "it is the sum over the batch; "
                 "(7.4) for a batch is the mean over the B sequences"),
            ]
            name_mistake(what, got, mistakes, **TOL)
        expect(close(got, expected, **TOL), what)
        expect(got.requires_grad, "the loss does not depend on the logits through autograd: "
                                  "compute it with torch operations (no .item(), no numpy)")
        (grad,) = torch.autograd.grad(got, logits)
        expect_close(f"the gradient of your loss with respect to the logits {where}", grad,
                     grad_expected, atol=1e-10)
    passed("your loss gives (7.4)-(7.5) and its gradient, with and without padding")


# Truncated backpropagation through time

def _chunked_grads(rnn: RNN, x: torch.Tensor, targets: torch.Tensor, k: int, *,
                   carry: str = "detach", weight: str = "T") -> dict:
    """Gradients of a chunk-by-chunk run with autograd: the state is carried detached
    (carry="detach", truncated BPTT), carried with its graph ("keep", full BPTT) or
    restarted from zero ("reset"); each C_t weighs 1/T ("T") or 1/len(chunk) ("chunk")."""
    params = dict(rnn.named_parameters())
    total = {name: torch.zeros_like(p) for name, p in params.items()}
    B, T, _ = x.shape
    h = x.new_zeros(1, B, rnn.hidden_size)
    losses = []
    for start in range(0, T, k):
        chunk = slice(start, min(start + k, T))
        if carry == "reset":
            h = x.new_zeros(1, B, rnn.hidden_size)
        logits, h = rnn(x[:, chunk], h)
        n = logits.shape[1]
        loss = bptt.sequence_loss(logits, targets[:, chunk]) * (n / T if weight == "T" else 1)
        if carry == "keep":
            losses.append(loss)
            continue
        grads = torch.autograd.grad(loss, list(params.values()))
        for name, gr in zip(params, grads, strict=True):
            total[name] += gr
        h = h.detach()
    if carry == "keep":
        grads = torch.autograd.grad(sum(losses), list(params.values()))
        total = dict(zip(params, grads, strict=True))
    return total


def check_truncated_bptt(attempt: Callable) -> None:
    """Check `attempt(rnn, x, targets, k) -> grads`: truncated backpropagation through time
    for a seqlib.RNN with an output layer, x (B, T, p) and targets (B, T), from h^<0> = 0.
    The sequence is cut into chunks of k steps (the last one may be shorter); each chunk is
    run forward from the state the previous chunk ended in, treated as a constant, and its
    steps' terms of the loss (7.4), each C_t weighing 1/T, are backpropagated before the
    next chunk. `grads` maps every name of rnn.named_parameters() to the gradient summed over
    the chunks. Compared with seqlib.bptt.bptt(rnn, x, targets, truncate=k)."""
    require_callable(attempt, "truncated_bptt(rnn, x, targets, k) -> grads")
    with seeded(3):
        rnn = RNN(3, 4, 2).double()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 11, 3, generator=g, dtype=torch.float64)  # (B, T, p), T = 11
    targets = torch.randint(0, 2, (2, 11), generator=g)
    names = [name for name, _ in rnn.named_parameters()]
    before = {name: p.detach().clone() for name, p in rnn.named_parameters()}
    for k in (4, 1, 11):
        expected = bptt.bptt(rnn, x, targets, truncate=k).grads
        rnn.zero_grad(set_to_none=True)
        where = f"with T = 11 and k = {k}"
        got = run_attempt(attempt, rnn, x, targets, k, what=f"truncated_bptt {where}",
                          grad=True)  # the attempt computes gradients
        expect(isinstance(got, dict), f"truncated_bptt should return a dict name -> gradient, "
                                      f"got {type(got).__name__}")
        expect(sorted(got) == sorted(names), f"the gradients should be keyed by the names of "
                                             f"rnn.named_parameters(), {names}; got {sorted(got)}")
        expect(all(torch.equal(p.detach(), before[n]) for n, p in rnn.named_parameters()),
               "the parameters of rnn changed: compute the gradients only (no optimizer step)")
        if all(close(got[n], expected[n], **GRADIENTS) for n in names):
            again = run_attempt(attempt, rnn, x, targets, k, what=f"truncated_bptt {where}, "
                                "called again", grad=True)
            expect(isinstance(again, dict) and all(close(again.get(n), expected[n],
                                                         **GRADIENTS) for n in names),
                   f"a second call {where} returned other gradients: start every call from "
                   "zero gradients (rnn.zero_grad(), or autograd.grad instead of backward)")
            continue
        mistakes = [
            (dict(carry="keep"), "they are the gradients of full BPTT: detach the state at "
             "every chunk boundary (h = h.detach()), so no gradient flows into the previous "
             "chunk"),
            (dict(carry="reset"), "every chunk looks like it starts again from a zero state: "
             "carry the last state of a chunk into the next one, detached"),
            (dict(weight="chunk"), "each chunk's steps look averaged over the chunk; in (7.4) "
             "every C_t weighs 1/T of the whole sequence, so weigh the chunk's mean by "
             "len(chunk) / T"),
        ]
        name_mistake(f"the gradients {where} are not those of truncated BPTT", got,
                     ((_chunked_grads(rnn, x, targets, k, **options), say)
                      for options, say in mistakes),
                     same=lambda got, wrong: all(close(got[n], wrong[n], **GRADIENTS)
                                                 for n in names))
        for n in names:
            expect_close(f"the gradient of {n} {where}", got[n], expected[n], atol=1e-10)
    passed("truncated_bptt gives seqlib.bptt.bptt's gradients for k = 4, 1 and 11 (T = 11)")


__all__ = ["check_rnn_forward", "check_sequence_loss", "check_truncated_bptt"]
