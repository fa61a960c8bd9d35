"""The checkers of the page on label smoothing, calibration and beam search accept the
book's solutions and say what is wrong with typical wrong attempts."""

import math

import pytest
import torch

from seqlib.exercises import ExerciseError, check_beam_step, check_fit_temperature
from seqlib.exercises.decoding import best_temperature


def beam_step(hypotheses, log_p, K, stop_id, *, own_score=True, finish_any=False,
              keep_stops=False, worst_first=False):
    """The book's solution, and (through the keywords) the mistakes the tests make."""
    scores = torch.tensor([s if own_score else 0.0 for _, s in hypotheses], dtype=log_p.dtype)
    total = scores[:, None] + log_p  # (N, V)
    V = log_p.shape[1]
    live, finished = [], []
    for rank, flat in enumerate(total.flatten().argsort(descending=True).tolist()):
        i, y = divmod(flat, V)
        s = total[i, y].item()
        if s == -math.inf or len(live) == K:
            break
        prefix = hypotheses[i][0]
        if y == stop_id and not keep_stops:
            if rank < K or finish_any:
                finished.append((prefix, s))
        else:
            live.append((prefix + (y,), s))
    return (live[::-1] if worst_first else live), finished


def fit_temperature(logits, targets):
    """The book's solution: L-BFGS on log T."""
    log_T = torch.zeros((), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([log_T], max_iter=100, line_search_fn="strong_wolfe")
    z = logits.double()

    def closure():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(z / log_T.exp(), targets)
        loss.backward()
        return loss

    optimizer.step(closure)
    return log_T.exp().item()


@pytest.mark.parametrize("mistake, message", [
    (dict(own_score=False), "last token's log-probabilities alone"),
    (dict(finish_any=True), r"ranks \d+ of all the extensions"),
    (dict(keep_stops=True), "ends in <stop>"),
    (dict(worst_first=True), "in the wrong order"),
])
def test_beam_step_mistakes_are_named(mistake, message):
    with pytest.raises(ExerciseError, match=message):
        check_beam_step(lambda *args: beam_step(*args, **mistake))


def test_beam_step_bad_results_and_arguments():
    with pytest.raises(ExerciseError, match=r"return a tuple \(live, finished\), got list"):
        check_beam_step(lambda *args: beam_step(*args)[0])
    with pytest.raises(ExerciseError, match="each entry of live should be a pair"):
        check_beam_step(lambda *args: ([list(p) for p, _ in beam_step(*args)[0]], []))


def test_the_reference_temperature_is_the_minimum():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(500, 7, generator=gen, dtype=torch.float64)
    targets = torch.multinomial(torch.softmax(1.7 * logits, -1), 1, generator=gen)[:, 0]
    T = best_temperature(logits, targets)
    assert 1 / 3 < T < 1  # the targets come from sharper predictions than the logits give

    def nll(t):
        return torch.nn.functional.cross_entropy(logits / t, targets).item()

    assert nll(T) < nll(T * 1.01) and nll(T) < nll(T / 1.01)


@pytest.mark.parametrize("attempt, message", [
    (lambda logits, targets: 1 / fit_temperature(logits, targets), "inverse"),
    (lambda logits, targets: 1.0, "mean NLL"),
    (lambda logits, targets: -2.0, "must be a number > 0"),
    (lambda logits, targets: "1.0", "should return a number"),
])
def test_temperature_mistakes_are_named(attempt, message):
    with pytest.raises(ExerciseError, match=message):
        check_fit_temperature(attempt)
