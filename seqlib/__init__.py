"""seqlib: every model of the chapter "Sequence Models", small enough to read.

Conventions, once for the whole package:

- Tensors are (batch, time, features) everywhere: B sequences of T steps, each step a
  vector of p features (inputs) or m hidden units.
- Names follow the chapter's notation: W_hh, W_hx, b_h for the recurrence, W_yh, b_y for
  the output layer, zeta for the adjoints of backpropagation through time, g_f, g_i, g_o
  and c_tilde for the LSTM's gates.
- Nothing is downloaded at import time; the loaders in seqlib.data fetch on demand.
"""

from seqlib.gated import GRU, LSTM, GRUCell, LSTMCell
from seqlib.rnn import RNN, RNNCell
from seqlib.self_attention import MultiHeadAttention
from seqlib.training import train
from seqlib.transformer import (
                                Transformer,
                                TransformerBlock,
                                TransformerDecoderBlock,
                                TransformerLM,
                                transformer_block_params,
)
from seqlib.utils import count_parameters, default_device, seed_everything

__all__ = ["GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "MultiHeadAttention", "RNNCell",
           "Transformer", "TransformerBlock", "TransformerDecoderBlock", "TransformerLM",
           "count_parameters", "default_device", "seed_everything", "train",
           "transformer_block_params"]
