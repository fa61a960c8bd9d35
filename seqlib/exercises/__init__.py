"""Checkers for the book's exercises: call one on your own attempt.

Each checker takes what an exercise asks you to write (a function, a module class, a
number), runs it on inputs of its own and compares the result with the book's answer. When
the attempt is right it prints what it checked and returns None; otherwise it raises
ExerciseError saying what is wrong: which input, what came back, what was expected.

The checkers live in one module per chapter topic and are all importable from here, as in
`from seqlib.exercises import check_peephole_lstm`.
"""

import importlib

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


def run_attempt(attempt, *args, what: str, **kwargs):
    """attempt(*args, **kwargs) without gradients; an error it raises becomes an ExerciseError
    that names `what` and the error."""
    try:
        with torch.no_grad():
            return attempt(*args, **kwargs)
    except Exception as error:
        raise ExerciseError(f"{what}: your function raised {type(error).__name__}: "
                            f"{error}") from error


def passed(what: str) -> None:
    """Report a successful check."""
    print(f"correct: {what}")


# The checkers, one module per page, each imported when first asked for (so that a page
# loads only the parts of seqlib its own checkers need).
CHECKERS = {
    "check_additive_attention": "attention",
    "check_grid_attention": "captioning",
    "check_beam_step": "decoding",
    "check_fit_temperature": "decoding",
    "check_analogy": "embeddings",
    "check_greedy_decoding": "encoder_decoder",
    "check_companion": "forecasting",
    "check_feed_back": "forecasting",
    "check_peephole_lstm": "gated",
    "check_pytorch_gru": "gated",
    "check_top_p": "language_models",
    "check_stateful_reverse": "length",
    "check_lm_targets": "pretraining",
    "check_rnn_forward": "recurrent",
    "check_sequence_loss": "recurrent",
    "check_truncated_bptt": "recurrent",
    "check_additive_scores": "scores",
    "check_multi_head_attention": "self_attention",
    "check_bidirectional_ends": "sentiment",
    "check_masked_mean": "sentiment",
    "check_bidirectional": "stacking",
    "check_bpe_encoder": "subwords",
    "check_bpe_learner": "subwords",
    "check_masked_batch_norm": "trainability",
    "check_pre_norm_block": "transformer",
    "check_rms_norm": "transformer",
    "check_min_p_filter": "transformer_lm",
    "check_sequence_log_prob": "translation",
    "check_window_features": "window",
}

__all__ = ["ExerciseError", "expect", "expect_close", "passed", *CHECKERS]


def __getattr__(name: str):
    """A checker, imported from its module on first use (PEP 562)."""
    if name not in CHECKERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    checker = getattr(importlib.import_module(f"{__name__}.{CHECKERS[name]}"), name)
    globals()[name] = checker
    return checker
