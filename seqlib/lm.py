"""Character-level language models (Section 7.3): embedding -> recurrent unit -> vocabulary.

The model reads characters x^<1>, ..., x^<T> and, at every step t, outputs the logits of
the next character x^<t+1>; the loss is the cross-entropy averaged over all predicted
characters, in nats per character. A long text is read by truncated backpropagation
through time: it is cut into chunks of `context` steps, the hidden state is carried from
one chunk to the next (so the forward pass remembers beyond the chunk) but detached (so
the backward pass stops at the chunk boundary). Ids are (batch, time) tensors, logits
(batch, time, vocabulary).

The experiments of chapters 7.3 and 7.5 share their plumbing, so that both train the same
models the same way: the configurations (`BOOK_PROFILE`, `FULL_PROFILE`, `profile`), the
parameter-matched recurrent models (`parameter_count`, `matched_hidden_size`,
`recurrent_model`), the training (`lr_factor`, `fit`) and its cache (`trained`).
"""

import hashlib
import math
import os

import torch
import torch.nn.functional as F
from torch import nn

from seqlib import decoding
from seqlib.gated import GRU, LSTM
from seqlib.rnn import RNN, positive_int
from seqlib.text import SPECIALS, Vocab, check_ids
from seqlib.train import cached, train
from seqlib.utils import seed_everything

UNITS = {"rnn": RNN, "lstm": LSTM, "gru": GRU}
GATE_BLOCKS = {"rnn": 1, "gru": 3, "lstm": 4}  # G: blocks of (W_hh, W_hx, b_h) per layer

# The character-level experiments' configurations, shared by the chapters so that their
# models (and cache keys) agree: the book profile trains on a laptop CPU in minutes,
# SEQLIB_FULL=1 selects one for a GPU.
BOOK_PROFILE = dict(embed_size=32, hidden_size=192, num_layers=1, batch_size=12, context=64,
                    steps=2000, lr=1e-2, warmup=100)
FULL_PROFILE = dict(embed_size=64, hidden_size=512, num_layers=2, batch_size=64, context=256,
                    steps=600, lr=2e-3, warmup=50)
FIT_KEYS = ("batch_size", "context", "steps", "lr", "warmup")  # what `fit` reads from a config


class RecurrentLM(nn.Module):
    """nn.Embedding -> RNN (7.2), LSTM (7.16)-(7.17) or GRU (7.18)-(7.19) with its output
    layer (W_yh, b_y) over the vocabulary.

    `forward(ids (B, T), state=None)` returns the logits (B, T, V) of the next character
    at every step and the last state (a tensor (L, B, m), or (h, c) for the LSTM), to be
    passed back in with the next chunk of the same streams.
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


def detach_state(state):
    """The state cut from the graph of the chunk that produced it (truncated BPTT).

    Works for None, a tensor (RNN, GRU) or a tuple of tensors ((h, c) of the LSTM)."""
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.detach()
    if isinstance(state, tuple):
        return tuple(s.detach() for s in state)
    raise TypeError(f"state must be None, a tensor or a tuple of tensors, "
                    f"got {type(state).__name__}")


def split_corpus(ids: torch.Tensor, train_fraction: float = 0.9):
    """(train, validation): the first `train_fraction` of the 1-D id stream, then the rest."""
    check_ids(ids, nonempty=True)
    if ids.dim() != 1:
        raise ValueError(f"ids must be a 1-D stream of token ids, got shape {tuple(ids.shape)}")
    if isinstance(train_fraction, bool) or not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must lie strictly between 0 and 1, "
                         f"got {train_fraction!r}")
    n = int(len(ids) * train_fraction)
    if n < 2 or len(ids) - n < 2:
        raise ValueError(f"train_fraction={train_fraction} of {len(ids)} ids leaves a part "
                         "with fewer than 2 ids (at least one (input, target) pair each)")
    return ids[:n], ids[n:]


def _check_stream(ids, batch_size, context, name="ids") -> None:
    check_ids(ids, name=name, nonempty=True)
    if ids.dim() != 1:
        raise ValueError(f"{name} must be a 1-D stream of token ids, got shape "
                         f"{tuple(ids.shape)}")
    positive_int("batch_size", batch_size)
    positive_int("context", context)
    if len(ids) - 1 < batch_size:
        raise ValueError(f"{name} has {len(ids) - 1} (input, target) pairs, fewer than "
                         f"batch_size={batch_size} streams")


def contiguous_batches(ids: torch.Tensor, batch_size: int, context: int):
    """Endless chunks (x, y), each (batch_size, context), for truncated BPTT.

    The pairs (ids[j], ids[j+1]) are read as batch_size parallel streams, stream b
    starting at pair b N / batch_size of the N pairs, and each stream runs on
    contiguously, wrapping around from the end of the text to its start. So row b of
    chunk i+1 continues row b of chunk i, and the state carried from one chunk to the
    next belongs to the same stream; every target is the true next character.
    """
    _check_stream(ids, batch_size, context)
    inputs, targets = ids[:-1], ids[1:]
    N = len(inputs)
    starts = torch.arange(batch_size) * N // batch_size  # (B,) first pair of each stream
    steps = torch.arange(context)  # (T,)
    position = 0
    while True:
        index = (starts[:, None] + position + steps) % N  # (B, T)
        yield inputs[index], targets[index]
        position = (position + context) % N


def carried_state_loss():
    """A `loss_fn(model, (x, y))` for seqlib.train.train that carries the state.

    Each call runs the model on chunk x from the state left by the previous call, then
    detaches the new state (truncated BPTT); the loss is the mean cross-entropy of the
    chunk in nats per character. Use a fresh one for each training run.
    """
    state = None

    def loss_fn(model, batch):
        nonlocal state
        x, y = batch
        logits, state = model(x, state)  # (B, T, V)
        state = detach_state(state)
        return F.cross_entropy(logits.flatten(0, 1), y.flatten())

    return loss_fn


def _select(state, rows: slice):
    """The rows (streams) of a state: None, a tensor (L, B, m) or a tuple of them."""
    if state is None:  # a model that carries no state (seqlib.transformer.TransformerLM)
        return None
    if isinstance(state, tuple):
        return tuple(s[:, rows] for s in state)
    return state[:, rows]


@torch.no_grad()
def evaluate(model: nn.Module, ids: torch.Tensor, batch_size: int, context: int, *,
             carry_state: bool = True) -> float:
    """Mean cross-entropy, in nats per character, of every prediction of the 1-D stream.

    The N pairs (ids[j], ids[j+1]) are cut into batch_size streams of L = N // batch_size
    consecutive pairs, read in chunks of `context` steps with the state carried; the last
    N - batch_size L pairs continue the last stream. Each pair is counted exactly once.
    With carry_state=False every chunk starts from the initial state, so no prediction sees
    more than `context` characters: the view of a model without state (TransformerLM,
    whose chunks must fit its max_len).
    """
    _check_stream(ids, batch_size, context)
    if not isinstance(carry_state, bool):
        raise TypeError(f"carry_state must be a bool, got {carry_state!r}")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    inputs, targets = ids[:-1].to(device), ids[1:].to(device)
    N = len(inputs)
    L = N // batch_size
    rows_x = inputs[: batch_size * L].view(batch_size, L)  # (B, L): stream b is row b
    rows_y = targets[: batch_size * L].view(batch_size, L)
    total, state = 0.0, None
    for i in range(0, L, context):
        state = state if carry_state else None
        logits, state = model(rows_x[:, i:i + context], state)  # (B, T, V)
        total += F.cross_entropy(logits.flatten(0, 1), rows_y[:, i:i + context].flatten(),
                                 reduction="sum").item()
    if batch_size * L < N:  # the tail continues the last stream
        state = _select(state, slice(batch_size - 1, batch_size))
        for i in range(batch_size * L, N, context):
            state = state if carry_state else None
            logits, state = model(inputs[None, i:i + context], state)  # (1, T, V)
            total += F.cross_entropy(logits[0], targets[i:i + context], reduction="sum").item()
    model.train(was_training)
    return total / N


@torch.no_grad()
def sample(model: RecurrentLM, vocab: Vocab, prompt: str, length: int, temperature: float,
           generator: torch.Generator) -> str:
    """The prompt followed by `length` characters drawn one at a time from the model.

    Each character is drawn from softmax(logits / temperature) with torch.multinomial and
    the given CPU generator, then fed back in. temperature < 1 sharpens the distribution,
    > 1 flattens it. The special tokens never occur in the text and are never drawn.
    """
    if not isinstance(vocab, Vocab):
        raise TypeError(f"vocab must be a seqlib.text.Vocab, got {type(vocab).__name__}")
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"prompt must be a non-empty str, got {prompt!r}")
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise ValueError(f"length must be an int >= 0, got {length!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not temperature > 0:
        raise ValueError(f"temperature must be a number > 0, got {temperature!r}")
    if not isinstance(generator, torch.Generator) or generator.device.type != "cpu":
        raise TypeError("generator must be a CPU torch.Generator (for example the one "
                        f"seqlib.seed_everything returns), got {generator!r}")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    ids = torch.tensor([vocab.encode(prompt)], device=device)  # (1, T)
    logits, state = model(ids)
    drawn = []
    for _ in range(length):
        last = logits[0, -1].float().cpu() / temperature  # (V,)
        last[: len(SPECIALS)] = -float("inf")
        next_id = torch.multinomial(torch.softmax(last, dim=-1), 1, generator=generator)
        drawn.append(next_id.item())
        logits, state = model(next_id.view(1, 1).to(device), state)
    model.train(was_training)
    return prompt + vocab.to_text(vocab.decode(drawn))


class _TextOnly(nn.Module):
    """A language model of the decoding protocol whose steps never propose the special
    tokens (they never occur in running text), so generation runs to its full length."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model, self.tgt_vocab_size = model, getattr(model, "tgt_vocab_size", None)
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
    """Continuations of `prompt` by `length` tokens from a language model that follows the
    decoding protocol (seqlib.transformer.TransformerLM), generated by (7.34) one token at
    a time: method "greedy", "sample" (`samples` draws; options temperature, top_k, top_p)
    or "beam" (options beam_size, length_penalty; the best hypothesis). Returns the prompt
    plus each continuation."""
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
    out = methods[method](_TextOnly(model), ids, torch.ones_like(ids, dtype=torch.bool),
                          start_id=ids[0, -1].item(), stop_id=vocab.stop_id,
                          max_len=positive_int("length", length), **options)
    if method == "beam":
        out = [hypotheses[0][0] for hypotheses in out]
    return [prompt + vocab.to_text(vocab.decode(tokens)) for tokens in out]


def profile() -> dict:
    """FULL_PROFILE when the environment variable SEQLIB_FULL is "1", else BOOK_PROFILE."""
    return dict(FULL_PROFILE if os.environ.get("SEQLIB_FULL") == "1" else BOOK_PROFILE)


def parameter_count(unit: str, vocab_size: int, hidden_size: int, embed_size: int,
                    num_layers: int = 1) -> int:
    """Parameters of RecurrentLM(unit, vocab_size, embed_size, hidden_size, num_layers):
    the embedding V E, then per layer G (m^2 + m p + m) with G gate blocks of
    (W_hh, W_hx, b_h), m units and p inputs (E for the first layer, m above it), then
    the output layer m V + V."""
    if unit not in GATE_BLOCKS:
        raise ValueError(f"unit must be one of {sorted(GATE_BLOCKS)}, got {unit!r}")
    V, E, m = vocab_size, embed_size, hidden_size
    G = GATE_BLOCKS[unit]
    recurrent = sum(G * (m * m + m * (E if layer == 0 else m) + m) for layer in range(num_layers))
    return V * E + recurrent + m * V + V


def matched_hidden_size(unit: str, vocab_size: int, config: dict) -> int:
    """The state size m (1 to 4095) that brings `unit`'s model closest to the parameter
    count of the LSTM model with config["hidden_size"] units (the smallest m on a tie), so
    that the three units are compared at the same size."""
    E, layers = config["embed_size"], config["num_layers"]
    target = parameter_count("lstm", vocab_size, config["hidden_size"], E, layers)
    return min(range(1, 4096),
               key=lambda m: abs(parameter_count(unit, vocab_size, m, E, layers) - target))


def recurrent_model(unit: str, vocab_size: int, config: dict, seed: int = 0) -> RecurrentLM:
    """The RecurrentLM of `unit` for `config` with the parameter-matched state size,
    initialised after seed_everything(seed): every chapter that builds it gets the same one."""
    hidden = matched_hidden_size(unit, vocab_size, config)
    seed_everything(seed)
    return RecurrentLM(unit, vocab_size, config["embed_size"], hidden, config["num_layers"])


def lr_factor(step: int, warmup: int, total: int) -> float:
    """The learning rate at `step` as a fraction of the peak: a linear warm-up over the
    first `warmup` steps, then a cosine decay to a tenth of the peak at step `total`."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.1 + 0.45 * (1 + math.cos(math.pi * progress))


def fit(model: nn.Module, train_ids: torch.Tensor, config: dict, *, desc: str = "train",
        progress: bool = True) -> dict:
    """Train `model` for config["steps"] chunks of `train_ids` (contiguous_batches of
    config["batch_size"] x config["context"]) with the state carried (carried_state_loss):
    AdamW at peak rate config["lr"] with the schedule lr_factor(step, config["warmup"],
    config["steps"]), gradients clipped at norm 1. Optional keys: "beta2" (default 0.999)
    and "weight_decay" (default 0.01), AdamW's own defaults. Returns seqlib.train.train's
    history."""
    if not isinstance(config, dict) or any(key not in config for key in FIT_KEYS):
        raise ValueError(f"config must be a dict with the keys {FIT_KEYS}, got {config!r}")
    steps, warmup = config["steps"], config["warmup"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"],
                                  betas=(0.9, config.get("beta2", 0.999)),
                                  weight_decay=config.get("weight_decay", 0.01))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                 lambda step: lr_factor(step, warmup, steps))
    optimizer.register_step_post_hook(lambda *args: schedule.step())  # after every step
    device = next(model.parameters()).device
    batches = contiguous_batches(train_ids.to(device), config["batch_size"], config["context"])
    return train(model, carried_state_loss(), batches, steps=steps, optimizer=optimizer,
                 clip=1.0, progress=progress, desc=desc)


def trained(name: str, model: nn.Module, train_ids: torch.Tensor, config: dict) -> dict:
    """`fit(model, train_ids, config)` through seqlib.train.cached: the first run trains
    and saves the weights and history; an identical later run (same name, model, data,
    configuration, device and code) loads them instead. Returns the history. No progress
    bar, so a page shows the same output whether its models were trained or loaded."""
    check_ids(train_ids, name="train_ids", nonempty=True)
    digest = hashlib.sha256(train_ids.cpu().numpy().tobytes()).hexdigest()
    device = next(model.parameters()).device.type
    return cached(name, model, lambda: fit(model, train_ids, config, desc=name, progress=False),
                  sorted(config.items()), len(train_ids), digest, device)
