"""The recurrent forecaster of Fig. 7.1 (a) and the AR(p) baseline
(seqlib.experiments.forecasting)."""

import math
from functools import partial

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seqlib.experiments import runs
from seqlib.experiments.forecasting import (
    Forecaster,
    ar_forecast,
    calendar,
    fed_back_loss,
    fit_ar,
    forecaster,
    lagged,
    one_step_loss,
    origins,
    random_windows,
    run,
)

UNITS = ["rnn", "lstm", "gru"]


def model(unit="lstm", period=365, warmup=5, seed=0):
    torch.manual_seed(seed)
    return Forecaster(unit, 8, warmup=warmup, loc=10.0, scale=4.0, period=period).double()


def series(B=3, T=12, seed=1):
    return 10 + 4 * torch.randn(B, T, generator=torch.Generator().manual_seed(seed),
                                dtype=torch.float64)


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("period", [None, 365])
def test_shapes(unit, period):
    m, x = model(unit, period), series()
    day = torch.tensor([0, 100, 364])
    y_hat, _ = m(x, day)
    assert y_hat.shape == (3, 12)
    assert m.forecast(x, 7, day).shape == (3, 7)


@pytest.mark.parametrize("unit", UNITS)
def test_horizon_one_is_the_one_step_prediction(unit):
    m, x = model(unit), series()
    day = torch.tensor([3, 40, 300])
    y_hat, _ = m(x[:, -m.warmup:], day + x.shape[1] - m.warmup)
    assert torch.allclose(m.forecast(x, 1, day)[:, 0], y_hat[:, -1], atol=1e-12)


@pytest.mark.parametrize("unit", UNITS)
def test_fed_back_forecast_equals_stepping_by_hand(unit):
    m, x, horizon = model(unit), series(), 6
    day = torch.tensor([3, 40, 360])
    forecast = m.forecast(x, horizon, day)
    # By hand, (7.3): warm up on the observed window, then put each prediction in the value
    # slot of the next input, the calendar of its own day in the other slots.
    w, T = m.warmup, x.shape[1]
    first = day + T - w  # day index of the first value of the window
    inputs = torch.stack([(x[:, -w:] - 10) / 4,
                          *calendar(first[:, None] + torch.arange(w), 365).unbind(-1)], -1)
    out, state = m.unit(inputs, None)
    y = out[:, -1, 0] * 4 + 10
    by_hand = [y]
    for k in range(1, horizon):
        x_t = torch.cat([((y - 10) / 4)[:, None], calendar(first + w - 1 + k, 365)], -1)
        out, state = m.unit(x_t[:, None], state)
        y = out[:, 0, 0] * 4 + 10
        by_hand.append(y)
    assert torch.allclose(forecast, torch.stack(by_hand, 1), atol=1e-12)
    # The same thing seen as teacher forcing on the model's own predictions.
    fed, _ = m(torch.cat([x[:, -w:], forecast[:, :-1]], 1), first)
    assert torch.allclose(fed[:, w - 1:], forecast, atol=1e-12)


@settings(max_examples=10, deadline=None)
@given(horizon=st.integers(1, 8), extra=st.integers(1, 5), unit=st.sampled_from(UNITS))
def test_a_longer_horizon_extends_a_shorter_one(horizon, extra, unit):
    m, x = model(unit, period=None), series()
    assert torch.allclose(m.forecast(x, horizon + extra)[:, :horizon], m.forecast(x, horizon),
                          atol=1e-12)


def test_only_the_last_warmup_values_are_read():
    m, x = model(), series()
    changed = x.clone()
    changed[:, 0] += 100
    day = torch.zeros(3)
    assert torch.equal(m.forecast(x, 4, day), m.forecast(changed, 4, day))


def test_clear_errors():
    m, x = model(), series()
    day = torch.zeros(3)
    with pytest.raises(ValueError, match="horizon must be a positive int, got 0"):
        m.forecast(x, 0, day)
    with pytest.raises(ValueError, match="history has 4 steps, shorter than the warm-up of 5"):
        m.forecast(x[:, :4], 3, day)
    with pytest.raises(TypeError, match="history must hold floats, got dtype torch.int64"):
        m.forecast(x.long(), 3, day)
    with pytest.raises(ValueError, match=r"history must have 2 dimensions .* got shape \(12,\)"):
        m.forecast(x[0], 3, day)
    with pytest.raises(TypeError, match="window must be a torch.Tensor, got list"):
        m([[1.0, 2.0]], day)
    with pytest.raises(ValueError, match="day .* is needed"):
        m.forecast(x, 3)
    with pytest.raises(ValueError, match="unit must be one of"):
        Forecaster("transformer")
    with pytest.raises(ValueError, match="scale must be positive, got 0"):
        Forecaster(scale=0)


def test_one_step_loss_and_windows():
    data = torch.arange(100, dtype=torch.float64)
    window, start = next(random_windows(data, 10, 4, torch.Generator().manual_seed(0)))
    assert window.shape == (4, 11) and torch.equal(window[:, 0], start.double())
    assert torch.equal(window, start[:, None].double() + torch.arange(11))
    m = model(period=None)
    y_hat, _ = m(window[:, :-1])
    expected = ((y_hat - window[:, 1:]) / 4).pow(2).mean()
    assert torch.allclose(one_step_loss(m, (window, start)), expected)


def test_origins():
    data = torch.arange(50, dtype=torch.float64)
    history, targets, first = origins(data, 30, 39, window=5, horizon=3)
    assert history.shape == (8, 5) and targets.shape == (8, 3)  # origins 29 .. 36
    assert torch.equal(history[0], torch.arange(25.0, 30.0))
    assert torch.equal(targets[0], torch.tensor([30.0, 31.0, 32.0]))
    assert torch.equal(targets[-1], torch.tensor([37.0, 38.0, 39.0]))
    assert torch.equal(first, torch.arange(25, 33))
    with pytest.raises(ValueError, match="no origins"):
        origins(data, 2, 39, window=5, horizon=3)


def simulate_ar2(N, c=0.5, a=(0.6, -0.3), seed=0):
    noise = torch.randn(N + 100, generator=torch.Generator().manual_seed(seed),
                        dtype=torch.float64)
    x = [0.0, 0.0]
    for e in noise.tolist():
        x.append(c + a[0] * x[-1] + a[1] * x[-2] + e)
    return torch.tensor(x[102:], dtype=torch.float64)  # burn-in dropped


def test_fit_ar_recovers_a_simulated_ar2():
    N = 20_000
    x = simulate_ar2(N)
    coef = fit_ar(x, 2)
    # The standard errors of least squares are about 1 / sqrt(N) (noise variance 1); five
    # of them is a safe tolerance.
    assert torch.allclose(coef, torch.tensor([0.5, 0.6, -0.3], dtype=torch.float64),
                          atol=5 / math.sqrt(N))
    A, y = lagged(x, 2)
    normal = torch.linalg.solve(A.T @ A, A.T @ y)  # the normal equations A^T A c = A^T y
    assert torch.allclose(coef, normal, atol=1e-10)


def test_ar_forecast_matches_the_closed_form_of_ar1():
    c, a = 2.0, 0.7
    coef = torch.tensor([c, a], dtype=torch.float64)
    history = torch.tensor([[1.0, 5.0], [3.0, -2.0]], dtype=torch.float64)
    mean = c / (1 - a)  # x^<T+k> forecast = mean + a^k (x^<T> - mean)
    k = torch.arange(1, 11, dtype=torch.float64)
    expected = mean + a ** k * (history[:, -1:] - mean)
    assert torch.allclose(ar_forecast(coef, history, 10), expected, atol=1e-12)
    with pytest.raises(ValueError, match="horizon must be a positive int"):
        ar_forecast(coef, history, 0)
    with pytest.raises(TypeError, match="series must be a float tensor"):
        fit_ar(torch.arange(10), 2)
    with pytest.raises(ValueError, match="more than 2 p"):
        fit_ar(torch.ones(4, dtype=torch.float64), 2)


def test_trained_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path))
    model = {"hidden_size": 4}
    fit = {"context": 8, "batch_size": 4, "steps": 3, "lr": 1e-2, "warmup": 1}
    data = 10 + torch.sin(torch.arange(200.0) / 10)
    first, history = runs.trained(run("gru", partial(forecaster, "gru", data, model), data,
                                      fit | {"seed": 0}))
    again, saved = runs.trained(run("gru", partial(forecaster, "gru", data, model), data,
                                    fit))  # seed 0 when left out
    assert first is not again
    assert len(history["loss"]) == 3 and saved == history
    assert all(torch.equal(p, q) for p, q in zip(first.parameters(), again.parameters(),
                                                  strict=True))
    assert first.loc == pytest.approx(data.mean().item())


def test_a_run_through_the_feedback_loop():
    """With fit["teacher_forcing"] False the run's loss is that of the forecasts fed back
    after the model's warm-up window; with fit["decay"] False its rate is constant."""
    data = 10 + torch.sin(torch.arange(200.0) / 10)
    m = forecaster("gru", data, {"hidden_size": 4, "warmup": 4})
    fit = {"context": 7, "batch_size": 3, "steps": 2, "lr": 1e-2, "warmup": 0, "decay": False,
           "teacher_forcing": False}
    fed = run("fed", m, data, fit)
    assert fed.loss is fed_back_loss and fed.schedule is None and fed.clip == 1.0
    window, day = data[:8][None], torch.tensor([0])  # 4 values read, 4 forecast
    expected = ((m.forecast(window[:, :4], 4, day) - window[:, 4:]) / m.scale).pow(2).mean()
    assert torch.equal(fed_back_loss(m, (window, day)), expected)
    history = runs.fit(fed)
    assert len(history["loss"]) == 2
    with pytest.raises(ValueError, match="needs a schedule"):
        run("fed", m, data, fit | {"warmup": 1})
    with pytest.raises(ValueError, match=r"config has the keys \['length'\]"):
        run("fed", m, data, fit | {"length": 8})  # the window's length is "context"
