"""Image captioning (Fig. 7.1 (d), one-to-many; beyond the chapter): a small CNN encoder
and an LSTM decoder that writes the words of a digit strip (seqlib.experiments.digits).

The encoder turns a strip (HEIGHT x WIDTH pixels) into a grid of h x w feature vectors,
each of which sees one region of the image: the annotation vectors v^<tau> of (7.20), one
per location tau = 1, ..., T_in = h w (row by row). Two decoders read them:

- `ShowAndTell`, Fig. 7.9 (a) (Vinyals et al., 2015): the grid, averaged over its h rows
  and flattened left to right, is the code z, and the LSTM decoder's initial state is
  s^<0> = tanh(W_init z + b_init), c^<0> = W_c z + b_c; the decoder is
  seqlib.seq2seq.Decoder, as in Seq2Seq.
- `ShowAttendTell` (Xu et al., 2015): the same initial state from the mean annotation
  vector z = mean_tau v^<tau>, and every step attends to the grid with the query
  z_q^<t> = s^<t-1> and the keys and values v^<tau>, (7.20)-(7.22): the decoder of
  AttentionSeq2Seq, seqlib.seq2seq.AttentionDecoder, unchanged. A learned vector per
  location (beyond the chapter) is added to v^<tau>: a convolution responds to a pattern
  wherever it lies, and the decoder needs to know where a feature is to read the digits
  left to right.

Both follow the decoding protocol of seqlib.seq2seq, so seqlib.decoding's greedy and beam
search run them. The protocol's source is a padded batch of ids: a strip enters it as its
HEIGHT WIDTH pixels, row by row, each an id in 0..255 (`as_source`), every one real.
"""

from functools import partial

import torch
from torch import nn

from seqlib.checks import check_ids, check_tgt_in, positive_int
from seqlib.decoding import beam_search, greedy
from seqlib.experiments import runs
from seqlib.experiments.digits import HEIGHT, MAX_DIGITS, WIDTH, check_strips, compose, vocab
from seqlib.experiments.sentences import bleu
from seqlib.pages.config import check_config
from seqlib.seq2seq import AttentionDecoder, Decoder, reorder_state, teacher_forced_loss
from seqlib.text import pad_batch
from seqlib.training import adam, warmup_linear

# The setup of the captioners (seqlib.pages.config): "model", the arguments of ShowAndTell
# and ShowAttendTell, "fit" those of `run`; SEQLIB_FULL=1 trains longer on bigger batches.
PROFILES = {
    "book": {"captioner": {"model": dict(embed_size=32, hidden_size=128),
                           "fit": dict(steps=1200, batch_size=32, lr=3e-3, decay=True)}},
    "full": {"captioner": {"model": dict(embed_size=32, hidden_size=128),
                           "fit": dict(steps=10_000, batch_size=128, lr=1e-3, decay=True)}}}


def as_source(images: torch.Tensor):
    """Strips (B, HEIGHT, WIDTH) uint8 as the decoding protocol's source: src (B, HEIGHT
    WIDTH), the pixels row by row as ids in 0..255, and src_mask (B, HEIGHT WIDTH), all
    True (a strip has no padding)."""
    src = check_strips(images).flatten(1)  # (B, H W)
    return src, torch.ones_like(src, dtype=torch.bool)


def strips_of(src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
    """The strips (B, HEIGHT, WIDTH) of a source made by `as_source`."""
    check_ids(src, name="src", dim=2)
    if src.dtype != torch.uint8 or src.shape[1] != HEIGHT * WIDTH:
        raise ValueError(f"src must be uint8 pixels (B, {HEIGHT * WIDTH}) from as_source, got "
                         f"{src.dtype} {tuple(src.shape)}")
    if not isinstance(src_mask, torch.Tensor) or src_mask.shape != src.shape \
            or not bool(src_mask.all()):
        raise ValueError("src_mask must be all True, like src: a strip has no padding")
    return src.view(-1, HEIGHT, WIDTH)  # (B, H, W)


class StripEncoder(nn.Module):
    """A small CNN: per entry of `channels`, a 4 x 4 convolution of stride 2 (padding 1)
    and ReLU, each halving the height and width, then a 3 x 3 convolution (padding 1) and
    ReLU at the grid's resolution, which widens what each location sees to a whole digit.
    forward(images (B, HEIGHT, WIDTH) uint8) -> grid (B, h, w, d) with h = HEIGHT / 2^k,
    w = WIDTH / 2^k for k = len(channels), and d = channels[-1]."""

    def __init__(self, channels: tuple = (16, 32, 64)):
        super().__init__()
        if not isinstance(channels, tuple) or not channels:
            raise ValueError(f"channels must be a non-empty tuple, got {channels!r}")
        for k, c in enumerate(channels):
            positive_int(f"channels[{k}]", c)
        layers, c_in = [], 1
        for c in channels:
            layers += [nn.Conv2d(c_in, c, 4, stride=2, padding=1, bias=False),
                       nn.BatchNorm2d(c), nn.ReLU()]
            c_in = c
        layers += [nn.Conv2d(c_in, c_in, 3, padding=1, bias=False), nn.BatchNorm2d(c_in),
                   nn.ReLU()]
        self.net = nn.Sequential(*layers)
        self.size, k = c_in, len(channels)
        self.grid = (HEIGHT >> k, WIDTH >> k)  # (h, w)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = check_strips(images).float().div(255)[:, None]  # (B, 1, H, W) in [0, 1]
        return self.net(x).permute(0, 2, 3, 1)  # (B, d, h, w) -> (B, h, w, d)


class Captioner(nn.Module):
    """What both captioners share: the encoder, the target vocabulary's size, the LSTM's
    initial state from a code z (d numbers, or w d with `code_columns`), and `reorder`."""

    def __init__(self, channels: tuple, hidden_size: int, code_columns: bool):
        super().__init__()
        self.tgt_vocab_size = len(vocab())
        self.encoder = StripEncoder(channels)
        m = positive_int("hidden_size", hidden_size)
        code_size = self.encoder.size * (self.encoder.grid[1] if code_columns else 1)
        self.initial = nn.Linear(code_size, m)  # W_init, b_init
        self.initial_cell = nn.Linear(code_size, m)  # W_c, b_c

    def initial_state(self, z: torch.Tensor) -> tuple:
        """The LSTM's initial state from a code z (B, code_size): s^<0> = tanh(W_init z +
        b_init) and c^<0> = W_c z + b_c, each (1, B, m) (one layer)."""
        return torch.tanh(self.initial(z))[None], self.initial_cell(z)[None]

    def grid(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """The encoder's grid (B, h, w, d) of the strips in src (see `as_source`)."""
        return self.encoder(strips_of(src, src_mask))

    reorder = staticmethod(reorder_state)


class ShowAndTell(Captioner):
    """Fig. 7.9 (a) for images: the code z (the grid averaged over its rows, (B, w d), left
    to right) sets the LSTM decoder's initial state (`initial_state`); then the decoder of
    Fig. 7.9, seqlib.seq2seq.Decoder, as Seq2Seq's."""

    def __init__(self, embed_size: int = 32, hidden_size: int = 128,
                 channels: tuple = (16, 32, 64)):
        super().__init__(channels, hidden_size, code_columns=True)
        self.decoder = Decoder(self.tgt_vocab_size, embed_size, hidden_size, unit="lstm")
        self.feed_code = False

    def start(self, src: torch.Tensor, src_mask: torch.Tensor) -> dict:
        """Decoding state: (s^<0>, c^<0>) from the code z, and no code fed to later steps."""
        z = self.grid(src, src_mask).mean(1).flatten(1)  # (B, w, d) -> (B, w d)
        return {"hidden": self.initial_state(z), "code": None}

    def step(self, tokens: torch.Tensor, state: dict):
        return self.decoder.step(tokens, state)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor):
        """Teacher forcing: logits (B, T, V) of y^<t> given the strips and tgt_in[:, :t+1]."""
        check_tgt_in(tgt_in, src, self.tgt_vocab_size)
        return self.decoder(tgt_in, self.start(src, src_mask)["hidden"])[0]


class ShowAttendTell(Captioner):
    """Attention over the grid, (7.20)-(7.22) (Xu et al., 2015): the annotation vectors
    v^<tau> (B, h w, d) are the grid's vectors plus a learned vector per location; the
    initial state comes from their mean (`initial_state`). The decoder is
    seqlib.seq2seq.AttentionDecoder, as AttentionSeq2Seq's; with `deep_output`, its output
    layer reads [s^<t>; u^<t>; e^<t-1>] (Xu et al.'s too). `forward` with
    `return_attention` also returns the weights alpha^<t> (B, T_out, h w)."""

    def __init__(self, embed_size: int = 32, hidden_size: int = 128,
                 channels: tuple = (16, 32, 64), attention_size: int = 64,
                 deep_output: bool = True):
        super().__init__(channels, hidden_size, code_columns=False)
        (h, w), d = self.encoder.grid, self.encoder.size
        m, V = hidden_size, self.tgt_vocab_size
        self.positions = nn.Parameter(torch.zeros(h * w, d))  # one vector per location
        self.decoder = AttentionDecoder(V, embed_size, m, d, unit="lstm", score="additive",
                                        attention_size=attention_size,
                                        deep_output=bool(deep_output))

    def annotations(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """The annotation vectors v^<tau> (B, h w, d), row by row of the grid."""
        return self.grid(src, src_mask).flatten(1, 2) + self.positions  # (B, h w, d)

    def start(self, src: torch.Tensor, src_mask: torch.Tensor) -> dict:
        """Decoding state: (s^<0>, c^<0>), the keys/values v and their projection W_sb v,
        no mask (every location is real)."""
        v = self.annotations(src, src_mask)  # (B, T_in, d)
        return {"hidden": self.initial_state(v.mean(1)), "keys": v,
                "projected": self.decoder.attention.project_keys(v), "mask": None,
                "weights": None}

    def step(self, tokens: torch.Tensor, state: dict):
        return self.decoder.step(tokens, state)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor,
                return_attention: bool = False):
        """Teacher forcing: logits (B, T_out, V), and weights (B, T_out, h w) if asked."""
        check_tgt_in(tgt_in, src, self.tgt_vocab_size)
        logits, weights = self.decoder(tgt_in, self.start(src, src_mask))
        return (logits, weights) if return_attention else logits


def collate(strips) -> dict:
    """A training batch of seqlib.experiments.digits.Strips: src, src_mask (`as_source`), tgt_in =
    <start> y and tgt_out = y <stop> (B, T), padded with <empty>."""
    src, src_mask = as_source(strips.images)
    tgt, _ = pad_batch(strips.targets())  # (B, T + 1)
    return {"src": src, "src_mask": src_mask, "tgt_in": tgt[:, :-1], "tgt_out": tgt[:, 1:]}


# The settings of `run` (its fit): those it needs, and the defaults of the others.
FIT_KEYS = ("steps", "batch_size", "lr")
FIT_DEFAULTS = dict(clip=1.0, seed=0, warmup=0, decay=False)


def run(name: str, model, data: tuple, fit: dict) -> runs.Run:
    """The run of a captioner (a model, or a function that builds one after
    seed_everything(fit["seed"])) on data = (images, labels, pool): fresh strips every
    step, composed from the digit images `pool` by the run's generator (no strip is seen
    twice), the loss of teacher forcing (seq2seq.teacher_forced_loss), Adam at rate
    fit["lr"] with warmup_linear's fit["warmup"] and fit["decay"], gradients clipped at
    fit["clip"] (FIT_DEFAULTS for the settings fit leaves out)."""
    fit = check_config(fit, FIT_KEYS, FIT_DEFAULTS)
    positive_int("batch_size", fit["batch_size"])
    model = runs.built(model, fit["seed"])
    images, labels, pool = data
    pool = torch.as_tensor(pool)
    return runs.Run(name, model, teacher_forced_loss,
                    partial(_strips, images, labels, pool, fit["batch_size"],
                            next(model.parameters()).device),
                    partial(adam, lr=fit["lr"]), fit,
                    partial(warmup_linear, decay=fit["decay"]),
                    data=(images[pool], labels[pool]), module=__name__)


def _strips(images, labels, pool, batch_size: int, device, generator: torch.Generator):
    """step -> a batch of fresh strips composed by `generator`, on `device`."""
    def batch(step):
        b = collate(compose(images, labels, pool, batch_size, generator))
        return {k: v.to(device) for k, v in b.items()}

    return batch


def describe(model, images: torch.Tensor, *, method: str = "greedy", beam_size: int = 4,
             batch_size: int = 250) -> list[str]:
    """Captions of the strips (B, HEIGHT, WIDTH) by seqlib.decoding's greedy or beam search
    (the best hypothesis), as text "seven two nine"."""
    if method not in ("greedy", "beam"):
        raise ValueError(f"method must be 'greedy' or 'beam', got {method!r}")
    words, device = vocab(), next(model.parameters()).device
    special = {"start_id": words.start_id, "stop_id": words.stop_id, "max_len": MAX_DIGITS + 2}
    out = []
    for k in range(0, len(check_strips(images)), batch_size):
        src, src_mask = (t.to(device) for t in as_source(images[k:k + batch_size]))
        if method == "greedy":
            ids = greedy(model, src, src_mask, **special)
        else:
            ids = [h[0][0] for h in beam_search(model, src, src_mask, beam_size=beam_size,
                                                **special)]
        out += [words.to_text(words.decode(i)) for i in ids]
    return out


def scores(hypotheses: list, strips) -> dict:
    """Exact-caption accuracy and corpus BLEU (seqlib.experiments.sentences.bleu) of the
    hypotheses by number of digits: {n: {"count", "exact", "bleu"}} for each n present, and
    "all". BLEU counts n-grams up to 4 words, so a group whose captions all have fewer than
    4 words has none (its "bleu" is None)."""
    references = strips.captions()
    if len(hypotheses) != len(references):
        raise ValueError(f"need one hypothesis per strip, got {len(hypotheses)} for "
                         f"{len(references)} strips")
    lengths = [len(d) for d in strips.digits]
    groups = {n: [i for i, k in enumerate(lengths) if k == n] for n in sorted(set(lengths))}
    groups["all"] = list(range(len(lengths)))
    table = {}
    for n, keep in groups.items():
        hyps, refs = [hypotheses[i] for i in keep], [references[i] for i in keep]
        table[n] = {"count": len(keep),
                    "exact": sum(h == r for h, r in zip(hyps, refs, strict=True)) / len(keep),
                    "bleu": bleu(hyps, refs) if max(lengths[i] for i in keep) >= 4 else None}
    return table
