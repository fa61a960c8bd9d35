"""Training word2vec on a corpus (pages 01 and 14; the chapter names word2vec's two
variants, not how they are trained): the noise distribution that negative samples are drawn
from, the draws, and the subsampling of frequent words, as Mikolov et al. (2013b) train
skip-gram and CBOW (seqlib.embeddings), and the run that trains skip-gram on sentences,
`run(name, model, data, fit)` (page 14).
"""

from functools import partial

import torch

from seqlib.checks import check_ids
from seqlib.embeddings import SkipGram, skipgram_pairs
from seqlib.experiments import runs
from seqlib.pages.config import check_config
from seqlib.training import adam


def _check_counts(counts) -> torch.Tensor:
    """Return ``counts`` as a 1-D float64 tensor of non-negative numbers with a positive sum."""
    counts = torch.as_tensor(counts, dtype=torch.float64)
    if counts.dim() != 1 or not (counts >= 0).all() or counts.sum() <= 0:
        raise ValueError("counts must be a 1-D tensor of non-negative counts with a positive "
                         f"sum, got shape {tuple(counts.shape)}")
    return counts


def noise_distribution(counts, power: float = 0.75) -> torch.Tensor:
    """Noise distribution P_n(w) proportional to count(w) ** power (unigram^(3/4)), shape (V,).

    The power 3/4 flattens the unigram distribution: frequent words are drawn less often
    than their share of the text, rare words more often. Words never seen get probability 0.
    """
    counts = _check_counts(counts)
    if not isinstance(power, (int, float)) or isinstance(power, bool) or power < 0:
        raise ValueError(f"power must be a number >= 0, got {power!r}")
    weights = torch.where(counts > 0, counts**power, 0.0)
    return (weights / weights.sum()).float()


def sample_negatives(noise: torch.Tensor, shape, generator: torch.Generator | None = None):
    """Draw noise word ids of the given shape, e.g. (N, K), from the distribution ``noise``."""
    shape = torch.Size(shape)
    if not isinstance(noise, torch.Tensor):
        raise TypeError(f"noise must be a 1-D tensor of probabilities, got {type(noise).__name__}")
    if noise.dim() != 1:
        raise ValueError(f"noise must be a 1-D tensor of probabilities, got shape "
                         f"{tuple(noise.shape)}")
    ids = torch.multinomial(noise, shape.numel(), replacement=True, generator=generator)
    return ids.view(shape)


def subsample(ids: torch.Tensor, counts, threshold: float = 1e-4,
              generator: torch.Generator | None = None) -> torch.Tensor:
    """Drop frequent words at random: word w is kept with probability min(1, sqrt(t / f(w))).

    f(w) is the relative frequency of w in ``counts`` and t the ``threshold`` (Mikolov et al.,
    2013b). Words like "the" or "and" carry little information about their neighbours and
    are most of the text; thinning them speeds training and widens the effective window.
    """
    check_ids(ids, name="ids", dim=1)
    freq = _check_counts(counts)
    freq = freq / freq.sum()
    if not threshold > 0:
        raise ValueError(f"threshold must be > 0, got {threshold!r}")
    keep = (threshold / freq.clamp_min(1e-300)).sqrt().clamp(max=1.0)  # (V,)
    return ids[torch.rand(len(ids), generator=generator, dtype=torch.float64) < keep[ids]]


# The settings of `run` (its fit): those it needs, and the defaults of the others.
FIT_KEYS = ("steps", "batch_size", "lr")
FIT_DEFAULTS = dict(window=3, K=5, threshold=1e-3, seed=0)


def run(name: str, model, data: list, fit: dict) -> runs.Run:
    """The run that trains skip-gram (a seqlib.embeddings.SkipGram, or a function that builds
    one after seed_everything(fit["seed"])) on the sentences `data` (lists of ids), as in
    Section 7.1: subsampling (fit["threshold"]), pairs within fit["window"] words, fit["K"]
    noise words of the unigram^(3/4) distribution per pair, fit["steps"] batches of
    fit["batch_size"] pairs drawn from the run's generator, Adam at rate fit["lr"]
    (FIT_DEFAULTS for the settings fit leaves out). Pairs never cross a sentence boundary or
    involve <empty> (0) or <unk> (1); rows of words never seen keep their small start."""
    fit = check_config(fit, FIT_KEYS, FIT_DEFAULTS)
    model = runs.built(model, fit["seed"])
    if not isinstance(model, SkipGram):
        raise TypeError(f"model must be a SkipGram, got {type(model).__name__}")
    return runs.Run(name, model, _skipgram_loss,
                    partial(_skipgram_batches, data, model.vocab_size, fit["window"], fit["K"],
                            fit["batch_size"], fit["threshold"]),
                    partial(adam, lr=fit["lr"]), fit, data=(data,), module=__name__)


def _skipgram_loss(model: SkipGram, batch: tuple) -> torch.Tensor:
    return model(*batch)


def _skipgram_batches(ids: list, vocab_size: int, window: int, K: int, batch_size: int,
                      threshold: float, generator: torch.Generator):
    """step -> a batch of (centres, contexts, noise words) of word2vec, all drawn from
    `generator` (after the subsampling, which draws from it first)."""
    stream = torch.tensor([i for s in ids for i in [*s, *[0] * window]])  # pads between
    stream = stream[stream != 1]  # no <unk>
    counts = torch.bincount(stream[stream > 1], minlength=vocab_size)  # (V,), no pads
    kept = subsample(stream, counts, threshold, generator=generator)  # keeps every pad
    centres, contexts = skipgram_pairs(kept, window)
    real = (centres > 1) & (contexts > 1)  # no pair with a pad: none crosses a boundary
    centres, contexts, noise = centres[real], contexts[real], noise_distribution(counts)

    def batch(step):
        b = torch.randint(0, len(centres), (batch_size,), generator=generator)
        return centres[b], contexts[b], sample_negatives(noise, (batch_size, K),
                                                         generator=generator)

    return batch
