"""Pretraining on unlabelled text, and transfer to a labelled task (beyond the chapter).

Section 7.1 asks for word vectors that depend on the context, so that a homonym ("mean" in
"mean value" and in "mean person") gets a different vector in each sentence. Two ways of
learning such vectors from unlabelled sentences:

- `BiLM`, the bidirectional language model of ELMo (Peters et al., 2018): a forward LSTM
  language model and a backward one over the same word embeddings, trained together by
  `bilm_loss`. Its layers h_j^<t>, j = 0 (the word vector, repeated for both directions)
  to L ([h_f; h_b] of LSTM layer j), are mixed by `ScalarMix`,
      ELMo^<t> = gamma * sum_j s_j h_j^<t>,   s = S_softmax(w),
  with w and gamma learned by the task that uses them;
- `MaskedLM`, the masked language model of BERT (Devlin et al., 2019): a transformer
  encoder (seqlib.experiments.classify.TransformerEncoder, blocks (7.31)) that sees both sides of
  every position and predicts the words hidden by `mask_tokens`; `mlm_loss` counts only
  those positions.

Transfer (the classifiers of seqlib.experiments.classify and their training):
`transfer_model` puts a pretrained model under a classification head, frozen or to be
fine-tuned, which classify.run trains; `run` pretrains; runs.trained and
runs.trained_together train them through the model cache (several in worker processes).
`PROFILES` holds the setups of both (seqlib.pages.config).
Tensors are (batch, time, features); padding (id 0) comes last and a bool mask is True at
real tokens, as seqlib.text.pad_batch makes them.
"""

import copy
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from seqlib.checks import check_source, positive_int
from seqlib.experiments import runs
from seqlib.experiments.classify import Classifier, TransformerEncoder
from seqlib.experiments.sentences import batch_indices
from seqlib.gated import LSTM
from seqlib.pages.config import check_config
from seqlib.seq2seq import freeze
from seqlib.text import SPECIALS, pad_batch, reverse_padded
from seqlib.training import adamw

IGNORE = -100  # the target of a position that is not predicted (F.cross_entropy's default)
REGIMES = ("scratch", "frozen", "fine-tuned")
INIT_STD = 0.1  # the biLM's word vectors start small, so what pretraining writes stands out

# The setups (seqlib.pages.config): the book profile pretrains for about a minute on a 2-core
# CPU; SEQLIB_FULL=1 pretrains and fine-tunes longer. "bilm" and "masked-lm": the models
# (the arguments of BiLM and MaskedLM after the vocabulary size) and their pretraining
# (`run`); "transfer": the classifiers on a pretrained model (the arguments of
# transfer_model after the model and the regime), trained by classify.run on subsets of
# the labelled sentences ("data": their sizes), and "transfer-all" on all of them; the
# frozen regime, which trains only a head, at a higher rate ("frozen", "frozen-all").
def _transfers(steps: int, steps_all: int, evals: int, sizes: list) -> dict:
    """The four setups of the transfer runs of one profile."""
    setups = {}
    for name, lr in [("transfer", 5e-3), ("frozen", 2e-2)]:
        for suffix, n in [("", steps), ("-all", steps_all)]:
            setups[name + suffix] = {
                "model": dict(dropout=0.5),
                "fit": dict(steps=n, batch_size=32, lr=lr, weight_decay=0.01, evals=evals)}
    setups["transfer"]["data"] = dict(sizes=sizes)
    return setups


PROFILES = {
    "book": {"bilm": {"model": dict(p=64, num_layers=1, output_size=1000),
                      "fit": dict(steps=300, batch_size=64, lr=1e-2)},
             "masked-lm": {"model": dict(p=64, heads=2, n1=128, num_layers=2),
                           "fit": dict(steps=500, batch_size=64, lr=3e-3)},
             **_transfers(steps=100, steps_all=250, evals=4, sizes=[100, 300, 1000])},
    "full": {"bilm": {"model": dict(p=64, num_layers=1, output_size=1000),
                      "fit": dict(steps=1500, batch_size=64, lr=1e-2)},
             "masked-lm": {"model": dict(p=64, heads=2, n1=128, num_layers=2),
                           "fit": dict(steps=3000, batch_size=64, lr=3e-3)},
             **_transfers(steps=300, steps_all=1000, evals=8, sizes=[100, 300, 1000, 3000])}}


class BiLM(nn.Module):
    """ELMo's biLM over words: embedding (V, p), a forward and a backward stack of
    `num_layers` one-layer LSTMs of m~ = p units (so that [x; x] and [h_f; h_b] have the
    same size 2p), and one output layer shared by both directions over the first
    `output_size` ids of the vocabulary (rarer words are predicted as <unk>)."""

    def __init__(self, vocab_size: int, p: int, num_layers: int = 1, *,
                 output_size: int | None = None):
        super().__init__()
        self.vocab_size = positive_int("vocab_size", vocab_size)
        self.output_size = vocab_size if output_size is None else positive_int(
            "output_size", output_size)
        if not len(SPECIALS) < self.output_size <= vocab_size:
            raise ValueError(f"output_size must lie in ({len(SPECIALS)}, vocab_size="
                             f"{vocab_size}], got {output_size}")
        self.embedding = nn.Embedding(vocab_size, positive_int("p", p))
        nn.init.normal_(self.embedding.weight, std=INIT_STD)
        L = positive_int("num_layers", num_layers)
        self.forward_layers = nn.ModuleList(LSTM(p, p) for _ in range(L))
        self.backward_layers = nn.ModuleList(LSTM(p, p) for _ in range(L))
        self.out = nn.Linear(p, self.output_size)  # W_yh, b_y, shared by both directions
        self.num_layers, self.p = L, p

    def states(self, ids: torch.Tensor, mask: torch.Tensor):
        """The word vectors x (B, T, p) and the lists of each forward and backward layer's
        outputs (B, T, p), aligned with the words (the backward ones read each sentence
        from its own last word, seqlib.text.reverse_padded)."""
        lengths = check_source(ids, mask, self.vocab_size)
        x = self.embedding(ids)  # (B, T, p)
        forward, backward = [], []
        h_f, h_b = x, reverse_padded(x, lengths)
        for f_layer, b_layer in zip(self.forward_layers, self.backward_layers, strict=True):
            h_f, h_b = f_layer(h_f)[0], b_layer(h_b)[0]  # (B, T, p) each
            forward.append(h_f)
            backward.append(reverse_padded(h_b, lengths))  # back to the words' order
        return x, forward, backward

    def layers(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """h_j^<t> for j = 0, ..., L: (B, L + 1, T, 2p); layer 0 is [x; x], layer j the
        forward and backward outputs of LSTM layer j side by side."""
        x, forward, backward = self.states(ids, mask)
        joined = [torch.cat([x, x], -1)] + [torch.cat(fb, -1) for fb in zip(forward, backward,
                                                                             strict=True)]
        return torch.stack(joined, dim=1)  # (B, L + 1, T, 2p)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor):
        """Logits (B, T, output_size) of the next word (forward LM) and of the previous
        word (backward LM) at every position."""
        _, forward, backward = self.states(ids, mask)
        return self.out(forward[-1]), self.out(backward[-1])


def lm_targets(ids: torch.Tensor, mask: torch.Tensor, output_size: int):
    """The targets (B, T) of the forward LM (the next word) and of the backward LM (the
    previous word), IGNORE where there is none (padding, sentence ends); ids at or above
    output_size become <unk> (1)."""
    target = torch.where(ids < output_size, ids, torch.ones_like(ids))
    target = target.masked_fill(~mask, IGNORE)  # (B, T)
    none = torch.full_like(target[:, :1], IGNORE)  # (B, 1)
    forward = torch.cat([target[:, 1:], none], 1)  # padding follows each last word
    backward = torch.cat([none, target[:, :-1]], 1).masked_fill(~mask, IGNORE)
    return forward, backward


def bilm_loss(model: BiLM, ids: torch.Tensor, mask: torch.Tensor) -> tuple:
    """(forward, backward): the mean cross-entropy, in nats per word, of each direction's
    predictions. ELMo maximises the sum of the two log-likelihoods."""
    logits_f, logits_b = model(ids, mask)  # (B, T, V_out) each
    next_word, previous_word = lm_targets(ids, mask, model.output_size)
    return (F.cross_entropy(logits_f.flatten(0, 1), next_word.flatten()),
            F.cross_entropy(logits_b.flatten(0, 1), previous_word.flatten()))


class ScalarMix(nn.Module):
    """ELMo's mix of L + 1 layers: gamma * sum_j s_j h_j with s = S_softmax(w); w starts
    at zero (an even mix) and gamma at one."""

    def __init__(self, num_layers: int):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(positive_int("num_layers", num_layers)))
        self.gamma = nn.Parameter(torch.ones(()))

    @property
    def s(self) -> torch.Tensor:
        """The softmax weights s_j (L + 1,), positive and summing to one."""
        return torch.softmax(self.w, 0)

    def forward(self, layers: torch.Tensor) -> torch.Tensor:
        """layers (B, L + 1, T, d) -> (B, T, d)."""
        if layers.dim() != 4 or layers.shape[1] != len(self.w):
            raise ValueError(f"layers must be (B, {len(self.w)}, T, d), got shape "
                             f"{tuple(layers.shape)}")
        return self.gamma * torch.einsum("j,bjtd->btd", self.s, layers)


class ELMoEncoder(nn.Module):
    """A sentence encoder for seqlib.experiments.classify.Classifier: the ELMo vectors of a BiLM
    (`vectors`, (B, T, 2p)), dropout, and their mean over each sentence's real words
    (B, 2p)."""

    def __init__(self, bilm: BiLM, *, dropout: float = 0.0):
        super().__init__()
        if not isinstance(bilm, BiLM):
            raise TypeError(f"bilm must be a BiLM, got {type(bilm).__name__}")
        self.bilm, self.mix = bilm, ScalarMix(bilm.num_layers + 1)
        self.dropout = nn.Dropout(dropout)
        self.output_size = 2 * bilm.p

    def vectors(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """ELMo^<t> = gamma sum_j s_j h_j^<t> of every word: (B, T, 2p)."""
        return self.mix(self.bilm.layers(ids, mask))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        z = self.dropout(self.vectors(ids, mask)) * mask[..., None]  # (B, T, 2p), zero padding
        return z.sum(1) / mask.sum(1, keepdim=True)  # (B, 2p)


class MaskedLM(nn.Module):
    """BERT's masked language model, small: a classify.TransformerEncoder over the
    vocabulary plus one id, mask_id = vocab_size (the [MASK] token), whose blocks' outputs
    z^<t> (B, T, p) go through an output layer to the logits of the V words."""

    def __init__(self, vocab_size: int, p: int, heads: int, *, n1: int | None = None,
                 num_layers: int = 2, max_len: int = 128):
        super().__init__()
        self.vocab_size = positive_int("vocab_size", vocab_size)
        self.mask_id = vocab_size
        self.encoder = TransformerEncoder(vocab_size + 1, p, heads, n1=n1,
                                          num_layers=num_layers, max_len=max_len)
        self.out = nn.Linear(p, vocab_size)

    def hidden(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """z^<t>, the last block's outputs (B, T, p); padded keys get no attention."""
        check_source(ids, mask, self.vocab_size + 1)
        enc = self.encoder
        z = enc.positions(enc.embedding(ids))  # (B, T, p): (7.29)-(7.30)
        for block in enc.blocks:
            z = block(z, mask=mask)  # (7.31)
        return z

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) of the word at every position."""
        return self.out(self.hidden(ids, mask))


def mask_tokens(ids: torch.Tensor, mask: torch.Tensor, vocab_size: int, mask_id: int, *,
                generator: torch.Generator, rate: float = 0.15):
    """BERT's corruption of a padded batch: each real token is chosen with probability
    `rate`; a chosen token becomes mask_id with probability 0.8, a random word (an id in
    [len(SPECIALS), vocab_size)) with probability 0.1, and stays as it is with probability
    0.1. Returns (inputs, targets), both (B, T): targets hold the original id at the chosen
    positions and IGNORE elsewhere (padding is never chosen)."""
    check_source(ids, mask, vocab_size)
    if isinstance(rate, bool) or not 0 < rate < 1:
        raise ValueError(f"rate must lie strictly between 0 and 1, got {rate!r}")
    u = torch.rand(ids.shape, generator=generator)  # (B, T): is the position chosen?
    chosen = (u < rate) & mask.cpu()
    v = torch.rand(ids.shape, generator=generator)  # (B, T): what it shows
    words = torch.randint(len(SPECIALS), vocab_size, ids.shape, generator=generator)
    chosen, v, words = chosen.to(ids.device), v.to(ids.device), words.to(ids.device)
    inputs = torch.where(chosen & (v < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(chosen & (v >= 0.8) & (v < 0.9), words, inputs)
    targets = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    return inputs, targets


def mlm_loss(model: MaskedLM, inputs: torch.Tensor, targets: torch.Tensor,
             mask: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy, in nats per word, over the chosen positions only."""
    if targets.shape != inputs.shape:
        raise ValueError(f"targets have shape {tuple(targets.shape)}, expected "
                         f"{tuple(inputs.shape)} like inputs")
    if not (targets != IGNORE).any():
        raise ValueError("no position is chosen (every target is IGNORE): the loss is undefined")
    chosen = targets != IGNORE  # (B, T)
    logits = model.out(model.hidden(inputs, mask)[chosen])  # (N, V): the chosen positions only
    return F.cross_entropy(logits, targets[chosen])


def sentence_batches(ids: list, batch_size: int, generator: torch.Generator):
    """Endless padded batches (ids (B, T), mask (B, T)) of unlabelled sentences, drawn as
    batch_indices draws them (shuffled, similar lengths together)."""
    for index in batch_indices([(s,) for s in ids], batch_size, generator, pool=20):
        yield pad_batch([ids[i] for i in index])


def _with_generator(ids: list, batch_size: int, generator: torch.Generator):
    """`sentence_batches`, each with the generator, which masks its words too."""
    for batch in sentence_batches(ids, batch_size, generator):
        yield (*batch, generator)


class PretrainingLoss:
    """The loss of a pretraining run on batches (x, mask, generator): a BiLM's two
    directions summed (bilm_loss; `finish` adds each one's history, "forward" and
    "backward"), or a MaskedLM's mlm_loss on fresh mask_tokens of the batch, drawn from the
    run's generator."""

    def __init__(self):
        self.parts = {"forward": [], "backward": []}

    def __call__(self, model: nn.Module, batch: tuple) -> torch.Tensor:
        x, mask, generator = batch
        if isinstance(model, BiLM):
            f, b = bilm_loss(model, x, mask)
            self.parts["forward"].append(f.item())
            self.parts["backward"].append(b.item())
            return f + b
        return mlm_loss(model, *mask_tokens(x, mask, model.vocab_size, model.mask_id,
                                            generator=generator), mask)

    def finish(self, history: dict) -> dict:
        return history | (self.parts if self.parts["forward"] else {})


# The settings of `run` (its fit): those it needs, and the defaults of the others.
FIT_KEYS = ("steps", "batch_size", "lr")
FIT_DEFAULTS = dict(clip=1.0, seed=0)


def run(name: str, model: nn.Module, data: list, fit: dict) -> runs.Run:
    """The run that pretrains a BiLM or a MaskedLM (`PretrainingLoss`) on the unlabelled
    sentences `data` (lists of ids): fit["steps"] AdamW steps of fit["batch_size"]
    sentences at rate fit["lr"], gradients clipped at norm fit["clip"] (FIT_DEFAULTS for
    the settings fit leaves out)."""
    if not isinstance(model, (BiLM, MaskedLM)):
        raise TypeError(f"model must be a BiLM or a MaskedLM, got {type(model).__name__}")
    fit = check_config(fit, FIT_KEYS, FIT_DEFAULTS)
    loss = PretrainingLoss()
    return runs.Run(name, model, loss, partial(_with_generator, data, fit["batch_size"]),
                    partial(adamw, lr=fit["lr"]), fit, data=(data,), module=__name__,
                    finish=loss.finish)


def transfer_model(base: nn.Module, regime: str, *, dropout: float = 0.5) -> Classifier:
    """A two-class seqlib.experiments.classify.Classifier on a copy of `base`: an
    ELMoEncoder of a BiLM (mean of its ELMo vectors), or the TransformerEncoder of a
    MaskedLM (mean of its outputs). regime "frozen" trains only what sits above `base`
    (for a BiLM the mix w, gamma; the head); "fine-tuned" and "scratch" train everything
    ("scratch" expects an untrained `base`, so it differs from "fine-tuned" only in where
    the weights start)."""
    if regime not in REGIMES:
        raise ValueError(f"regime must be one of {REGIMES}, got {regime!r}")
    base = copy.deepcopy(base)
    if isinstance(base, BiLM):
        encoder, inner = ELMoEncoder(base, dropout=dropout), base
    elif isinstance(base, MaskedLM):
        encoder = inner = base.encoder
    else:
        raise TypeError(f"base must be a BiLM or a MaskedLM, got {type(base).__name__}")
    if regime == "frozen":
        freeze(inner)
    return Classifier(encoder, 2, dropout=dropout)
