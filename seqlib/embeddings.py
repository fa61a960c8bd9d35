"""Word embeddings learned from raw text: word2vec (Mikolov et al., 2013), Section 7.1.

An embedding maps token id i to a dense vector, row i of a matrix E (V x d); this is the
one-hot vector of i times E. word2vec learns E from co-occurrence alone. Both variants keep
two tables, the input vectors v_w (``in_embed``: the word vectors one keeps) and the output
vectors u_w (``out_embed``), and minimise the negative-sampling loss: for an input
representation h, its true target word o and K noise words n_1, ..., n_K drawn from the
unigram distribution raised to the power 3/4,

    loss = -log sigma(u_o . h) - sum_k log sigma(-u_{n_k} . h).

- Skip-gram: h = v_c, the vector of the centre word; the target is one word of its context.
- CBOW (continuous bag of words): h is the mean of the v_w of the 2 * window context words;
  the target is the centre word. CBOW uses negative sampling too, not the full softmax, so
  the two models differ only in what h is and cost the same per example.

Batches are (N,) ids, (N, K) noise ids and (N, C) contexts; the noise distribution and the
training runs are in seqlib.experiments.word2vec.
"""

from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from seqlib.checks import check_ids, check_int
from seqlib.text import SPECIALS


def skipgram_pairs(ids: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Skip-gram examples of a 1-D id sequence, (centres, contexts) of shape (N,): every
    ordered pair of positions at distance 1, ..., window, grouped by distance."""
    check_ids(ids, name="ids", dim=1)
    check_int("window", window, 1)
    if len(ids) < 2:
        raise ValueError(f"ids must hold at least 2 tokens, got {len(ids)}")
    centres, contexts = [], []
    for d in range(1, min(window, len(ids) - 1) + 1):  # loop over distances, not positions
        centres += [ids[:-d], ids[d:]]  # word t with word t + d, and word t + d with word t
        contexts += [ids[d:], ids[:-d]]
    return torch.cat(centres), torch.cat(contexts)


def cbow_examples(ids: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """CBOW examples of a 1-D id sequence: (contexts (N, 2 * window), targets (N,)), row n
    the window words on each side of ``ids[n + window]``, N = len(ids) - 2 * window."""
    check_ids(ids, name="ids", dim=1)
    check_int("window", window, 1)
    if len(ids) < 2 * window + 1:
        raise ValueError(f"ids must hold at least 2 * window + 1 = {2 * window + 1} tokens, "
                         f"got {len(ids)}")
    windows = ids.unfold(0, 2 * window + 1, 1)  # (N, 2 * window + 1)
    contexts = torch.cat([windows[:, :window], windows[:, window + 1 :]], dim=1)  # (N, 2w)
    return contexts, windows[:, window]


def negative_sampling_loss(h: torch.Tensor, u_target: torch.Tensor, u_noise: torch.Tensor):
    """Mean over the batch of -log sigma(u_o . h) - sum_k log sigma(-u_{n_k} . h).

    Shapes: h (N, d), u_target (N, d), u_noise (N, K, d).
    """
    if h.dim() != 2 or u_target.shape != h.shape or u_noise.dim() != 3 \
            or u_noise.shape[0] != h.shape[0] or u_noise.shape[2] != h.shape[1]:
        raise ValueError("expected h (N, d), u_target (N, d), u_noise (N, K, d), got "
                         f"{tuple(h.shape)}, {tuple(u_target.shape)}, {tuple(u_noise.shape)}")
    positive = (u_target * h).sum(-1)  # (N,)
    negative = torch.bmm(u_noise, h.unsqueeze(-1)).squeeze(-1)  # (N, K)
    # -log sigma(x) = log(1 + e^(-x)) = softplus(-x), computed stably for any x
    return (F.softplus(-positive) + F.softplus(negative).sum(-1)).mean()


class Word2Vec(nn.Module):
    """Input vectors v_w, output vectors u_w and the negative-sampling loss.

    The subclasses SkipGram and CBOW define ``hidden``, the representation h of an example.
    """

    def __init__(self, vocab_size: int, dim: int):
        super().__init__()
        check_int("vocab_size", vocab_size, 1)
        check_int("dim", dim, 1)
        self.vocab_size, self.dim = vocab_size, dim
        self.in_embed = nn.Embedding(vocab_size, dim)  # v_w, the word vectors
        self.out_embed = nn.Embedding(vocab_size, dim)  # u_w
        # The reference implementation's start: small uniform v_w, zero u_w.
        nn.init.uniform_(self.in_embed.weight, -0.5 / dim, 0.5 / dim)
        nn.init.zeros_(self.out_embed.weight)

    @property
    def vectors(self) -> torch.Tensor:
        """The learned word vectors: the input table, shape (V, d), detached."""
        return self.in_embed.weight.detach()

    def hidden(self, inputs: torch.Tensor) -> torch.Tensor:
        """The representation h of each example, shape (N, d)."""
        raise NotImplementedError

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor, negatives: torch.Tensor):
        """Negative-sampling loss of a batch: targets (N,), negatives (N, K) noise ids."""
        h = self.hidden(inputs)  # (N, d)
        check_ids(targets, name="targets", dim=1, vocab_size=self.vocab_size)
        check_ids(negatives, name="negatives", dim=2, vocab_size=self.vocab_size)
        if len(targets) != len(h) or len(negatives) != len(h):
            raise ValueError(f"inputs, targets and negatives must have the same batch size, "
                             f"got {len(h)}, {len(targets)} and {len(negatives)}")
        return negative_sampling_loss(h, self.out_embed(targets), self.out_embed(negatives))

    def extra_repr(self) -> str:
        return f"vocab_size={self.vocab_size}, dim={self.dim}"


class SkipGram(Word2Vec):
    """Skip-gram: predict a context word from the centre word; forward(centres, contexts,
    negatives) returns the loss."""

    def hidden(self, inputs: torch.Tensor) -> torch.Tensor:
        """h = v_c for each centre id, (N,) -> (N, d)."""
        centres = check_ids(inputs, name="centres", dim=1, vocab_size=self.vocab_size)
        return self.in_embed(centres)


class CBOW(Word2Vec):
    """Continuous bag of words with negative sampling: predict the centre word from the mean
    of its context vectors.

    ``forward(contexts (N, C), centres (N,), negatives (N, K))`` returns the loss.
    """

    def hidden(self, inputs: torch.Tensor) -> torch.Tensor:
        """h = (1 / C) sum_j v_{w_j} over the C context ids of each row, (N, C) -> (N, d)."""
        contexts = check_ids(inputs, name="contexts", dim=2, vocab_size=self.vocab_size)
        return self.in_embed(contexts).mean(1)  # (N, 2 window, d) -> (N, d)


def cosine_similarity(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """cos(a, b) = a . b / (|a| |b|) along the last dimension, broadcasting the others."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise TypeError(f"a and b must be tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.dim() == 0 or b.dim() == 0 or a.shape[-1] != b.shape[-1]:
        raise ValueError("a and b must have the same last dimension, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(eps)


def nearest_neighbours(weight: torch.Tensor, vocab, query, k: int = 5,
                       exclude: Iterable[str] = SPECIALS) -> list[tuple[str, float]]:
    """The k words whose rows of ``weight`` (V, d) have the largest cosine with ``query`` (a
    word, left out of its own neighbours, or a (d,) vector), as (word, cosine) pairs, best
    first; ``vocab`` a Vocab or a list of the V words; ``exclude`` never returned."""
    itos: Sequence[str] = vocab.itos if hasattr(vocab, "itos") else vocab
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or len(weight) != len(itos):
        got = tuple(weight.shape) if isinstance(weight, torch.Tensor) else type(weight).__name__
        raise ValueError(f"weight must be a (V, d) tensor with V = len(vocab) = {len(itos)}, "
                         f"got {got}")
    stoi = {w: i for i, w in enumerate(itos)}
    left_out = [w for w in exclude if w in stoi]
    if isinstance(query, str):
        if query not in stoi:
            raise ValueError(f"query word {query!r} is not in the vocabulary")
        left_out.append(query)
        query = weight[stoi[query]]
    elif not isinstance(query, torch.Tensor) or query.shape != weight.shape[1:]:
        raise ValueError(f"query must be a word or a vector of shape ({weight.shape[1]},), got "
                         f"{tuple(query.shape) if isinstance(query, torch.Tensor) else query!r}")
    check_int("k", k, 1)
    cos = cosine_similarity(weight.detach(), query.detach().to(weight.dtype))  # (V,)
    cos[[stoi[w] for w in left_out]] = -float("inf")
    if k > len(itos) - len(set(left_out)):
        raise ValueError(f"k must be at most the {len(itos) - len(set(left_out))} words not "
                         f"excluded, got {k}")
    best = cos.topk(k)
    return [(itos[i], c) for c, i in zip(best.values.tolist(), best.indices.tolist(), strict=True)]
