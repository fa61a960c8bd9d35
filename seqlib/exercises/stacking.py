"""Checkers for the exercises of the page on reversing and stacking RNNs, (7.14)-(7.15)."""

import torch
from torch import nn

from seqlib.exercises import ExerciseError, expect, expect_close, passed

P, M, B, T = 3, 5, 4, 6  # input features, hidden units, batch, time (m != p on purpose)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), rtol=1e-6,
                                                      atol=1e-8))


def _pair(torch_class, generator: torch.Generator):
    """A bidirectional torch.nn module and two unidirectional ones carrying its weights."""
    ref = torch_class(P, M, bidirectional=True, batch_first=True).double()
    with torch.no_grad():
        for weight in ref.parameters():
            weight.copy_(torch.rand(weight.shape, generator=generator, dtype=torch.float64)
                         * 1.2 - 0.6)
    forward, reverse = (torch_class(P, M, batch_first=True).double() for _ in range(2))
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(forward, f"{name}_l0").copy_(getattr(ref, f"{name}_l0"))
            getattr(reverse, f"{name}_l0").copy_(getattr(ref, f"{name}_l0_reverse"))
    return ref, forward, reverse


def _diagnose_reverse(got, x, reverse, expected):
    """A message for a wrong reverse half (B, T, m) of the output, naming the likely slip."""
    with torch.no_grad():
        unflipped = reverse(x)[0]  # the reverse module reading x left to right
    if _close(got, expected.flip(1)):
        return ("the reverse half holds the right states in the wrong order: they come out "
                "for t = T, T-1, ..., 1; flip them back so that step t holds h_r^<t>")
    if _close(got, unflipped):
        return ("the reverse half is the reverse module reading x from left to right: give "
                "it x.flip(1), the sequence reversed in time (then flip its states back)")
    if _close(got, unflipped.flip(1)):
        return ("the reverse module read x from left to right (its states were then flipped): "
                "give it x.flip(1), the sequence reversed in time")
    return None


def check_bidirectional(attempt) -> None:
    """Check `attempt(forward, reverse, x) -> (output, h_n)`, a bidirectional layer (7.14)
    made of two unidirectional torch.nn modules (batch_first=True, one layer each): output
    (B, T, 2 m) holds [h_f^<t>; h_r^<t>] at every step t, h_n (2, B, m) the final state of
    the forward and then of the reverse module, as torch.nn.RNN(bidirectional=True) and
    torch.nn.GRU(bidirectional=True) return them with the same weights."""
    if not callable(attempt):
        raise TypeError(f"attempt must be a function (forward, reverse, x) -> (output, h_n), "
                        f"got {type(attempt).__name__}")
    generator = torch.Generator().manual_seed(714)
    for torch_class in (nn.RNN, nn.GRU):
        name = f"nn.{torch_class.__name__}"
        ref, forward, reverse = _pair(torch_class, generator)
        x = torch.randn(B, T, P, generator=generator, dtype=torch.float64)
        x_before = x.clone()
        with torch.no_grad():
            expected, expected_h = ref(x)
            result = attempt(forward, reverse, x)
        expect(torch.equal(x, x_before), f"{name}: your function changed its input x in place")
        expect(isinstance(result, tuple) and len(result) == 2,
               f"{name}: return a tuple (output, h_n), got {type(result).__name__}")
        output, h_n = result
        expect(isinstance(output, torch.Tensor),
               f"{name}: output should be a torch.Tensor, got {type(output).__name__}")
        expect(tuple(output.shape) == (B, T, 2 * M),
               f"{name}: output has shape {tuple(output.shape)}, expected (B, T, 2 m) = "
               f"{(B, T, 2 * M)}: [h_f^<t>; h_r^<t>] at every step")
        if not _close(output, expected):
            message = _explain_output(output.detach(), expected, x, reverse, name)
            if message is not None:
                raise ExerciseError(message)
            expect_close(f"{name}: output", output, expected, atol=1e-8, rtol=1e-6)
        expect(isinstance(h_n, torch.Tensor),
               f"{name}: h_n should be a torch.Tensor, got {type(h_n).__name__}")
        expect(tuple(h_n.shape) == (2, B, M),
               f"{name}: h_n has shape {tuple(h_n.shape)}, expected (2, B, m) = {(2, B, M)}: "
               "the final forward state, then the final reverse state")
        if not _close(h_n[0], expected_h[0]):
            raise ExerciseError(f"{name}: h_n[0] should be the forward module's final state, "
                                "h_f^<T>, its state after reading x^<T>")
        if not _close(h_n[1], expected_h[1]):
            if _close(h_n[1], expected[:, -1, M:]):
                raise ExerciseError(
                    f"{name}: h_n[1] is output[:, -1, m:], h_r^<T>, the reverse state after "
                    "reading one input; the reverse module's final state is h_r^<1>, after it "
                    "has read the whole sequence (output[:, 0, m:])")
            raise ExerciseError(f"{name}: h_n[1] should be the reverse module's final state, "
                                "h_r^<1>")
    passed("a bidirectional layer from two unidirectional ones equals torch.nn.RNN and "
           "torch.nn.GRU with bidirectional=True: outputs [h_f; h_r] and final states")


def _explain_output(output, expected, x, reverse, name):
    """Turn a mismatch of the whole output into a message about its halves."""
    forward_ok = _close(output[..., :M], expected[..., :M])
    reverse_ok = _close(output[..., M:], expected[..., M:])
    if _close(output[..., :M], expected[..., M:]) and _close(output[..., M:], expected[..., :M]):
        return f"{name}: the two halves are swapped: step t must hold [h_f^<t>; h_r^<t>]"
    if forward_ok and not reverse_ok:
        hint = _diagnose_reverse(output[..., M:], x, reverse, expected[..., M:])
        return (f"{name}: the forward half (output[..., :m]) matches but the reverse half "
                f"does not: " + (hint or "check how the reverse module reads the sequence"))
    if reverse_ok and not forward_ok:
        return (f"{name}: the reverse half matches but the forward half (output[..., :m]) "
                "does not: it is the forward module's states on x, in time order")
    return None
