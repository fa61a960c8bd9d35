"""Tests of seqlib.experiments.ngrams: n-grams, the log-count ratio and MNB by hand, the
SVM's gradient against autograd and its optimality, NBSVM's interpolation, unseen n-grams,
bad input."""

import math

import pytest
import torch

from seqlib.experiments.ngrams import NBSVM, ngrams, svm_objective

CORPUS = [("good fun film".split(), 1), ("good film".split(), 1), ("dull film".split(), 0),
          ("not good , dull".split(), 0), ("fun".split(), 1)]
SENTENCES = [s for s, _ in CORPUS]
LABELS = torch.tensor([y for _, y in CORPUS])


def test_ngrams():
    assert ngrams(["a", "b", "c"], 2) == {"a", "b", "c", "a b", "b c"}
    assert ngrams(["a", "b", "a", "b"], 3) == {"a", "b", "a b", "b a", "a b a", "b a b"}
    assert ngrams([], 2) == set() and ngrams(["a"], 3) == {"a"}


def test_log_count_ratio_and_naive_bayes_by_hand():
    model = NBSVM(n=1, alpha=1.0).fit(SENTENCES, LABELS)
    vocab = sorted({w for s in SENTENCES for w in s})
    assert list(model.index) == vocab  # the columns: the training n-grams, sorted
    # sentences per class holding each word, plus alpha = 1
    p = {w: 1 + sum(w in s for s, y in CORPUS if y == 1) for w in vocab}
    q = {w: 1 + sum(w in s for s, y in CORPUS if y == 0) for w in vocab}
    r = {w: math.log(p[w] / sum(p.values())) - math.log(q[w] / sum(q.values())) for w in vocab}
    torch.testing.assert_close(model.r, torch.tensor([r[w] for w in vocab], dtype=torch.float64))
    prior = math.log(3 / 2)
    scores = model.naive_bayes([["good", "good", "film"], ["dull"]])  # binarised: good once
    torch.testing.assert_close(scores, torch.tensor(
        [r["good"] + r["film"] + prior, r["dull"] + prior], dtype=torch.float64))


def dense_objective(wb, x, y, C):
    """The SVM's objective written densely, for autograd."""
    h = (1 - y * (x @ wb[:-1] + wb[-1])).clamp(min=0)
    return 0.5 * wb @ wb + C * h @ h


def test_svm_gradient_matches_autograd():
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(12, 7, generator=g) < 0.4).double() * torch.randn(7, generator=g).double()
    y = torch.randint(0, 2, (12,), generator=g).double() * 2 - 1
    rows, columns = x.nonzero(as_tuple=True)
    for wb in (torch.zeros(8, dtype=torch.float64), torch.randn(8, generator=g).double()):
        loss, grad = svm_objective(wb, rows, columns, x[rows, columns], y, 0.7)
        wb = wb.clone().requires_grad_(True)
        expected = dense_objective(wb, x, y, 0.7)
        expected.backward()
        torch.testing.assert_close(loss, expected.detach())
        torch.testing.assert_close(grad, wb.grad)


def test_fit_solves_the_svm():
    """At the fitted [w; b] the objective's gradient (by autograd, on the dense features
    r o x_hat) vanishes, and no small step lowers it."""
    model = NBSVM(n=2, C=0.5).fit(SENTENCES, LABELS)
    rows, columns = model.entries(SENTENCES)
    x = torch.zeros(len(SENTENCES), len(model.index), dtype=torch.float64)
    x[rows, columns] = model.r[columns]
    y = 2 * LABELS.double() - 1
    wb = torch.cat([model.w, model.b[None]]).requires_grad_(True)
    f = dense_objective(wb, x, y, 0.5)
    f.backward()
    assert wb.grad.abs().max() < 1e-5
    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        step = 1e-3 * torch.randn(wb.shape, generator=g, dtype=torch.float64)
        assert dense_objective(wb.detach() + step, x, y, 0.5) >= f.detach()
    assert torch.equal(model.predict(SENTENCES), LABELS)  # separable: all right


def test_interpolation_and_unseen_ngrams():
    model = NBSVM(n=2, beta=1.0).fit(SENTENCES, LABELS)
    rows, columns = model.entries(SENTENCES[:1])
    torch.testing.assert_close(model.decision(SENTENCES[:1]),
                               (model.r[columns] * model.w[columns]).sum()[None] + model.b)
    model.beta = 0.0  # all weights at mean|w|: NB's weighting r, scaled, plus the SVM's bias
    mean = model.w.abs().mean()
    torch.testing.assert_close(model.decision(SENTENCES[:1]),
                               mean * model.r[columns].sum()[None] + model.b)
    unseen = [["never", "seen"], []]
    torch.testing.assert_close(model.decision(unseen), model.b.repeat(2))
    torch.testing.assert_close(model.naive_bayes(unseen), model.prior.repeat(2))


def test_bad_input():
    with pytest.raises(RuntimeError, match="fit the model"):
        NBSVM().decision(SENTENCES)
    with pytest.raises(TypeError, match="token lists"):
        NBSVM().fit(["good film", "dull film"], [1, 0])
    with pytest.raises(ValueError, match="one per sentence"):
        NBSVM().fit(SENTENCES, LABELS[:3])
    with pytest.raises(ValueError, match="0/1"):
        NBSVM().fit(SENTENCES, LABELS * 2)
    with pytest.raises(ValueError, match="both classes"):
        NBSVM().fit(SENTENCES, torch.ones(5, dtype=torch.long))
    for kwargs, match in [({"alpha": 0}, "alpha"), ({"C": -1.0}, "C"), ({"beta": 1.5}, "beta"),
                          ({"n": 0}, "n")]:
        with pytest.raises(ValueError, match=match):
            NBSVM(**kwargs)
