"""seqlib: every model of the chapter "Sequence Models", small enough to read.

The top-level modules are the chapter's library: its models and what they need (text, data,
the training loop, the argument checks). They never import the subpackages, which hold the
rest of the book: `experiments` (runs on real data, the pages beyond the chapter), `exercises`
(the checkers), `diagrams` (the figure code) and `pages` (the pages' tooling).

Conventions: tensors are (batch, time, features), ids (batch, time), padding masks True at
real tokens; names follow the chapter's notation (W_hh, W_hx, b_h, W_yh, b_y, zeta, g_f, ...);
nothing is downloaded at import time. The names below are imported on first use.
"""

import importlib
import pathlib

EXPORTS = {
    "RNN": "rnn", "RNNCell": "rnn",
    "GRU": "gated", "LSTM": "gated", "GRUCell": "gated", "LSTMCell": "gated",
    "MultiHeadAttention": "self_attention",
    "Transformer": "transformer", "TransformerBlock": "transformer",
    "TransformerDecoderBlock": "transformer", "TransformerLM": "lm",
    "transformer_block_params": "transformer",
    "train": "training", "adam": "training", "adamw": "training",
    "warmup_linear": "training", "warmup_cosine": "training",
    "count_parameters": "utils", "default_device": "utils",
}

__all__ = sorted(EXPORTS)
MODULES = {path.stem for path in pathlib.Path(__file__).parent.glob("*.py")} - {"__init__"}


def __getattr__(name: str):
    """seqlib.X for X in EXPORTS, imported from its module on first use, and each module
    of the chapter library, as seqlib.rnn (PEP 562)."""
    if name in MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
    globals()[name] = value
    return value
