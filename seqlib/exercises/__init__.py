"""Checkers for the book's exercises: call one on your own attempt.

Each checker takes what an exercise asks you to write (a function, a module class, a
number), runs it on inputs of its own and compares the result with the book's answer. When
the attempt is right it prints what it checked and returns None; otherwise it raises
ExerciseError saying what is wrong: which input, what came back, what was expected.

The checkers live in one module per chapter topic and are all importable from here, as in
`from seqlib.exercises import check_peephole_lstm`.
"""

import torch


class ExerciseError(AssertionError):
    """An attempt at an exercise is not right yet; the message says why."""


def expect(condition: bool, message: str) -> None:
    """Raise ExerciseError(message) unless `condition` holds."""
    if not condition:
        raise ExerciseError(message)


def expect_close(name: str, got, expected: torch.Tensor, *, atol: float = 1e-5,
                 rtol: float = 1e-4) -> None:
    """Check that `got` is a tensor of `expected`'s shape with values within the tolerances;
    the message names `name`, the shapes, or the largest difference and where it is."""
    expect(isinstance(got, torch.Tensor),
           f"{name} should be a torch.Tensor, got {type(got).__name__}")
    expect(tuple(got.shape) == tuple(expected.shape),
           f"{name} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
    got, expected = got.detach().double(), expected.detach().double()
    expect(bool(torch.isfinite(got).all()), f"{name} holds NaN or infinite values")
    error = (got - expected).abs()
    if not bool((error <= atol + rtol * expected.abs()).all()):
        where = tuple(int(i) for i in torch.unravel_index(error.argmax(), error.shape))
        raise ExerciseError(f"{name} differs from the expected values: largest difference "
                            f"{error.max().item():.3g} at index {where} (got "
                            f"{got[where].item():.6g}, expected {expected[where].item():.6g})")


def passed(what: str) -> None:
    """Report a successful check."""
    print(f"correct: {what}")


__all__ = ["ExerciseError", "expect", "expect_close", "passed"]
from seqlib.exercises.captioning import check_grid_attention  # noqa: E402

__all__ += ["check_grid_attention"]
from seqlib.exercises.decoding import check_beam_step, check_fit_temperature  # noqa: E402

__all__ += ["check_beam_step", "check_fit_temperature"]
