"""Checkers for the book's exercises: call one on your own attempt.

Each checker takes what an exercise asks you to write (a function, a module class, a
number), runs it on inputs of its own and compares the result with the book's answer. When
the attempt is right it prints what it checked and returns None; otherwise it raises
ExerciseError saying what is wrong: which input, what came back, what was expected.

The checkers live in one module per topic of the book's pages (`recurrent` serves the pages on
the RNN and on BPTT) and are all importable from here, as in
`from seqlib.exercises import check_peephole_lstm`; what they share is in `toolkit`.
"""

import importlib

from seqlib.exercises.toolkit import ExerciseError, expect, expect_close, passed

# The checkers, one module per topic, each imported when first asked for (so that a page
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
