"""Checkers for the exercises of the page on reversing and stacking RNNs, (7.14)-(7.15)."""

import torch
from torch import nn

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

P, M, B, T = 3, 5, 4, 6  # input features, hidden units, batch, time (m != p on purpose)
TOL = dict(atol=1e-8, rtol=1e-6)  # float64 states: round-off only


def _pair(torch_class, generator: torch.Generator):
    """A bidirectional torch.nn module and two unidirectional ones carrying its weights."""
    with seeded(0):  # initial weights, replaced below: the caller's random numbers untouched
        ref = torch_class(P, M, bidirectional=True, batch_first=True).double()
        forward, reverse = (torch_class(P, M, batch_first=True).double() for _ in range(2))
    with torch.no_grad():
        for weight in ref.parameters():
            weight.copy_(torch.rand(weight.shape, generator=generator, dtype=torch.float64)
                         * 1.2 - 0.6)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(forward, f"{name}_l0").copy_(getattr(ref, f"{name}_l0"))
            getattr(reverse, f"{name}_l0").copy_(getattr(ref, f"{name}_l0_reverse"))
    return ref, forward, reverse


def _reverse_mistakes(x, reverse, expected) -> list:
    """(wrong reverse half (B, T, m), message) for the likely slips."""
    with torch.no_grad():
        unflipped = reverse(x)[0]  # the reverse module reading x left to right
    return [
        (expected.flip(1), "the reverse half holds the right states in the wrong order: they "
         "come out for t = T, T-1, ..., 1; flip them back so that step t holds h_r^<t>"),
        (unflipped, "the reverse half is the reverse module reading x from left to right: "
         "give it x.flip(1), the sequence reversed in time (then flip its states back)"),
        (unflipped.flip(1), "the reverse module read x from left to right (its states were "
         "then flipped): give it x.flip(1), the sequence reversed in time"),
    ]


def check_bidirectional(attempt) -> None:
    """Check `attempt(forward, reverse, x) -> (output, h_n)`, a bidirectional layer (7.14)
    made of two unidirectional torch.nn modules (batch_first=True, one layer each): output
    (B, T, 2 m) holds [h_f^<t>; h_r^<t>] at every step t, h_n (2, B, m) the final state of
    the forward and then of the reverse module, as torch.nn.RNN(bidirectional=True) and
    torch.nn.GRU(bidirectional=True) return them with the same weights."""
    require_callable(attempt, "bidirectional(forward, reverse, x) -> (output, h_n)")
    generator = torch.Generator().manual_seed(714)
    for torch_class in (nn.RNN, nn.GRU):
        name = f"nn.{torch_class.__name__}"
        ref, forward, reverse = _pair(torch_class, generator)
        x = torch.randn(B, T, P, generator=generator, dtype=torch.float64)
        x_before = x.clone()
        with torch.no_grad():
            expected, expected_h = ref(x)
        output, h_n = run_attempt(attempt, forward, reverse, x, what=name,
                                  returns=("output", "h_n"))
        expect(torch.equal(x, x_before), f"{name}: your function changed its input x in place")
        expect_tensor(f"{name}: output", output, (B, T, 2 * M), dims="(B, T, 2 m)",
                      why="[h_f^<t>; h_r^<t>] at every step")
        if not close(output, expected, **TOL):
            _explain_output(output.detach(), expected, x, reverse, name)
            expect_close(f"{name}: output", output, expected, **TOL)
        expect_tensor(f"{name}: h_n", h_n, (2, B, M), dims="(2, B, m)",
                      why="the final forward state, then the final reverse state")
        expect(close(h_n[0], expected_h[0], **TOL), f"{name}: h_n[0] should be the forward "
               "module's final state, h_f^<T>, its state after reading x^<T>")
        name_mistake(name, h_n[1], [(expected[:, -1, M:], "h_n[1] is output[:, -1, m:], "
                                     "h_r^<T>, the reverse state after reading one input; the "
                                     "reverse module's final state is h_r^<1>, after it has "
                                     "read the whole sequence (output[:, 0, m:])")], **TOL)
        expect(close(h_n[1], expected_h[1], **TOL),
               f"{name}: h_n[1] should be the reverse module's final state, h_r^<1>")
    passed("a bidirectional layer from two unidirectional ones equals torch.nn.RNN and "
           "torch.nn.GRU with bidirectional=True: outputs [h_f; h_r] and final states")


def _explain_output(output, expected, x, reverse, name) -> None:
    """Turn a mismatch of the whole output into an ExerciseError about its halves, where
    one explains it."""
    forward_ok = close(output[..., :M], expected[..., :M], **TOL)
    reverse_ok = close(output[..., M:], expected[..., M:], **TOL)
    swapped = expected.roll(M, dims=-1)  # [h_r^<t>; h_f^<t>]
    name_mistake(name, output, [(swapped, "the two halves are swapped: step t must hold "
                                 "[h_f^<t>; h_r^<t>]")], **TOL)
    if forward_ok:
        what = f"{name}: the forward half (output[..., :m]) matches but the reverse half does not"
        name_mistake(what, output[..., M:], _reverse_mistakes(x, reverse, expected[..., M:]),
                     **TOL)
        expect(reverse_ok, f"{what}: check how the reverse module reads the sequence")
    if reverse_ok:
        expect(forward_ok, f"{name}: the reverse half matches but the forward half "
                           "(output[..., :m]) does not: it is the forward module's states on "
                           "x, in time order")
