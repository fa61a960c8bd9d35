"""The checkers of the time-series chapter's exercises (seqlib.exercises.forecasting) accept
the book's answers and name what is wrong with typical wrong ones."""

import pytest
import torch

from seqlib.exercises import ExerciseError, check_companion, check_feed_back


def companion(coef):
    """The book's answer: AR(p) as a linear unit, state (x^<t>, ..., x^<t-p+1>)."""
    p = len(coef) - 1
    W_hh = torch.zeros(p, p, dtype=coef.dtype)
    W_hh[0] = coef[1:]
    W_hh[1:, :-1] = torch.eye(p - 1, dtype=coef.dtype)
    b_h = torch.zeros(p, dtype=coef.dtype)
    b_h[0] = coef[0]
    return W_hh, b_h


def feed_back(model, history, horizon, day, *, whole=False, restart=False, day_shift=0,
              window_day=False):
    """The book's answer, with switches for typical mistakes."""
    w = history.shape[1] if whole else model.warmup
    start = None if day is None else (day if window_day else day + history.shape[1] - w)
    y_hat, state = model(history[:, -w:], start)
    predictions = [y_hat[:, -1]]
    for k in range(1, horizon):
        step_day = None if start is None else start + w - 1 + k + day_shift
        y_hat, state = model(predictions[-1].unsqueeze(1), step_day,
                             None if restart else state)
        predictions.append(y_hat[:, 0])
    return torch.stack(predictions, dim=1)


@pytest.mark.parametrize("wrong, message", [
    (lambda coef: (companion(coef)[0].T, companion(coef)[1]), "transpose"),
    (lambda coef: (companion(torch.cat([coef[:1], coef[1:].flip(0)]))), "reverse order"),
    (lambda coef: (companion(coef)[0], coef[0].expand(len(coef) - 1).clone()),
     r"b_h\[1:\] should be zero"),
    (lambda coef: (companion(coef)[0], torch.zeros(len(coef) - 1, dtype=coef.dtype)),
     r"b_h\[0\] should be the constant"),
    (lambda coef: companion(coef)[0], "return a tuple"),
    (lambda coef: (companion(coef)[0][:1], companion(coef)[1]), r"W_hh has shape \(1, 2\)"),
])
def test_wrong_companion_matrices_are_named(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_companion(wrong)


def test_a_shift_that_loses_a_value_is_named():
    def leaky(coef):
        W_hh, b_h = companion(coef)
        return W_hh * (W_hh != 1), b_h  # the ones below the diagonal dropped
    with pytest.raises(ExerciseError, match="shift the state down"):
        check_companion(leaky)


@pytest.mark.parametrize("options, message", [
    ({"whole": True}, "whole history"),
    ({"restart": True}, "zero state"),
    ({"day_shift": 1}, "calendar of its own day"),
    ({"window_day": True}, "lead 1 reads the wrong days of the calendar"),
])
def test_typical_wrong_loops_are_named(options, message):
    with pytest.raises(ExerciseError, match=message):
        check_feed_back(lambda *args: feed_back(*args, **options))


def test_the_loop_must_not_call_forecast():
    with pytest.raises(ExerciseError, match="called model.forecast"):
        check_feed_back(lambda model, history, horizon, day: model.forecast(history, horizon,
                                                                            day))


def test_a_wrong_fed_back_value_is_caught():
    def truth_free(model, history, horizon, day):  # feeds back the last observed value
        out = feed_back(model, history, horizon, day)
        return torch.cat([out[:, :1], out[:, :1].expand(-1, horizon - 1)], dim=1)
    with pytest.raises(ExerciseError, match="fed-back forecasts"):
        check_feed_back(truth_free)


def test_wrong_shapes_and_types_are_named():
    with pytest.raises(ExerciseError, match=r"has shape \(3, 5\), expected \(B, horizon\) = "
                                            r"\(3, 6\)"):
        check_feed_back(lambda *args: feed_back(*args)[:, :5])
    with pytest.raises(ExerciseError, match="the result should be a torch.Tensor, got list"):
        check_feed_back(lambda *args: feed_back(*args).tolist())
