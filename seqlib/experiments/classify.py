"""Sequence classification, many-to-one (Fig. 7.1 (b), Fig. 7.2 (b)): a sentence in, one
vector of class probabilities y_hat out, and the predicted class Y_hat = argmax y_hat.

Beyond the chapter, which draws this task but trains no model for it. A classifier is an
encoder, which maps a padded batch of token ids (B, T) and its mask (B, T) (True at real
tokens, as seqlib.text.pad_batch makes it) to one vector per sentence (B, d), and a head,
a linear layer to the logits of the classes (B, q); S_softmax of the logits is y_hat. Keeping
the two apart lets any encoder be trained, or pretrained elsewhere, under the same head.

Batches are checked by seqlib.checks.check_source. The encoders, each exact under padding
(a padded batch gives each sentence the output it gets alone;
tests/experiments/test_classify.py checks it):

- `BagOfEmbeddings`: the mean of the word vectors of the real tokens;
- `RecurrentEncoder`: an LSTM (7.16)-(7.17) or GRU (7.18)-(7.19) of seqlib.gated. One
  direction: the state h^<T_i> at each sentence's own last token. Bidirectional, joined as
  in (7.14): [h_f^<T_i>; h_r^<1>], the forward state at the last token and the reverse
  state at the first, the reverse unit reading each sentence backwards from its own last
  token (not from the padding);
- `TransformerEncoder`: embeddings plus sinusoidal positions (7.29)-(7.30), transformer
  blocks (7.31) whose attention ignores padded keys, and the mean of the outputs over the
  real positions.

Tensors are (batch, time, features). A classifier trains through `run(name, model, data,
fit)` (AdamW, and early stopping on a validation set); the experiment on the sentence
polarity data set (splits, word2vec vectors, cross-validation) is
seqlib.experiments.sentiment.
"""

import copy
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from seqlib.checks import check_source, positive_int
from seqlib.experiments import runs
from seqlib.experiments.sentences import batch_indices
from seqlib.gated import GRU, LSTM
from seqlib.pages.config import check_config
from seqlib.positional import PositionalEmbedding
from seqlib.text import pad_batch, reverse_padded
from seqlib.training import adamw
from seqlib.transformer import PreNormBlock, TransformerBlock

CLASSES = ("negative", "positive")  # label 0 and 1 of seqlib.experiments.datasets.movie_reviews
KINDS = ("bag", "lstm", "bilstm", "bigru", "transformer")


class BagOfEmbeddings(nn.Module):
    """The mean of the word vectors of the real tokens: (ids, mask) -> (B, p). Word order is
    lost; the baseline every sequence model must beat."""

    def __init__(self, vocab_size: int, p: int, *, dropout: float = 0.0):
        super().__init__()
        self.embedding = nn.Embedding(positive_int("vocab_size", vocab_size), positive_int("p", p))
        self.dropout = nn.Dropout(dropout)
        self.output_size = p

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        lengths = check_source(ids, mask, self.embedding.num_embeddings)
        x = self.dropout(self.embedding(ids)) * mask[..., None]  # (B, T, p), zero padding
        return x.sum(1) / lengths[:, None]  # (B, p)


class RecurrentEncoder(nn.Module):
    """Embeddings, then an LSTM or GRU of seqlib.gated (fast path), read at each sentence's
    own ends: h^<T_i> (B, m~) in one direction, [h_f^<T_i>; h_r^<1>] (B, 2 m~) in two,
    as in (7.14). Two one-directional units (the parameters of a bidirectional one), the
    reverse one on `reverse_padded` inputs."""

    units = {"lstm": LSTM, "gru": GRU}

    def __init__(self, vocab_size: int, p: int, hidden_size: int, *, unit: str = "lstm",
                 bidirectional: bool = False, dropout: float = 0.0):
        super().__init__()
        if unit not in self.units:
            raise ValueError(f"unit must be one of {tuple(self.units)}, got {unit!r}")
        self.embedding = nn.Embedding(positive_int("vocab_size", vocab_size), positive_int("p", p))
        self.dropout = nn.Dropout(dropout)
        self.unit, self.bidirectional = unit, bool(bidirectional)
        self.forward_unit = self.units[unit](p, hidden_size)
        if bidirectional:
            self.reverse_unit = self.units[unit](p, hidden_size)
        self.output_size = hidden_size * (2 if bidirectional else 1)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        lengths = check_source(ids, mask, self.embedding.num_embeddings)
        x = self.dropout(self.embedding(ids))  # (B, T, p)
        last = torch.arange(len(ids), device=ids.device), lengths - 1
        h_f = self.forward_unit(x)[0][last]  # (B, m~): h_f^<T_i>, each row's own last token
        if not self.bidirectional:
            return h_f
        h_r = self.reverse_unit(reverse_padded(x, lengths))[0][last]  # h_r^<1>, (B, m~)
        return torch.cat([h_f, h_r], dim=-1)  # (B, 2 m~)


class TransformerEncoder(nn.Module):
    """Embeddings plus sinusoidal positions (7.29)-(7.30), `num_layers` transformer blocks
    (7.31) with a padding mask, and the mean of the outputs over the real positions:
    (ids, mask) -> (B, p)."""

    def __init__(self, vocab_size: int, p: int, heads: int, *, m: int | None = None,
                 n1: int | None = None, num_layers: int = 1, max_len: int = 128,
                 dropout: float = 0.0, block_dropout: float = 0.0, norm_first: bool = False):
        super().__init__()
        self.embedding = nn.Embedding(positive_int("vocab_size", vocab_size), positive_int("p", p))
        self.positions = PositionalEmbedding(max_len, p)
        self.dropout = nn.Dropout(dropout)
        block = PreNormBlock if norm_first else TransformerBlock
        self.blocks = nn.ModuleList(block(p, heads, m, m, n1, dropout=block_dropout)
                                    for _ in range(positive_int("num_layers", num_layers)))
        self.output_size = p

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        lengths = check_source(ids, mask, self.embedding.num_embeddings)
        z = self.dropout(self.positions(self.embedding(ids)))  # (B, T, p)
        for block in self.blocks:
            z = block(z, mask=mask)  # padded keys get no weight
        return (z * mask[..., None]).sum(1) / lengths[:, None]  # (B, p)


class Classifier(nn.Module):
    """An encoder ((ids, mask) -> (B, d)) and a head: dropout, then the logits
    W_yh e + b_y (B, q) of q classes; y_hat = S_softmax(logits) is left to the loss and to
    `predict`."""

    def __init__(self, encoder: nn.Module, num_classes: int = 2, *, dropout: float = 0.0):
        super().__init__()
        if not isinstance(getattr(encoder, "output_size", None), int):
            raise TypeError("encoder must be an nn.Module with an int output_size (the size "
                            f"of its sentence vectors), got {type(encoder).__name__}")
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.output_size, positive_int("num_classes", num_classes))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.dropout(self.encoder(ids, mask)))  # (B, q) logits


def build(kind: str, vocab_size: int, model: dict,
          vectors: torch.Tensor | None = None) -> Classifier:
    """The classifier of one of KINDS: its encoder built with the arguments `model` (those
    of BagOfEmbeddings, RecurrentEncoder after the unit or TransformerEncoder: p,
    hidden_size, heads, m, n1, dropout, ...) under a head with the same dropout, its
    embedding table started from `vectors` (vocab_size, p) if given."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind == "bag":
        encoder = BagOfEmbeddings(vocab_size, **model)
    elif kind == "transformer":
        encoder = TransformerEncoder(vocab_size, **model)
    else:
        encoder = RecurrentEncoder(vocab_size, **model, unit=kind.removeprefix("bi"),
                                   bidirectional=kind.startswith("bi"))
    classifier = Classifier(encoder, len(CLASSES), dropout=model.get("dropout", 0.0))
    if vectors is not None:
        with torch.no_grad():
            classifier.encoder.embedding.weight.copy_(vectors)
    return classifier


def saliency(model: Classifier, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Gradient x input, (B, T): for each word, the gradient of the margin z_Yhat - z_other
    (the predicted class's logit minus the other class's; two classes) with respect to
    the word's embedding, dotted with that embedding. Positive: the word pushes towards
    the predicted class; zero at padding."""
    if len(model.head.weight) != 2:
        raise ValueError(f"saliency is defined for two classes, got {len(model.head.weight)}")
    model.eval()
    table = model.encoder.embedding
    x = table(ids).detach().requires_grad_(True)  # (B, T, p)
    hook = table.register_forward_hook(lambda module, args, out: x)  # feed x through
    try:
        logits = model(ids, mask)  # (B, 2)
    finally:
        hook.remove()
    predicted = logits.argmax(-1)
    sign = 1 - 2 * predicted  # +1 when class 0 is predicted
    margin = (logits[:, 0] - logits[:, 1]) * sign  # z_Yhat - z_other, (B,)
    (grad,) = torch.autograd.grad(margin.sum(), x)
    return (grad * x).sum(-1).detach() * mask  # (B, T)


# ---- training a classifier: batches, predictions, the loss and the run -------------------

def batches(ids: list, labels: torch.Tensor, batch_size: int, generator: torch.Generator,
            pool: int = 20):
    """Endless training batches (ids (B, T), mask (B, T), labels (B,)), epoch after epoch,
    drawn as translation draws them (sentences.batch_indices): each epoch shuffles
    the examples, sorts each run of `pool` batches' worth by length and cuts it into
    batches (similar lengths, so little padding), then shuffles the batches."""
    for chunk in batch_indices([(s,) for s in ids], batch_size, generator, pool):
        yield (*pad_batch([ids[j] for j in chunk]), labels[chunk])


@torch.no_grad()
def predict(model: nn.Module, ids: list, batch_size: int = 256, *,
            logits: bool = False) -> torch.Tensor:
    """y_hat, the class probabilities (N, q) of the id sequences `ids`, in eval mode (with
    `logits`, the logits z (N, q) instead)."""
    model.eval()
    device = next(model.parameters()).device
    order = torch.tensor([len(s) for s in ids]).argsort(stable=True)  # little padding
    out = []
    for chunk in order.split(batch_size):
        x, mask = pad_batch([ids[i] for i in chunk.tolist()])
        z = model(x.to(device), mask.to(device))
        out.append((z if logits else torch.softmax(z, -1)).cpu())
    return torch.cat(out)[order.argsort()]  # back to the order of ids


def accuracy(model: nn.Module, ids: list, labels: torch.Tensor) -> float:
    """The fraction of sentences whose predicted class Y_hat = argmax y_hat is the label."""
    return (predict(model, ids).argmax(-1) == labels).double().mean().item()


def loss_fn(model: nn.Module, batch) -> torch.Tensor:
    """Cross-entropy of the softmax of the logits against the labels (the chapter's C)."""
    ids, mask, y = batch
    device = next(model.parameters()).device
    return F.cross_entropy(model(ids.to(device), mask.to(device)), y.to(device))


class EarlyStopping:
    """The `on_step` and `finish` of a classifier's run: the validation accuracy on
    val_set = (ids, labels), measured `evals` times (evenly spaced, the last after the last
    step), and at the end the weights of the best of them (the test set is never looked
    at); the history gains "val_steps", "val_acc" and "best_step"."""

    def __init__(self, model: nn.Module, val_set: tuple, steps: int, evals: int):
        self.model, self.val_set = model, val_set
        self.marks = {round(steps * (i + 1) / positive_int("evals", evals)) - 1
                      for i in range(evals)}
        self.val_steps, self.val_acc, self.best = [], [], (-1.0, None, 0)

    def __call__(self, step: int, history: dict) -> None:
        if step in self.marks:
            acc = accuracy(self.model, *self.val_set)
            self.model.train()
            self.val_steps.append(step + 1)
            self.val_acc.append(acc)
            if acc > self.best[0]:
                self.best = (acc, copy.deepcopy(self.model.state_dict()), step + 1)

    def finish(self, history: dict) -> dict:
        self.model.load_state_dict(self.best[1])
        self.model.eval()
        return {**history, "val_steps": self.val_steps, "val_acc": self.val_acc,
                "best_step": self.best[2]}


# The settings of `run` (its fit): those it needs, and the defaults of the others.
FIT_KEYS = ("steps", "batch_size", "lr", "weight_decay", "evals")
FIT_DEFAULTS = dict(seed=0)


def run(name: str, model, data: tuple, fit: dict) -> runs.Run:
    """The run of a classifier (a model, or a function that builds one after
    seed_everything(fit["seed"])) on data = (train_set, val_set), each (ids, labels):
    fit["steps"] batches of fit["batch_size"] (`batches`, from the run's generator) of the
    cross-entropy `loss_fn`, AdamW at rate fit["lr"] with fit["weight_decay"], and
    EarlyStopping on val_set, fit["evals"] times (FIT_DEFAULTS for the settings fit leaves
    out). Dropout draws the run's own random numbers (runs.fit)."""
    fit = check_config(fit, FIT_KEYS, FIT_DEFAULTS)
    model = runs.built(model, fit["seed"])
    train_set, val_set = data
    stopping = EarlyStopping(model, val_set, fit["steps"], fit["evals"])
    return runs.Run(name, model, loss_fn, partial(batches, *train_set, fit["batch_size"]),
                    partial(adamw, lr=fit["lr"], weight_decay=fit["weight_decay"]), fit,
                    data=(*train_set, *val_set), module=__name__, on_step=stopping,
                    finish=stopping.finish)
