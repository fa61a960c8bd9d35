"""The sentiment experiment of the book (beyond the chapter): sentence classification on the
sentence polarity data set of seqlib.experiments.datasets.movie_reviews, with the classifiers of
seqlib.experiments.classify.

- splits: seeded stratified folds (`stratified_folds`, 10 of them for cross-validation, the
  data set's usual protocol) and a fixed 80/10/10 train/validation/test split made of them
  (`stratified_split`); the data set has no official split;
- `prepare`: word tokens and a vocabulary of the training sentences only (words seen fewer
  than min_freq times there become <unk>), ids of every sentence;
- `PROFILES` (seqlib.pages.config): a setup per classifier of classify.KINDS ("model":
  the arguments of classify.build) and "word2vec";
- a classifier (classify.build, started from word2vec vectors or not) trains through
  classify.run (AdamW on batches of sentences of similar lengths, the validation accuracy
  measured a few times, and the best of those checkpoints kept; the test set is never
  looked at), and runs.trained;
- `word2vec`: Section 7.1's skip-gram vectors (seqlib.experiments.word2vec.run), trained on
  the training sentences only;
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
from seqlib.embeddings import SkipGram
from seqlib.experiments import classify, runs
from seqlib.experiments import word2vec as skipgram
from seqlib.experiments.classify import build, predict
from seqlib.experiments.ngrams import NBSVM
from seqlib.pages.seeds import generator
from seqlib.text import word_tokenize, word_vocab

# The setups (seqlib.pages.config), one per classifier of classify.KINDS: the vocabulary's
# words seen at least min_freq times ("data"), the model's sizes ("model", the arguments of
# classify.build: p the embedding size, hidden_size the m~ of each direction, chosen so that
# the encoders have 48,000-51,000 parameters each besides their embedding table; dropout),
# the same budget for every model ("fit": steps, batch size, regularisation); and
# "word2vec", the skip-gram vectors some start from (seqlib.experiments.word2vec.run).
# SEQLIB_FULL=1: longer training, and 10-fold cross-validation in the chapter.
DATA = dict(min_freq=2)
MODELS = {"bag": dict(p=128, dropout=0.5),
          "lstm": dict(p=128, hidden_size=64, dropout=0.5),
          "bilstm": dict(p=128, hidden_size=38, dropout=0.5),
          "bigru": dict(p=128, hidden_size=46, dropout=0.5),
          "transformer": dict(p=128, heads=2, m=16, n1=128, dropout=0.5)}


def _setups(steps: int, evals: int, w2v_steps: int) -> dict:
    """The setups of one profile: every classifier on the same budget, and word2vec."""
    fit = dict(steps=steps, batch_size=50, lr=5e-3, weight_decay=0.01, evals=evals)
    setups = {kind: {"data": dict(DATA), "model": dict(model), "fit": dict(fit)}
              for kind, model in MODELS.items()}
    setups["word2vec"] = {"data": dict(DATA), "model": dict(dim=128),
                          "fit": dict(steps=w2v_steps, batch_size=4096, lr=0.02, window=3,
                                      K=5, threshold=1e-3)}
    return setups


PROFILES = {"book": _setups(steps=680, evals=8, w2v_steps=600),
            "full": _setups(steps=1020, evals=12, w2v_steps=1200)}


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


def word2vec(ids: list, vocab_size: int, setup: dict, seed: int = 0) -> torch.Tensor:
    """Skip-gram word vectors (vocab_size, dim) of the sentences `ids` (lists of ids), of
    the setup "word2vec" (`setup`: the SkipGram's dim and the fit of
    seqlib.experiments.word2vec.run, seeded with `seed`) through runs.trained."""
    model, _ = runs.trained(skipgram.run(
        "sentiment-word2vec", lambda: SkipGram(vocab_size, **setup["model"]), ids,
        setup["fit"] | {"seed": seed}))
    return model.vectors.clone()


def both_scores(model: nn.Module, nbsvm: NBSVM, ids: list, sentences: list) -> torch.Tensor:
    """(N, 2): the log-odds of a trained classifier on the id sequences `ids` and NBSVM's
    scores of the same sentences as token lists, the inputs of `stack`."""
    return torch.stack([log_odds(model, ids), nbsvm.decision(sentences)], 1)


def cross_validate(pairs: list, setups: dict, *, kind: str = "lstm", k: int = 10,
                   seed: int = 0) -> list[dict]:
    """The protocol of the chapter once per fold of `stratified_folds(labels, k, seed)`: fold
    i is the test set, fold i + 1 (mod k) the validation set, the other k - 2 folds the
    training set (vocabulary, word2vec vectors and the classifier `kind` started from them,
    of the setups `setups` (seqlib.pages.config.profile(PROFILES)); NBSVM of
    seqlib.experiments.ngrams on the same sentences; their `stack` fitted on the validation
    set). Returns one dict per fold: test accuracy of the classifier ("test"), of NBSVM
    ("nbsvm") and of the stack ("stacked"), the classifier's best validation accuracy
    ("val"), the stack's weights of the two log-odds ("weights") and the seconds taken."""
    folds = stratified_folds([y for _, y in pairs], k, seed)
    tokens = [word_tokenize(s) for s, _ in pairs]
    config = setups[kind]
    results = []
    for i in range(k):
        start = time.perf_counter()
        test, val = folds[i], folds[(i + 1) % k]
        train_index = torch.cat([f for j, f in enumerate(folds) if j not in (i, (i + 1) % k)])
        vocab, ids, labels = prepare(pairs, train_index, **config["data"])
        train_set = subset(ids, labels, train_index)
        vectors = word2vec(train_set[0], len(vocab), setups["word2vec"], seed=seed)
        model, history = runs.trained(classify.run(
            f"sentiment-{kind}-word2vec",
            partial(build, kind, len(vocab), config["model"], vectors),
            (train_set, subset(ids, labels, val)), config["fit"] | {"seed": seed}))
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
