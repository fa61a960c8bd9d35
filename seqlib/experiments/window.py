"""A fixed-window language model: the feed-forward alternative to recurrence (beyond the
chapter; Bengio et al., 2003).

The next character after x^<t> is predicted from the last k characters only, their
embeddings concatenated and passed through one hidden layer:

    e^<t> = [E x^<t-k+1>; ...; E x^<t>]       (k d_e): the window, oldest first
    h^<t> = tanh(W_he e^<t> + b_h)             (m)
    logits^<t> = W_yh h^<t> + b_y               (V)

Whatever it has read, it sees nothing older than k characters; the recurrent state h^<t> of
(7.2) summarises the whole past in m numbers instead. Like seqlib.lm.RecurrentLM,
`forward(ids (B, T), state=None)` returns the logits (B, T, V) and a state for the next
chunk of the same streams: here the last k - 1 ids, (1, B, k - 1) with the batch second as
in a recurrent state, and -1 where a stream had not started yet (read as zero vectors). So
it trains and evaluates as the recurrent models do (seqlib.experiments.streams) and
seqlib.lm.generate writes text with it.
"""

import torch
from torch import nn

from seqlib.checks import check_ids, positive_int
from seqlib.experiments.shakespeare import matched_hidden_size, parameter_count
from seqlib.lm import select_state, stream_start, stream_step
from seqlib.pages.seeds import seed_everything


class WindowLM(nn.Module):
    """Embedding -> window of the last `window` embeddings -> tanh layer of `hidden_size`
    units -> logits over the vocabulary."""

    def __init__(self, vocab_size: int, window: int, embed_size: int, hidden_size: int):
        super().__init__()
        for name, value in [("vocab_size", vocab_size), ("window", window),
                            ("embed_size", embed_size), ("hidden_size", hidden_size)]:
            positive_int(name, value)
        self.vocab_size, self.window = vocab_size, window
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.hidden = nn.Linear(window * embed_size, hidden_size)  # W_he, b_h
        self.output = nn.Linear(hidden_size, vocab_size)  # W_yh, b_y

    def forward(self, ids: torch.Tensor, state=None):
        """Logits (B, T, V) of the next character after each of ids (B, T), and the state."""
        check_ids(ids, vocab_size=self.vocab_size, nonempty=True)
        if ids.dim() != 2:
            raise ValueError(f"ids must be (batch, time), got shape {tuple(ids.shape)}")
        B, T = ids.shape
        k = self.window
        if state is None:
            state = ids.new_full((1, B, k - 1), -1)  # no character before the stream starts
        if not isinstance(state, torch.Tensor) or tuple(state.shape) != (1, B, k - 1):
            got = tuple(state.shape) if isinstance(state, torch.Tensor) else type(state).__name__
            raise ValueError(f"state must be None or the last {k - 1} ids, (1, {B}, {k - 1}), "
                             f"got {got}")
        full = torch.cat([state[0], ids], dim=1)  # (B, k - 1 + T)
        x = self.embedding(full.clamp_min(0)) * (full >= 0)[..., None]  # (B, k - 1 + T, E)
        windows = x.unfold(1, k, 1)  # (B, T, E, k): window t holds x^<t-k+1>, ..., x^<t>
        e = windows.transpose(2, 3).reshape(B, T, -1)  # (B, T, k E), oldest first
        logits = self.output(torch.tanh(self.hidden(e)))  # (B, T, V)
        return logits, full[:, full.shape[1] - (k - 1):][None]  # (1, B, k - 1)

    def initial_state(self, batch_size: int) -> torch.Tensor:
        """The state before a stream starts, which forward takes for None: (1, B, k - 1)
        ids of -1, no character yet."""
        return torch.full((1, positive_int("batch_size", batch_size), self.window - 1), -1,
                          device=self.embedding.weight.device)

    # The decoding protocol of seqlib.decoding, as for every model that reads a stream.
    def start(self, src: torch.Tensor, src_mask: torch.Tensor):
        return stream_start(self, src, src_mask)

    def step(self, tokens: torch.Tensor, state):
        return stream_step(self, tokens, state)

    reorder = staticmethod(select_state)


def window_parameter_count(vocab_size: int, window: int, embed_size: int,
                           hidden_size: int) -> int:
    """Parameters of WindowLM: the embedding V E, the hidden layer k E m + m and the output
    layer m V + V."""
    V, k, E, m = vocab_size, window, embed_size, hidden_size
    return V * E + k * E * m + m + m * V + V


def matched_window_model(vocab_size: int, window: int, model: dict, seed: int = 0):
    """The WindowLM of `window` whose hidden size brings it closest to the parameter count
    of the LSTM language model of `model`, the "model" of shakespeare's setup "recurrent"
    (shakespeare.recurrent_model("lstm", ...)), built after seqlib.seed_everything(seed)."""
    lstm_hidden = matched_hidden_size("lstm", vocab_size, model)
    target = parameter_count("lstm", vocab_size, lstm_hidden, model["embed_size"],
                             model["num_layers"])
    E = model["embed_size"]
    hidden = min(range(1, 8192), key=lambda m: abs(
        window_parameter_count(vocab_size, window, E, m) - target))
    seed_everything(seed)
    return WindowLM(vocab_size, window, E, hidden)
