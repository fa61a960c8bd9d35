"""The character-level language models of tiny Shakespeare (pages 06 and 12, and the pages
beyond the chapter that reuse them): their configurations. A run of one is
`streams.run(name, model, train_ids, fit)`, so that every page that trains the same model
with the same settings shares it through the model cache.

- `PROFILES` (seqlib.pages.config): the setup "recurrent", the recurrent models
  (`recurrent_model`: "model" holds the embedding size, the LSTM's state size and the
  layers), and "transformer", the decoder-only transformer of Section 7.5
  (seqlib.lm.TransformerLM: "model" holds its constructor's arguments), each with the
  "fit" of its run. The book profile trains on a laptop CPU in minutes, the two on the
  same batches and steps; `SEQLIB_FULL=1` selects the full one, for a GPU, whose
  transformer is nanoGPT's shakespeare_char configuration (`python -m
  seqlib.experiments.distributed char-lm` trains it on one or more).

The recurrent models are compared at one size: `parameter_count` counts a model's
parameters, `matched_hidden_size` gives each unit the state size that matches the LSTM's
count and `recurrent_model` builds it. `passage_prompt` is the prompt their samples
continue.
"""

import re

from seqlib.lm import RecurrentLM
from seqlib.pages.seeds import seed_everything

GATE_BLOCKS = {"rnn": 1, "gru": 3, "lstm": 4}  # G: blocks of (W_hh, W_hx, b_h) per layer

# Each setup in its two profiles, side by side; PROFILES holds them as seqlib.pages.config
# reads them.
RECURRENT = {"book": {"model": dict(embed_size=32, hidden_size=192, num_layers=1),
                      "fit": dict(batch_size=12, context=64, steps=2000, lr=1e-2, warmup=100)},
             "full": {"model": dict(embed_size=64, hidden_size=512, num_layers=2),
                      "fit": dict(batch_size=64, context=256, steps=600, lr=2e-3, warmup=50)}}
TRANSFORMER = {  # AdamW with beta2 0.99 and weight decay 0.1, sinusoidal positions
    "book": {"model": dict(p=128, heads=4, n1=512, num_layers=4, max_len=64, dropout=0.0,
                           positional="sinusoidal"),
             "fit": dict(batch_size=12, context=64, steps=2000, lr=3e-3, warmup=100,
                         beta2=0.99, weight_decay=0.1)},
    "full": {"model": dict(p=384, heads=6, n1=1536, num_layers=6, max_len=256, dropout=0.2,
                           positional="sinusoidal"),
             "fit": dict(batch_size=64, context=256, steps=5000, lr=1e-3, warmup=100,
                         beta2=0.99, weight_decay=0.1)}}
PROFILES = {name: {"recurrent": RECURRENT[name], "transformer": TRANSFORMER[name]}
            for name in ("book", "full")}


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


def matched_hidden_size(unit: str, vocab_size: int, model: dict) -> int:
    """The state size m (1 to 4095) that brings `unit`'s model closest to the parameter
    count of the LSTM model with model["hidden_size"] units (the smallest m on a tie), so
    that the three units are compared at the same size; `model` is the "model" of the
    setup "recurrent" (embed_size, hidden_size, num_layers)."""
    E, layers = model["embed_size"], model["num_layers"]
    target = parameter_count("lstm", vocab_size, model["hidden_size"], E, layers)
    return min(range(1, 4096),
               key=lambda m: abs(parameter_count(unit, vocab_size, m, E, layers) - target))


def recurrent_model(unit: str, vocab_size: int, model: dict, seed: int = 0) -> RecurrentLM:
    """The RecurrentLM of `unit` for `model` (embed_size, hidden_size, num_layers) with the
    parameter-matched state size, initialised after seed_everything(seed): every chapter
    that builds it gets the same one."""
    hidden = matched_hidden_size(unit, vocab_size, model)
    seed_everything(seed)
    return RecurrentLM(unit, vocab_size, model["embed_size"], hidden, model["num_layers"])


def passage_prompt(text: str, start: int, speakers: int = 3) -> str:
    """A prompt of real text: from the first speaker's name at or after `start` in `text`
    (a line such as "GREMIO:") to the name of the `speakers`-th speaker, with its line
    break. A recurrent model trained with its state carried from chunk to chunk almost never
    met the zero state, and predicts poorly from it; reading a passage first puts its state
    where training left it, so that a sample continues real text (page 6)."""
    names = list(re.finditer(r"^[A-Z][A-Za-z ]*:\n", text[start:], flags=re.M))
    if len(names) < speakers:
        raise ValueError(f"text has {len(names)} speakers' names after position {start}, "
                         f"expected at least speakers={speakers}")
    return text[start + names[0].start():start + names[speakers - 1].end()]
