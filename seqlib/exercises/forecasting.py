"""Checkers for the exercises of the time-series chapter (lookahead prediction, Fig. 7.1 (a)).

- `check_companion`: AR(p) written as a linear recurrent unit, its state the last p values
  and its W_hh the companion matrix of the coefficients;
- `check_feed_back`: the two phases of lookahead prediction, a warm-up on observed values
  and then predictions fed back as inputs, the loop of (7.3), written with the teacher-forced
  forward pass of a seqlib.experiments.forecasting.Forecaster.

Series are (batch, time) tensors, as in seqlib.experiments.forecasting.
"""

import torch

from seqlib.exercises.toolkit import (
    ExerciseError,
    close,
    expect,
    expect_close,
    expect_tensor,
    name_mistake,
    passed,
    require_callable,
    run_attempt,
    seeded,
)
from seqlib.experiments.forecasting import Forecaster, ar_forecast

TOL = dict(atol=1e-8, rtol=1e-5)  # float64 series: round-off only


def _linear_forecast(W_hh: torch.Tensor, b_h: torch.Tensor, history: torch.Tensor,
                     horizon: int) -> torch.Tensor:
    """Forecasts of the linear unit h^<t+1> = W_hh h^<t> + b_h, y_hat = h_1: the state
    starts at (x^<T>, x^<T-1>, ..., x^<T-p+1>) and each step's first entry is the forecast."""
    p = W_hh.shape[0]
    h = history[:, -p:].flip(1)  # (B, p): the last p values, newest first
    predictions = []
    for _ in range(horizon):
        h = h @ W_hh.T + b_h  # (B, p)
        predictions.append(h[:, 0])
    return torch.stack(predictions, dim=1)  # (B, horizon)


def check_companion(attempt) -> None:
    """Check `attempt(coef) -> (W_hh, b_h)`: for the AR(p) coefficients coef = [c, a_1, ...,
    a_p] (a (p + 1,) tensor, as forecasting.fit_ar returns them), the (p, p) matrix
    W_hh and the (p,) vector b_h of the linear unit h^<t+1> = W_hh h^<t> + b_h whose state
    h^<t> = (x^<t>, x^<t-1>, ..., x^<t-p+1>) holds the last p values, newest first. Run from
    the state at the end of a history, the first entry of each new state must be the
    forecast of seqlib.experiments.forecasting.ar_forecast."""
    require_callable(attempt, "companion(coef) -> (W_hh, b_h)")
    generator = torch.Generator().manual_seed(0)
    for p in (1, 2, 5):
        coef = torch.cat([torch.randn(1, generator=generator, dtype=torch.float64),
                          0.8 * torch.rand(p, generator=generator, dtype=torch.float64) / p])
        c, a = coef[0], coef[1:]
        given = coef.clone()
        W_hh, b_h = run_attempt(attempt, given, what=f"companion(coef) for p = {p}",
                                returns=("W_hh", "b_h"))
        expect(torch.equal(given, coef), "your function changed coef in place")
        expect_tensor("W_hh", W_hh, (p, p), dims="(p, p)")
        expect_tensor("b_h", b_h, (p,), dims="(p,)")
        W_hh, b_h = W_hh.double(), b_h.double()
        history = 10 + 3 * torch.randn(3, p + 4, generator=generator, dtype=torch.float64)
        expected = ar_forecast(coef, history, 8)  # (3, 8)
        forecasts = _linear_forecast(W_hh, b_h, history, 8)
        if close(forecasts, expected, **TOL):
            continue
        # Wrong forecasts: say which part of the unit is off.
        W_ref = _companion(coef)[0]
        if p > 1:
            name_mistake(f"p = {p}: row 0 of W_hh", W_hh[0], [(a.flip(0), "it holds a_p, ..., "
                         "a_1, the coefficients in reverse order; the state's first entry is "
                         "x^<t>, which a_1 multiplies, so row 0 is (a_1, ..., a_p)")], **TOL)
            name_mistake(f"p = {p}", W_hh, [(W_ref.T, "W_hh is the transpose of the companion "
                         "matrix: row 0 must hold (a_1, ..., a_p), the prediction, and rows 1 "
                         "to p - 1 must shift the state down one place")], **TOL)
        expect(close(W_hh[0], a, **TOL), f"p = {p}: row 0 of W_hh should be (a_1, ..., a_p) = "
               f"{[round(v, 4) for v in a.tolist()]}, got "
               f"{[round(v, 4) for v in W_hh[0].tolist()]}: the first entry of the new state "
               "is the prediction c + a_1 x^<t> + ... + a_p x^<t-p+1>")
        expect(close(b_h[:1], c.reshape(1), **TOL), f"p = {p}: b_h[0] should be the constant "
               f"c = {c.item():.4f}, got {b_h[0].item():.4f}")
        expect(close(b_h[1:], torch.zeros(p - 1), **TOL),
               f"p = {p}: b_h[1:] should be zero: only the new prediction gets the constant; "
               "the other entries are copies of older values")
        expect(close(W_hh[1:], W_ref[1:], **TOL),
               f"p = {p}: rows 1 to {p - 1} of W_hh should shift the state down one place, "
               "h_i^<t+1> = h_(i-1)^<t> (ones just below the diagonal, zeros elsewhere), so "
               "the state keeps the last p values")
        expect_close(f"p = {p}: the forecasts of the unit", forecasts, expected, **TOL)
    passed("the companion matrix W_hh and b_h = (c, 0, ..., 0) run AR(p) as a linear "
           "recurrent unit; its fed-back forecasts equal forecasting.ar_forecast for "
           "p = 1, 2 and 5")


def _companion(coef: torch.Tensor):
    """The book's answer: W_hh (p, p) and b_h (p,) of AR(p) as a linear unit."""
    p = len(coef) - 1
    W_hh = torch.zeros(p, p, dtype=coef.dtype)
    W_hh[0] = coef[1:]  # the prediction c + a_1 x^<t> + ... + a_p x^<t-p+1>
    W_hh[1:, :-1] = torch.eye(p - 1, dtype=coef.dtype)  # the shift: older values move down
    b_h = torch.zeros(p, dtype=coef.dtype)
    b_h[0] = coef[0]
    return W_hh, b_h


class _Forecaster(Forecaster):
    """A Forecaster whose `forecast` is what the attempt writes: calling it is refused."""

    def forecast(self, history, horizon, day=None):
        raise ExerciseError("your function called model.forecast, the method this exercise "
                            "asks you to write: use only model(window, day, state)")


def _variant(model: Forecaster, history, horizon, day, *, whole=False, restart=False):
    """Wrong versions of the loop, to name a mistake: warming up on the whole history
    (`whole`), or dropping the state between the fed-back steps (`restart`)."""
    w = history.shape[1] if whole else model.warmup
    start = None if day is None else day + history.shape[1] - w
    y_hat, state = model(history[:, -w:], start)
    predictions = [y_hat[:, -1]]
    for k in range(1, horizon):
        step_day = None if start is None else start + w - 1 + k
        y_hat, state = model(predictions[-1].unsqueeze(1), step_day,
                             None if restart else state)
        predictions.append(y_hat[:, 0])
    return torch.stack(predictions, dim=1)


def check_feed_back(attempt) -> None:
    """Check `attempt(model, history, horizon, day) -> (B, horizon)`, the lookahead loop of
    Fig. 7.1 (a) for a forecasting.Forecaster `model`, written with its teacher-forced
    forward pass `model(window, day, state) -> (predictions (B, T), state)` only: warm up on
    the last model.warmup values of `history` (B, T), then feed each prediction back as the
    next input, carrying the state, up to `horizon`. `day` (B,) is the day index of
    history[:, 0], or None for a model without a calendar. Column k - 1 must be the
    forecast at lead k, as Forecaster.forecast returns it."""
    require_callable(attempt, "feed_back(model, history, horizon, day) -> forecasts")
    generator = torch.Generator().manual_seed(0)
    history = 12 + 4 * torch.randn(3, 10, generator=generator, dtype=torch.float64)
    cases = [(unit, period) for period in (None, 365) for unit in ("rnn", "lstm", "gru")]
    for unit, period in cases:
        with seeded(1):  # seeded weights, the caller's random state untouched
            model = _Forecaster(unit, 6, warmup=4, loc=12.0, scale=4.0, period=period).double()
        day = None if period is None else torch.tensor([0, 150, 358])  # 358: a new year
        what = f"a {unit.upper()} forecaster " + ("without a calendar" if period is None
                                                   else "with the calendar (period 365)")
        for horizon in (6, 1):
            with torch.no_grad():
                expected = Forecaster.forecast(model, history, horizon, day)
            got = run_attempt(attempt, model, history.clone(), horizon,
                              None if day is None else day.clone(),
                              what=f"{what}, horizon {horizon}")
            expect_tensor(f"{what}, horizon {horizon}: the result", got, expected.shape,
                          dims="(B, horizon)", why="one forecast per history and lead")
            got = got.detach().double()
            if close(got, expected, **TOL):
                continue
            mistakes = [(dict(whole=True), "you warmed up on the whole history; the warm-up "
                         "phase reads only its last model.warmup values"),
                        (dict(restart=True), "lead 1 is right, but each fed-back step starts "
                         "from a zero state; pass the state returned by one call of model "
                         "into the next")]
            with torch.no_grad():
                name_mistake(what, got, ((_variant(model, history, horizon, day, **change),
                                          message) for change, message in mistakes), **TOL)
            lead_one = close(got[:, :1], expected[:, :1], **TOL)
            if not lead_one and period is not None:
                with torch.no_grad():  # the window read with the day of history[:, 0]
                    unshifted = model(history[:, -model.warmup:], day)[0][:, -1:]
                expect(not close(got[:, :1], unshifted, **TOL),
                       f"{what}: lead 1 reads the wrong days of the calendar; `day` is the "
                       "day index of history[:, 0], so the window of the last model.warmup "
                       "values starts at day + T - model.warmup")
                expect_close(f"{what}: the forecast at lead 1 (the last output of the "
                             "warm-up phase)", got[:, :1], expected[:, :1], atol=1e-8)
            expect(period is None, f"{what}: lead 1 is right but later leads are not, and the "
                                   "same loop without a calendar was right: each fed-back step "
                                   "must read the calendar of its own day; the forecast of "
                                   "x^<T+k> enters the unit at day index day + T - 1 + k")
            expect_close(f"{what}: the fed-back forecasts (lead 1 is right; check the value "
                         "fed back and the state carried over)", got, expected, atol=1e-8)
    passed("warm-up on the last model.warmup values, then each prediction fed back with the "
           "state carried over and the calendar of its own day: the forecasts of "
           "Forecaster.forecast for RNN, LSTM and GRU forecasters, with and without a calendar")
