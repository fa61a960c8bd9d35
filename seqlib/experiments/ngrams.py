"""Bag-of-n-grams sentence classifiers (beyond the chapter): the baselines that the sequence
models of seqlib.experiments.classify are measured against on the sentence polarity data set, as in
Wang & Manning (2012), "Baselines and bigrams: simple, good sentiment and topic
classification" (ACL).

A sentence is the set of its distinct n-grams, of lengths 1 to n (word order survives only
inside an n-gram): x_hat in {0, 1}^V, one entry per n-gram of the training sentences, 1 when
the sentence holds it (binarised counts). With alpha-smoothed counts of the two classes,
p = alpha + sum of x_hat over the positive sentences and q the same over the negative ones,
the log-count ratio is r = log((p / ||p||_1) / (q / ||q||_1)) (V,):

- multinomial naive Bayes (MNB) scores r . x_hat + log(N_1 / N_0);
- NBSVM scores w' . (r o x_hat) + b: a linear SVM (L2 penalty, squared hinge loss, cost C)
  trained on the features r o x_hat, its weights then pulled towards their mean magnitude,
  w' = (1 - beta) mean|w| + beta w, which keeps the naive Bayes weighting where the data say
  little. The paper's setting: bigrams, alpha = 1, C = 1, beta = 0.25.

A score is the log-odds-like margin of class 1 (positive): > 0 predicts class 1.
"""

import torch

from seqlib.checks import positive_int


def ngrams(tokens: list, n: int) -> set:
    """The distinct n-grams of lengths 1 to n of a token list, each its words joined by a
    space: ngrams(["a", "b", "c"], 2) == {"a", "b", "c", "a b", "b c"}."""
    return {" ".join(tokens[i:i + k]) for k in range(1, n + 1)
            for i in range(len(tokens) - k + 1)}


def check_sentences(sentences) -> list:
    if not isinstance(sentences, list) or not all(
            isinstance(s, list) and all(isinstance(w, str) for w in s) for s in sentences):
        raise TypeError("sentences must be a list of token lists (lists of str), as "
                        "seqlib.text.word_tokenize gives them")
    return sentences


def svm_objective(wb: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor,
                  values: torch.Tensor, y: torch.Tensor, C: float):
    """(f, grad f) of NBSVM's SVM at wb = [w; b] (V + 1,), for features x (N, V) given by
    their nonzero entries x[rows, columns] = values and y in {-1, 1} (N,):
    f = 1/2 ||wb||^2 + C sum_i h_i^2 with h_i = max(0, 1 - y_i (w . x_i + b)), and
    grad_w f = w - 2 C x^T (y o h), d f / d b = b - 2 C sum_i y_i h_i."""
    w, b = wb[:-1], wb[-1]
    xw = torch.zeros_like(y).index_add_(0, rows, values * w[columns])  # x w, (N,)
    h = (1 - y * (xw + b)).clamp(min=0)
    yh = y * h
    xt_yh = torch.zeros_like(w).index_add_(0, columns, values * yh[rows])  # x^T (y o h), (V,)
    grad = wb - 2 * C * torch.cat([xt_yh, yh.sum()[None]])
    return 0.5 * wb @ wb + C * h @ h, grad


class NBSVM:
    """MNB and NBSVM on binarised n-gram features (see the module). fit(sentences, labels)
    with sentences token lists and labels 0/1 (N,); then `naive_bayes` and `decision` give
    the scores (N,) of new sentences (n-grams never seen in training are ignored) and
    `predict` the classes of NBSVM."""

    def __init__(self, n: int = 2, *, alpha: float = 1.0, C: float = 1.0, beta: float = 0.25):
        for name, value in (("alpha", alpha), ("C", C)):
            if not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if not isinstance(beta, int | float) or not 0 <= beta <= 1:
            raise ValueError(f"beta must be a number in [0, 1], got {beta!r}")
        self.n, self.alpha, self.C, self.beta = positive_int("n", n), alpha, C, beta
        self.index = None

    def _check_fitted(self):
        if self.index is None:
            raise RuntimeError("fit the model before using it")

    def entries(self, sentences: list) -> tuple:
        """(rows, columns), the nonzero entries of the binarised features x_hat (N, V): 1 at
        [i, j] when sentence i holds the n-gram of column j."""
        self._check_fitted()
        rows, columns = [], []
        for i, tokens in enumerate(check_sentences(sentences)):
            found = sorted({self.index[g] for g in ngrams(tokens, self.n) if g in self.index})
            rows += [i] * len(found)
            columns += found
        return torch.tensor(rows, dtype=torch.long), torch.tensor(columns, dtype=torch.long)

    def _sums(self, sentences: list, weights: torch.Tensor) -> torch.Tensor:
        """x_hat . weights for every sentence, (N,)."""
        rows, columns = self.entries(sentences)
        return torch.zeros(len(sentences), dtype=torch.float64).index_add_(0, rows,
                                                                           weights[columns])

    def fit(self, sentences: list, labels) -> "NBSVM":
        """Learn the n-gram index, r, the NB prior and the SVM weights (solved by L-BFGS in
        float64 until no entry of the gradient exceeds 1e-6; an error past 1e-4)."""
        labels = torch.as_tensor(labels)
        if labels.shape != (len(check_sentences(sentences)),) \
                or not bool(((labels == 0) | (labels == 1)).all()):
            raise ValueError(f"labels must be 0/1, one per sentence ({len(sentences)}), got "
                             f"shape {tuple(labels.shape)}")
        if labels.unique().numel() != 2:
            raise ValueError("labels must hold both classes, 0 and 1")
        grams = sorted(set().union(*(ngrams(s, self.n) for s in sentences)))
        self.index = {g: j for j, g in enumerate(grams)}
        rows, columns = self.entries(sentences)
        counts = torch.zeros(2, len(grams), dtype=torch.float64)  # sentences per class, n-gram
        counts.index_put_((labels[rows], columns), torch.ones(len(rows), dtype=torch.float64),
                          accumulate=True)
        p, q = self.alpha + counts[1], self.alpha + counts[0]
        self.r = (p / p.sum()).log() - (q / q.sum()).log()  # (V,)
        self.prior = (labels.sum() / (1 - labels).sum()).double().log()  # log(N_1 / N_0)
        self.w, self.b = self._svm(rows, columns, self.r[columns], 2 * labels.double() - 1)
        return self

    def _svm(self, rows, columns, values, y):
        """min f of `svm_objective`, the L2-regularised squared-hinge SVM (the bias penalised
        too, as in LIBLINEAR), by L-BFGS with the gradient written out."""
        wb = torch.zeros(len(self.index) + 1, dtype=torch.float64)
        optimizer = torch.optim.LBFGS([wb], lr=1, max_iter=2000, tolerance_grad=1e-6,
                                      tolerance_change=0, line_search_fn="strong_wolfe")

        def objective():
            loss, wb.grad = svm_objective(wb, rows, columns, values, y, self.C)
            return loss

        optimizer.step(objective)
        objective()  # the gradient at the end point
        if wb.grad.abs().max() > 1e-4:
            raise RuntimeError(f"the SVM did not converge: largest gradient entry "
                               f"{wb.grad.abs().max():.2e}")
        return wb[:-1].clone(), wb[-1].clone()

    def naive_bayes(self, sentences: list) -> torch.Tensor:
        """MNB scores r . x_hat + log(N_1 / N_0), (N,)."""
        return self._sums(sentences, self.r) + self.prior

    def decision(self, sentences: list) -> torch.Tensor:
        """NBSVM scores w' . (r o x_hat) + b, (N,), w' = (1 - beta) mean|w| + beta w."""
        self._check_fitted()
        w = (1 - self.beta) * self.w.abs().mean() + self.beta * self.w
        return self._sums(sentences, self.r * w) + self.b

    def predict(self, sentences: list) -> torch.Tensor:
        """NBSVM's classes (N,), 1 where the score is positive."""
        return (self.decision(sentences) > 0).long()
