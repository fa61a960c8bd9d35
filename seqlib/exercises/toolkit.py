"""What every checker of seqlib.exercises shares: the error it raises, the call of an
attempt (`run_attempt`: its errors and the form of what it returns), closeness with a stated
tolerance, the check of a tensor's type and shape, the check that an attempt can be called,
the one format of a likely mistake, a random state of its own, and the line printed on
success.

A likely mistake is a pair (wrong answer, message): the answer an attempt with that mistake
gives, and what to say when an attempt gives it. A checker lists them, most telling first,
and `name_mistake` raises ExerciseError("<what differs>: <message>") for the first one the
attempt matches.
"""

import reprlib
from collections.abc import Callable, Iterable
from contextlib import contextmanager, nullcontext

import torch


class ExerciseError(AssertionError):
    """An attempt at an exercise is not right yet; the message says why."""


def expect(condition: bool, message: str) -> None:
    """Raise ExerciseError(message) unless `condition` holds."""
    if not condition:
        raise ExerciseError(message)


def close(got, expected: torch.Tensor, *, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Whether `got` is a tensor of `expected`'s shape whose values are within
    atol + rtol * |expected| of it, compared in float64 (torch.allclose's rule)."""
    return (isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(expected.shape)
            and torch.allclose(got.detach().double(), expected.detach().double(), rtol=rtol,
                               atol=atol))


def expect_tensor(name: str, got, shape=None, *, dims: str = "", why: str = "") -> None:
    """Check that `got` is a torch.Tensor and, where `shape` is given, of that shape; the
    message names `name`, what was given and what was expected: the shape, after `dims`
    (the shape in the book's symbols, such as "(B, T, p)") where given, then `why`."""
    expect(isinstance(got, torch.Tensor),
           f"{name} should be a torch.Tensor, got {type(got).__name__}")
    if shape is not None:
        expected = f"{dims} = {tuple(shape)}" if dims else f"{tuple(shape)}"
        expect(tuple(got.shape) == tuple(shape), f"{name} has shape {tuple(got.shape)}, "
               f"expected {expected}" + (f": {why}" if why else ""))


def expect_close(name: str, got, expected: torch.Tensor, *, atol: float = 1e-5,
                 rtol: float = 1e-4) -> None:
    """Check that `got` is close to `expected` (`close`); the message names `name`, the
    type or shape (`expect_tensor`), or the largest difference and where it is."""
    expect_tensor(name, got, expected.shape)
    expect(bool(torch.isfinite(got).all()), f"{name} holds NaN or infinite values")
    if not close(got, expected, atol=atol, rtol=rtol):
        got, expected = got.detach().double(), expected.detach().double()
        error = (got - expected).abs()
        where = tuple(int(i) for i in torch.unravel_index(error.argmax(), error.shape))
        raise ExerciseError(f"{name} differs from the expected values: largest difference "
                            f"{error.max().item():.3g} at index {where} (got "
                            f"{got[where].item():.6g}, expected {expected[where].item():.6g})")


def require_callable(given, signature: str, name: str = "attempt") -> None:
    """Raise TypeError unless `given` can be called; the message names the argument `name`,
    the `signature` expected and what was given."""
    if not callable(given):
        raise TypeError(f"{name} must be callable as {signature}, got "
                        f"{type(given).__name__} {reprlib.repr(given)}")


def name_mistake(what: str, got, mistakes: Iterable, *, same: Callable | None = None,
                 **tolerance) -> None:
    """Raise ExerciseError(f"{what}: {message}") for the first (wrong answer, message) of
    `mistakes` that `got` matches, by `same(got, wrong)` or else by `close(got, wrong,
    **tolerance)`; return when it matches none. `mistakes` may be a generator, so that a
    wrong answer is computed only when the ones before it did not match."""
    matches = same or (lambda got, wrong: close(got, wrong, **tolerance))
    for wrong, message in mistakes:
        if matches(got, wrong):
            raise ExerciseError(f"{what}: {message}")


@contextmanager
def seeded(seed: int):
    """Run the block with torch's global generator seeded with `seed`, then put back the
    state it had: a checker builds the same models on every call and leaves the caller's
    random numbers as they were. Only the CPU generator is seeded (the checkers build their
    models on the CPU); Python's and NumPy's generators are not touched."""
    state = torch.random.get_rng_state()
    torch.random.default_generator.manual_seed(seed)
    try:
        yield
    finally:
        torch.random.set_rng_state(state)


def run_attempt(attempt, *args, what: str, returns: tuple = (), grad: bool = False,
                **kwargs):
    """attempt(*args, **kwargs), without gradients unless `grad` (then with autograd as the
    caller has it: for an attempt that computes gradients or whose result is differentiated);
    an error it raises becomes an ExerciseError that names `what` and the error (an
    ExerciseError it raises passes unchanged). Given `returns`, the names of what the attempt
    returns, such as ("u", "alpha"), the result must be a tuple of as many."""
    try:
        with nullcontext() if grad else torch.no_grad():
            result = attempt(*args, **kwargs)
    except ExerciseError:
        raise
    except Exception as error:
        raise ExerciseError(f"{what}: your function raised {type(error).__name__}: "
                            f"{error}") from error
    if returns:
        given = f"a tuple of {len(result)}" if isinstance(result, tuple) else \
            type(result).__name__
        expect(isinstance(result, tuple) and len(result) == len(returns),
               f"{what}: return a tuple ({', '.join(returns)}), got {given}")
    return result


def passed(what: str) -> None:
    """Report a successful check."""
    print(f"correct: {what}")
