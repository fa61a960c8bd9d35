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


__all__ = ["ExerciseError", "expect", "expect_close", "passed"]

# The checkers, one module per page (imported after the helpers they use).
from seqlib.exercises.attention import check_additive_attention  # noqa: E402
from seqlib.exercises.captioning import check_grid_attention  # noqa: E402
from seqlib.exercises.decoding import check_beam_step, check_fit_temperature  # noqa: E402
from seqlib.exercises.embeddings import check_analogy  # noqa: E402
from seqlib.exercises.encoder_decoder import check_greedy_decoding  # noqa: E402
from seqlib.exercises.forecasting import check_companion, check_feed_back  # noqa: E402
from seqlib.exercises.gated import check_peephole_lstm, check_pytorch_gru  # noqa: E402
from seqlib.exercises.language_models import check_top_p  # noqa: E402
from seqlib.exercises.length import check_stateful_reverse  # noqa: E402
from seqlib.exercises.pretraining import check_lm_targets  # noqa: E402
from seqlib.exercises.recurrent import (  # noqa: E402
    check_rnn_forward,
    check_sequence_loss,
    check_truncated_bptt,
)
from seqlib.exercises.scores import check_additive_scores  # noqa: E402
from seqlib.exercises.self_attention import check_multi_head_attention  # noqa: E402
from seqlib.exercises.sentiment import check_bidirectional_ends, check_masked_mean  # noqa: E402
from seqlib.exercises.stacking import check_bidirectional  # noqa: E402
from seqlib.exercises.subwords import check_bpe_encoder, check_bpe_learner  # noqa: E402
from seqlib.exercises.trainability import check_masked_batch_norm  # noqa: E402
from seqlib.exercises.transformer import check_pre_norm_block, check_rms_norm  # noqa: E402
from seqlib.exercises.transformer_lm import check_min_p_filter  # noqa: E402
from seqlib.exercises.translation import check_sequence_log_prob  # noqa: E402
from seqlib.exercises.window import check_window_features  # noqa: E402

__all__ += ["check_additive_attention", "check_grid_attention", "check_beam_step",
            "check_fit_temperature", "check_analogy", "check_greedy_decoding",
            "check_companion", "check_feed_back", "check_peephole_lstm",
            "check_pytorch_gru", "check_top_p", "check_stateful_reverse",
            "check_rnn_forward", "check_sequence_loss", "check_truncated_bptt",
            "check_additive_scores", "check_multi_head_attention",
            "check_bidirectional_ends", "check_masked_mean", "check_bidirectional",
            "check_bpe_encoder", "check_bpe_learner", "check_pre_norm_block",
            "check_rms_norm", "check_min_p_filter", "check_sequence_log_prob",
            "check_window_features", "check_lm_targets", "check_masked_batch_norm"]
