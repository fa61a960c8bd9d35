"""The sentiment experiment of the book (beyond the chapter): sentence classification on the
sentence polarity data set of seqlib.experiments.datasets.movie_reviews, with the classifiers of
seqlib.experiments.classify.

- splits: seeded stratified folds (`stratified_folds`, 10 of them for cross-validation, the
  data set's usual protocol) and a fixed 80/10/10 train/validation/test split made of them
  (`stratified_split`); the data set has no official split;
- `prepare`: word tokens and a vocabulary of the training sentences only (words seen fewer
  than min_freq times there become <unk>), ids of every sentence;
- a classifier (classify.build, started from word2vec vectors or not) trains through
  classify.run (AdamW on batches of sentences of similar lengths, the validation accuracy
  measured a few times, and the best of those checkpoints kept; the test set is never
  looked at), and runs.trained;
- `word2vec`: Section 7.1's skip-gram vectors, trained on the training sentences only;
- `log_odds` of a trained classifier, and `stack`, a logistic regression on the log-odds of
  several classifiers fitted on the validation split (with NBSVM of seqlib.experiments.ngrams);
- `cross_validate`: the whole protocol once per fold.
"""

import re
import time
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from seqlib.checks import check_ids, positive_int
from seqlib.embeddings import SkipGram, skipgram_pairs
from seqlib.experiments import classify, runs
from seqlib.experiments.classify import build, predict
from seqlib.experiments.ngrams import NBSVM
from seqlib.experiments.word2vec import noise_distribution, sample_negatives, subsample
from seqlib.pages.seeds import generator, seed_everything
from seqlib.text import word_tokenize, word_vocab
from seqlib.training import adam

# Model sizes (p the embedding size, hidden the m~ of each direction, chosen so that the
# encoders have 48,000-51,000 parameters each besides their embedding table), the budget
# (the same steps and batch size for every model) and regularisation. SEQLIB_FULL=1: longer
# training, and 10-fold cross-validation in the chapter.
BOOK_PROFILE = dict(min_freq=2, p=128, hidden={"lstm": 64, "bilstm": 38, "bigru": 46},
                    heads=2, m=16, n1=128, dropout=0.5, steps=680, batch_size=50, lr=5e-3,
                    weight_decay=0.01, evals=8, w2v_steps=600)
FULL_PROFILE = {**BOOK_PROFILE, "steps": 1020, "evals": 12, "w2v_steps": 1200}


def stratified_folds(labels, k: int, seed: int = 0) -> list[torch.Tensor]:
    """k disjoint folds of the indices of `labels`, each holding every class in the same
    proportion (to one example): each class's indices are shuffled (seeded) and dealt out
    in turn. Returns k sorted LongTensors that together hold every index once."""
    labels = torch.as_tensor(labels)
    check_ids(labels, name="labels", dim=1, nonempty=True)
    if positive_int("k", k) > len(labels):
        raise ValueError(f"k must be at most the number of examples {len(labels)}, got {k}")
    g = generator(seed)
    folds, dealt = [[] for _ in range(k)], 0
    for c in labels.unique().tolist():
        members = (labels == c).nonzero().squeeze(1)
        for i, index in enumerate(members[torch.randperm(len(members), generator=g)].tolist()):
            folds[(dealt + i) % k].append(index)  # continue the deal where the last class ended
        dealt += len(members)
    return [torch.tensor(sorted(f)) for f in folds]


def stratified_split(labels, parts=(8, 1, 1), seed: int = 0) -> list[torch.Tensor]:
    """A seeded stratified split into len(parts) sets in proportion to `parts` ((8, 1, 1):
    80/10/10, train, validation, test): unions of consecutive stratified folds."""
    if not parts:
        raise ValueError(f"parts must hold at least one proportion, got {parts!r}")
    for k, n in enumerate(parts):
        positive_int(f"parts[{k}]", n)
    folds = stratified_folds(labels, sum(parts), seed)
    bounds = torch.tensor([0, *parts]).cumsum(0).tolist()
    return [torch.cat(folds[a:b]).sort().values for a, b in zip(bounds, bounds[1:], strict=False)]


def prepare(pairs: list, train_index: torch.Tensor, min_freq: int = 2):
    """(vocab, ids, labels): the vocabulary of the training sentences `pairs[train_index]`
    only, the ids of every sentence (lists) and the labels (N,)."""
    sentences = [s for s, _ in pairs]
    vocab = word_vocab([sentences[i] for i in train_index.tolist()], min_freq=min_freq)
    ids = [vocab.encode(word_tokenize(s)) for s in sentences]
    return vocab, ids, torch.tensor([y for _, y in pairs])


def subset(ids: list, labels: torch.Tensor, index: torch.Tensor) -> tuple:
    """(ids, labels) of the examples `index`."""
    return [ids[i] for i in index.tolist()], labels[index]


def log_odds(model: nn.Module, ids: list) -> torch.Tensor:
    """z_1 - z_0 = log(y_hat_1 / y_hat_0) (N,), float64, of a two-class model: > 0 predicts
    positive, like the scores of seqlib.experiments.ngrams."""
    z = predict(model, ids, logits=True).double()
    if z.shape[1] != 2:
        raise ValueError(f"log_odds is defined for two classes, got {z.shape[1]}")
    return z[:, 1] - z[:, 0]


def stack(scores: torch.Tensor, labels: torch.Tensor) -> nn.Linear:
    """Stacking (Wolpert, 1992): the logistic regression sigma(a . s + c) that best predicts
    the labels (N,) from the scores s (N, k) of k trained classifiers (log-odds, say), fitted
    on held-out sentences (the validation split: none of the k saw them in training) by
    L-BFGS in float64. Returns it as an nn.Linear(k, 1); its output > 0 predicts positive."""
    if scores.dim() != 2 or len(scores) != len(labels):
        raise ValueError(f"scores must be (N, k) with one row per label ({len(labels)}), got "
                         f"{tuple(scores.shape)}")
    combiner = nn.Linear(scores.shape[1], 1).double()
    nn.init.zeros_(combiner.weight), nn.init.zeros_(combiner.bias)
    optimizer = torch.optim.LBFGS(combiner.parameters(), max_iter=500,
                                  line_search_fn="strong_wolfe")
    y = torch.as_tensor(labels).double()

    def objective():
        optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(combiner(scores.double()).squeeze(1), y)
        loss.backward()
        return loss

    optimizer.step(objective)
    return combiner.requires_grad_(False)


def score_accuracy(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """The fraction of sentences called positive exactly where their score (log-odds, an
    NBSVM score, a stack's output; (N,)) is above 0, as the labels (N,) say."""
    return ((scores > 0).long() == labels).double().mean().item()


def word2vec(ids: list, vocab_size: int, dim: int, *, window: int = 3, K: int = 5,
             steps: int = 600, batch_size: int = 4096, lr: float = 0.02, threshold: float = 1e-3,
             seed: int = 0) -> torch.Tensor:
    """Skip-gram word vectors (V, dim) of the sentences `ids` (lists of ids), trained as in
    Section 7.1 (seqlib.embeddings: subsampling, pairs within `window`, K noise words from
    the unigram^(3/4) distribution, Adam) through runs.trained. Pairs never cross a
    sentence boundary or involve <empty> (0) or <unk> (1); rows of words never seen keep
    their small uniform start."""
    options = dict(window=window, K=K, batch_size=batch_size, lr=lr, threshold=threshold)
    seed_everything(seed)  # the start of the tables
    model = SkipGram(vocab_size, dim)
    model, _ = runs.trained(runs.Run(
        "sentiment-word2vec", model, _skipgram_loss,
        partial(_skipgram_batches, ids, vocab_size, window, K, batch_size, threshold),
        partial(adam, lr=lr), steps, seed=seed, config=options, data=(ids,),
        module=__name__, desc="skip-gram"))
    return model.vectors.clone()


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


def both_scores(model: nn.Module, nbsvm: NBSVM, ids: list, sentences: list) -> torch.Tensor:
    """(N, 2): the log-odds of a trained classifier on the id sequences `ids` and NBSVM's
    scores of the same sentences as token lists, the inputs of `stack`."""
    return torch.stack([log_odds(model, ids), nbsvm.decision(sentences)], 1)


def cross_validate(pairs: list, config: dict, *, kind: str = "lstm", k: int = 10,
                   seed: int = 0) -> list[dict]:
    """The protocol of the chapter once per fold of `stratified_folds(labels, k, seed)`: fold
    i is the test set, fold i + 1 (mod k) the validation set, the other k - 2 folds the
    training set (vocabulary, word2vec vectors and the classifier `kind` started from them;
    NBSVM of seqlib.experiments.ngrams on the same sentences; their `stack` fitted on the validation
    set). Returns one dict per fold: test accuracy of the classifier ("test"), of NBSVM
    ("nbsvm") and of the stack ("stacked"), the classifier's best validation accuracy
    ("val"), the stack's weights of the two log-odds ("weights") and the seconds taken."""
    folds = stratified_folds([y for _, y in pairs], k, seed)
    tokens = [word_tokenize(s) for s, _ in pairs]
    results = []
    for i in range(k):
        start = time.perf_counter()
        test, val = folds[i], folds[(i + 1) % k]
        train_index = torch.cat([f for j, f in enumerate(folds) if j not in (i, (i + 1) % k)])
        vocab, ids, labels = prepare(pairs, train_index, config["min_freq"])
        train_set = subset(ids, labels, train_index)
        vectors = word2vec(train_set[0], len(vocab), config["p"], steps=config["w2v_steps"],
                           seed=seed)
        model, history = runs.trained(classify.run(
            f"sentiment-{kind}-word2vec", partial(build, kind, len(vocab), config, vectors),
            (train_set, subset(ids, labels, val)), config | {"seed": seed}))
        nbsvm = NBSVM().fit([tokens[j] for j in train_index.tolist()], labels[train_index])
        val_scores, test_scores = (
            both_scores(model, nbsvm, subset(ids, labels, index)[0],
                        [tokens[j] for j in index.tolist()]) for index in (val, test))
        combiner = stack(val_scores, labels[val])
        truth = labels[test]
        results.append({"test": score_accuracy(test_scores[:, 0], truth),  # log-odds > 0
                        "nbsvm": score_accuracy(test_scores[:, 1], truth),
                        "stacked": score_accuracy(combiner(test_scores).squeeze(1), truth),
                        "val": max(history["val_acc"]),
                        "weights": combiner.weight.squeeze(0).tolist(),
                        "seconds": time.perf_counter() - start})
    return results


def nbsvm_folds(sentences: list, labels: torch.Tensor, folds: list) -> list[float]:
    """NBSVM as Wang & Manning run it: for each fold, trained on all the other folds (nine
    of ten) and tested on it; `sentences` are token lists. The test accuracy per fold."""
    accuracies = []
    for i, test in enumerate(folds):
        train = torch.cat([f for j, f in enumerate(folds) if j != i])
        model = NBSVM().fit([sentences[j] for j in train.tolist()], labels[train])
        accuracies.append(score_accuracy(model.decision([sentences[j] for j in test.tolist()]),
                                         labels[test]))
    return accuracies


def words_of_two_letters(sentence: str) -> list[str]:
    """The tokens of scikit-learn's default pattern: runs of two or more letters, digits or
    underscores, so punctuation and one-letter words are dropped."""
    return re.findall(r"(?u)\b\w\w+\b", sentence)
