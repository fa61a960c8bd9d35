"""Language models: the character-level recurrent models of Section 7.3 (embedding ->
recurrent unit -> vocabulary) and the decoder-only transformer of Section 7.5.

At every step t a model reads x^<t> and outputs the logits of x^<t+1>. A stream model,
forward(ids, state) -> (logits, state), follows the decoding protocol through `stream_start`,
`stream_step` and `select_state`; `generate` writes text with it.
"""

import warnings

import torch
from torch import nn

from seqlib import decoding
from seqlib.checks import check_decoding_state, check_ids, check_source, positive_int
from seqlib.gated import UNITS
from seqlib.positional import PositionalEmbedding
from seqlib.text import SPECIALS, UNK, Vocab
from seqlib.transformer import LayerNorm, PreNormBlock, TransformerBlock, select_batch


def select_state(state, rows):
    """The rows of a carried state: None, a tensor (L, B, m) or a tuple of them."""
    if state is None:  # a model that carries no state (TransformerLM)
        return None
    if isinstance(state, tuple):
        return tuple(s[:, rows] for s in state)
    return state[:, rows]


def stream_start(model: nn.Module, src: torch.Tensor, src_mask: torch.Tensor):
    """The protocol's start for a stream model: the state after every prompt token but the
    last, which the decoding functions feed as start_id (prompts of one length)."""
    check_source(src, src_mask, model.vocab_size)
    if not src_mask.all():
        raise ValueError("prompts must all have one length (src_mask all True)")
    if src.shape[1] == 1:
        return model.initial_state(src.shape[0])
    return model(src[:, :-1])[1]  # forward starts from the initial state


def stream_step(model: nn.Module, tokens: torch.Tensor, state):
    """The protocol's step for a stream model, (7.3) one-to-many: tokens (N,) -> logits, state."""
    check_ids(tokens, name="tokens", dim=1, vocab_size=model.vocab_size)
    if state is None:
        raise ValueError("state must be the state that model.start(prompts, mask) returned "
                         "(the prompt read so far), then the one each step returns, got None: "
                         "None would drop the prompt")
    logits, state = model(tokens[:, None], state)  # (N, 1, V)
    return logits[:, -1], state


class RecurrentLM(nn.Module):
    """nn.Embedding -> RNN (7.2), LSTM (7.16)-(7.17) or GRU (7.18)-(7.19) with its output
    layer (W_yh, b_y) over the vocabulary.

    `forward(ids (B, T), state=None)` returns the logits (B, T, V) of the next character
    at every step and the last state (a tensor (L, B, m), or (h, c) for the LSTM), to be
    passed back in with the next chunk of the same streams.

    It follows the decoding protocol of seqlib.decoding (`start`, `step`, `reorder`), as
    TransformerLM does, so `generate` writes text with either; `start` returns the state
    after the prompt, `initial_state` (zeros) for a one-token prompt.
    """

    def __init__(self, unit: str, vocab_size: int, embed_size: int, hidden_size: int,
                 num_layers: int = 1, *, fast: bool = True):
        super().__init__()
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {sorted(UNITS)}, got {unit!r}")
        for name, value in [("vocab_size", vocab_size), ("embed_size", embed_size),
                            ("hidden_size", hidden_size), ("num_layers", num_layers)]:
            positive_int(name, value)
        self.unit, self.vocab_size = unit, vocab_size
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.recurrent = UNITS[unit](embed_size, hidden_size, num_layers=num_layers,
                                     output_size=vocab_size, fast=fast)

    def forward(self, ids: torch.Tensor, state=None):
        """Logits (B, T, V) of the next character after each of ids (B, T), and the state."""
        check_ids(ids, vocab_size=self.vocab_size, nonempty=True)
        if ids.dim() != 2:
            raise ValueError(f"ids must be (batch, time), got shape {tuple(ids.shape)}")
        x = self.embedding(ids)  # (B, T, embed_size)
        return self.recurrent(x, state)  # logits (B, T, V), state

    def initial_state(self, batch_size: int):
        """The state forward starts from by default, zeros, as the recurrent unit's
        `initial_state`: a tensor (L, B, m), or (h, c) for the LSTM."""
        return self.recurrent.initial_state(positive_int("batch_size", batch_size),
                                            self.embedding.weight)

    # The decoding protocol, shared with every model that reads a stream (below).
    def start(self, src: torch.Tensor, src_mask: torch.Tensor):
        return stream_start(self, src, src_mask)

    def step(self, tokens: torch.Tensor, state):
        return stream_step(self, tokens, state)

    reorder = staticmethod(select_state)


class TransformerLM(nn.Module):
    """A decoder-only transformer language model (beyond the chapter): token embeddings plus
    a learned table of positions (`positional="learned"`) or sinusoidal positions (7.29),
    `num_layers` blocks (7.31) with causal self-attention (7.27), a final LayerNorm
    (pre-norm, the default, as GPT-2 and nanoGPT) and an output layer over the vocabulary.
    `norm_first=False` gives the chapter's post-norm blocks (7.31) and no final LayerNorm;
    `block`, a block class of one's own (an experiment's variant), replaces the blocks.

    forward(ids (B, T), state=None) returns the logits (B, T, V) of the next token after
    each position and None: unlike a recurrent model, nothing is carried from one chunk to
    the next (the context is the chunk, at most max_len tokens), so it trains and evaluates
    with the same functions as the recurrent models (seqlib.experiments.streams).

    Decoding protocol: `start(prompts (N, S), mask)` reads every prompt token but the last
    (prompts of one length), which the decoding functions then feed as start_id. Past
    max_len tokens, each step reads the last max_len tokens (a sliding window).
    """

    def __init__(self, vocab_size: int, p: int, heads: int, n1: int, num_layers: int, *,
                 max_len: int, m: int | None = None, m_v: int | None = None,
                 dropout: float = 0.0, norm_first: bool = True, positional: str = "learned",
                 block: type | None = None):
        super().__init__()
        self.vocab_size, self.max_len = positive_int("vocab_size", vocab_size), max_len
        self.norm_first = norm_first
        self.tgt_vocab_size, self.kv_cache = vocab_size, True
        self.embedding = nn.Embedding(vocab_size, p)
        self.positions = PositionalEmbedding(max_len, p, kind=positional)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            (block or (PreNormBlock if norm_first else TransformerBlock))(
                p, heads, m, m_v, n1, dropout=dropout)
            for _ in range(positive_int("num_layers", num_layers)))
        self.norm = LayerNorm(p) if norm_first else nn.Identity()
        self.output = nn.Linear(p, vocab_size)

    def logits(self, ids: torch.Tensor, caches: list | None = None, offset: int = 0):
        """Logits (B, T, V) after each of ids (B, T) at positions offset + 1, offset + 2, ..."""
        check_ids(ids, vocab_size=self.vocab_size, dim=2, nonempty=True)
        x = self.dropout(self.positions(self.embedding(ids), offset))  # (B, T, p)
        for i, block in enumerate(self.blocks):
            x = block(x, causal=True, cache=None if caches is None else caches[i])
        return self.output(self.norm(x))  # (B, T, V)

    def forward(self, ids: torch.Tensor, state=None):
        if state is not None:
            raise ValueError("a TransformerLM carries no state between chunks: pass "
                             "state=None")
        return self.logits(ids), None

    def start(self, src: torch.Tensor, src_mask: torch.Tensor) -> dict:
        check_source(src, src_mask, self.vocab_size)
        if not src_mask.all():
            raise ValueError("prompts must all have one length (src_mask all True)")
        state = {"tokens": src[:, :-1], "caches": None}
        S = src.shape[1]
        if self.kv_cache and S <= self.max_len:
            state["caches"] = [{} for _ in self.blocks]
            if S > 1:
                self.logits(src[:, :-1], state["caches"])  # fills the caches
        return state

    def step(self, tokens: torch.Tensor, state: dict):
        """(7.34): the previous tokens (N,) -> logits (N, V) of the next, and the state."""
        check_ids(tokens, name="tokens", dim=1, vocab_size=self.vocab_size)
        check_decoding_state(state, ("tokens", "caches"))
        history = torch.cat([state["tokens"], tokens[:, None]], dim=1)  # (N, t)
        t, caches = history.shape[1], state["caches"]
        if caches is not None and t <= self.max_len:  # one new token, at position t
            logits = self.logits(tokens[:, None], caches, offset=t - 1)
        else:  # the whole prefix again, or its last max_len tokens
            logits, caches = self.logits(history[:, -self.max_len:]), None
        return logits[:, -1], {"tokens": history, "caches": caches}

    reorder = staticmethod(select_batch)


class _TextOnly(nn.Module):
    """A language model whose steps never propose the special tokens."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model, self.tgt_vocab_size = model, getattr(model, "vocab_size", None)
        self.train(model.training)  # decoding restores this mode, the model's own

    def start(self, src, src_mask):
        return self.model.start(src, src_mask)

    def step(self, tokens, state):
        logits, state = self.model.step(tokens, state)
        return logits.index_fill(-1, torch.arange(len(SPECIALS), device=logits.device),
                                 -float("inf")), state

    def reorder(self, state, index):
        return self.model.reorder(state, index)


def generate(model: nn.Module, vocab: Vocab, prompt: str, length: int, *,
             method: str = "sample", samples: int = 1, generator: torch.Generator | None = None,
             **options) -> list[str]:
    """The prompt plus continuations by `length` tokens, by (7.34), from a language model of
    the decoding protocol: method "greedy", "sample" (`samples` draws with `generator`) or
    "beam" (the best hypothesis); `options` go to seqlib.decoding's function."""
    methods = {"greedy": decoding.greedy, "sample": decoding.sample, "beam": decoding.beam_search}
    if method not in methods:
        raise ValueError(f"method must be one of {sorted(methods)}, got {method!r}")
    if not isinstance(vocab, Vocab):
        raise TypeError(f"vocab must be a seqlib.text.Vocab, got {type(vocab).__name__}")
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"prompt must be a non-empty str, got {prompt!r}")
    positive_int("samples", samples)
    if method != "sample" and samples != 1:
        raise ValueError(f"samples={samples} is for method='sample'; {method!r} gives one")
    if method == "sample":
        options["generator"] = generator
    device = next(model.parameters()).device
    ids = torch.tensor([vocab.encode(prompt)] * samples, device=device)  # (samples, S)
    unknown = [c for c in dict.fromkeys(prompt) if c not in vocab]  # in order, once each
    if unknown:
        warnings.warn(f"prompt {prompt!r} has characters not in the vocabulary, {unknown}: "
                      f"they are read as {UNK}; expected characters of the vocabulary",
                      UserWarning, stacklevel=2)
    out = methods[method](_TextOnly(model), ids, torch.ones_like(ids, dtype=torch.bool),
                          start_id=ids[0, -1].item(), stop_id=vocab.stop_id,
                          max_len=positive_int("length", length), **options)
    if method == "beam":
        out = [hypotheses[0][0] for hypotheses in out]
    return [prompt + vocab.to_text(vocab.decode(tokens)) for tokens in out]
