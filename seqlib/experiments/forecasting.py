"""Lookahead prediction of a time series, the task of Fig. 7.1 (a) (beyond the chapter:
the chapter draws the task and trains no model for it).

A series x^<1>, x^<2>, ... of real numbers is forecast from its past. The recurrent
forecaster reads a window of observed values (the warm-up phase of Fig. 7.1 (a)); its
output y_hat^<t> = W_yh h^<t> + b_y at step t is the prediction of x^<t+1>. Past the last
observed value, each prediction is fed back as the next input, the output feedback of
(7.3): the value slot of x^<t> is empty (zero) and T(y_hat^<t-1>) puts the prediction
there, so x^<t> + T(y_hat^<t-1>) enters the unit through W_hx, up to the horizon tau.
Inputs that are known in advance (the calendar) stay in the other slots of x^<t>.

The linear baseline is the autoregressive model AR(p),
x^<t> = c + a_1 x^<t-1> + ... + a_p x^<t-p> + noise, fitted by least squares (`fit_ar`)
and forecast with the same feedback loop (`ar_forecast`).

Series are (batch, time) tensors here: one value per step, in the series' own units.
"""

import math
from functools import partial

import torch
from torch import nn

from seqlib.checks import positive_int
from seqlib.experiments import runs
from seqlib.gated import UNITS
from seqlib.pages.config import check_config
from seqlib.training import adamw, warmup_cosine


def check_series(x, name: str = "history", min_length: int = 1) -> torch.Tensor:
    """Return `x` as a float (batch, time) tensor, raising a clear error otherwise."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must hold floats, got dtype {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"{name} must have 2 dimensions (batch, time), got shape "
                         f"{tuple(x.shape)}")
    if x.shape[0] == 0 or x.shape[1] < min_length:
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected a batch of at least one "
                         f"series of at least {min_length} steps")
    return x


def calendar(day: torch.Tensor, period: int) -> torch.Tensor:
    """Day-of-period features (sin, cos) of 2 pi day / period: (...) -> (..., 2)."""
    angle = 2 * math.pi * day / period
    return torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1)


class Forecaster(nn.Module):
    """A recurrent forecaster of one series: the unit ("rnn" (7.2), "lstm" (7.16)-(7.17) or
    "gru" (7.18)-(7.19)) with m = `hidden_size` and an output layer to one value.

    The values are normalised inside, (x - loc) / scale, with `loc` and `scale` taken from
    the training data, and predictions come back in the series' units. With `period` set,
    the input x^<t> also holds the (sin, cos) of the day in the period (p = 3, else p = 1),
    so `forward` and `forecast` take the day index of the first value of each window.
    `warmup` is the length of the window of observed values the forecaster reads.
    """

    def __init__(self, unit: str = "lstm", hidden_size: int = 32, *, warmup: int = 30,
                 loc: float = 0.0, scale: float = 1.0, period: int | None = None):
        super().__init__()
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {sorted(UNITS)}, got {unit!r}")
        if not scale > 0:
            raise ValueError(f"scale must be positive, got {scale!r}")
        self.unit_name, self.warmup = unit, positive_int("warmup", warmup)
        self.loc, self.scale = float(loc), float(scale)
        self.period = None if period is None else positive_int("period", period)
        self.input_size = 1 if period is None else 3
        self.unit = UNITS[unit](self.input_size, positive_int("hidden_size", hidden_size),
                                output_size=1)

    def inputs(self, values: torch.Tensor, day) -> torch.Tensor:
        """x^<t> for normalised values (B, T): (B, T, p), the value then the calendar."""
        x = values.unsqueeze(-1)  # (B, T, 1)
        if self.period is None:
            return x
        if day is None:
            raise ValueError(f"day (the day index of the first value) is needed: this "
                             f"forecaster reads the calendar (period={self.period})")
        day = torch.as_tensor(day, dtype=values.dtype, device=values.device).reshape(-1, 1)
        steps = torch.arange(values.shape[1], dtype=values.dtype, device=values.device)
        return torch.cat([x, calendar(day + steps, self.period)], dim=-1)  # (B, T, 3)

    def forward(self, window: torch.Tensor, day=None, state=None):
        """Teacher-forced one-step predictions over a window (B, T) of observed values:
        returns (predictions (B, T), state), where predictions[:, t] is y_hat^<t>, the
        forecast of window[:, t + 1] from the values up to window[:, t]."""
        window = check_series(window, "window").to(self.unit.W_yh.dtype)
        x = self.inputs((window - self.loc) / self.scale, day)
        out, state = self.unit(x, state)  # out (B, T, 1)
        return out.squeeze(-1) * self.scale + self.loc, state

    def forecast(self, history: torch.Tensor, horizon: int, day=None) -> torch.Tensor:
        """Forecasts of the `horizon` values after a history (B, T >= warmup): warm up on
        its last `warmup` observed values, then feed each prediction back as the next input
        (the loop of (7.3)) up to the horizon tau. Returns (B, horizon): column k - 1 is
        the forecast at lead time k. `day` is the day index of history[:, 0]."""
        history = check_series(history, "history", min_length=1)
        if history.shape[1] < self.warmup:
            raise ValueError(f"history has {history.shape[1]} steps, shorter than the "
                             f"warm-up of {self.warmup} steps")
        horizon = positive_int("horizon", horizon)
        if day is not None:  # the window starts warmup steps before the end of the history
            day = torch.as_tensor(day) + history.shape[1] - self.warmup
        y_hat, state = self(history[:, -self.warmup:], day)
        predictions = [y_hat[:, -1]]  # y_hat^<T>: the forecast of x^<T+1>
        for k in range(1, horizon):  # the prediction phase: x^<T+k> is y_hat^<T+k-1>
            step_day = None if day is None else day + self.warmup - 1 + k
            y_hat, state = self(predictions[-1].unsqueeze(1), step_day, state)
            predictions.append(y_hat[:, 0])
        return torch.stack(predictions, dim=1)  # (B, horizon)


def random_windows(series: torch.Tensor, length: int, batch_size: int,
                   generator: torch.Generator):
    """An endless stream of batches (windows (B, length + 1), day index of each window's
    first value) cut at random places of a 1-D `series`; day = position in the series."""
    starts_max = len(series) - length - 1
    if starts_max < 0:
        raise ValueError(f"series of {len(series)} values is too short for windows of "
                         f"{length} + 1 values")
    offsets = torch.arange(length + 1)
    while True:
        start = torch.randint(0, starts_max + 1, (batch_size,), generator=generator)
        yield series[start[:, None] + offsets], start  # (B, length + 1), (B,)


def one_step_loss(model: Forecaster, batch) -> torch.Tensor:
    """Teacher forcing: the mean squared error, in normalised units, of the one-step
    predictions y_hat^<t> of x^<t+1> at every step of the window."""
    window, day = batch
    y_hat, _ = model(window[:, :-1], day)
    return ((y_hat - window[:, 1:]) / model.scale).pow(2).mean()


def fed_back_loss(model: Forecaster, batch) -> torch.Tensor:
    """Training through the feedback loop: the mean squared error, in normalised units, of
    the forecasts fed back ((7.3)) of each window's values after its first model.warmup
    ones, which the forecaster reads (backpropagation runs through the whole loop)."""
    window, day = batch  # (B, T): model.warmup observed values, then those to forecast
    observed = model.warmup
    predictions = model.forecast(window[:, :observed], window.shape[1] - observed, day)
    return ((predictions - window[:, observed:]) / model.scale).pow(2).mean()


# The setups (seqlib.pages.config): "forecaster", the recurrent forecasters ("model": the
# arguments of Forecaster after the unit; "seeds": those the page trains each unit with),
# set by runs judged on the validation year 1989 (see the chapter): training longer overfits
# the eight training years, and so does a bigger state (64 units: one-step errors 6% to 10%
# below persistence's instead of 14%), so the full profile only averages over more seeds.
# "fed-back": 200 steps more of a trained forecaster through the feedback loop, reading 30
# observed days ("model": its warm-up window) and forecasting the next 30, at a constant rate.
FED_BACK = {"model": dict(warmup=30),
            "fit": dict(context=59, batch_size=32, steps=200, lr=3e-3, warmup=0, decay=False,
                        teacher_forcing=False)}
PROFILES = {
    "book": {"forecaster": {"model": dict(hidden_size=32),
                            "fit": dict(context=60, batch_size=32, steps=600, lr=1e-2,
                                        warmup=50),
                            "seeds": (0, 1, 2)},
             "fed-back": FED_BACK},
    "full": {"forecaster": {"model": dict(hidden_size=32),
                            "fit": dict(context=60, batch_size=32, steps=600, lr=1e-2,
                                        warmup=50),
                            "seeds": tuple(range(10))},
             "fed-back": FED_BACK}}


def forecaster(unit: str, series: torch.Tensor, model: dict,
               period: int | None = 365) -> Forecaster:
    """The Forecaster of `unit` with the arguments `model` (hidden_size, ...), normalised
    with the mean and standard deviation of the 1-D training `series`, with the calendar of
    `period`."""
    return Forecaster(unit, **model, loc=series.mean().item(), scale=series.std().item(),
                      period=period)


# The settings of `run` (its fit): those it needs, and the defaults of the others.
FIT_KEYS = ("context", "batch_size", "steps", "lr", "warmup")
FIT_DEFAULTS = dict(clip=1.0, seed=0, decay=True, teacher_forcing=True)


def run(name: str, model, data: torch.Tensor, fit: dict) -> runs.Run:
    """The run of a Forecaster (a model, or a function that builds one after
    seed_everything(fit["seed"]), `forecaster` say) on the 1-D training series `data`:
    fit["steps"] batches of fit["batch_size"] random windows of fit["context"] + 1 values,
    drawn from the run's generator, with teacher forcing (`one_step_loss`) or, with
    fit["teacher_forcing"] False, through the feedback loop (`fed_back_loss`); AdamW (no
    weight decay) at peak rate fit["lr"], a linear warm-up of fit["warmup"] steps then a
    cosine decay (warmup_cosine), or with fit["decay"] False a constant rate; gradients
    clipped at norm fit["clip"] (FIT_DEFAULTS for the settings fit leaves out)."""
    fit = check_config(fit, FIT_KEYS, FIT_DEFAULTS)
    model = runs.built(model, fit["seed"])
    return runs.Run(
        name, model, one_step_loss if fit["teacher_forcing"] else fed_back_loss,
        partial(random_windows, data.to(model.unit.W_yh.dtype), fit["context"],
                fit["batch_size"]),
        partial(adamw, lr=fit["lr"], weight_decay=0.0), fit,
        warmup_cosine if fit["decay"] else None, data=(data,), module=__name__)


def origins(series: torch.Tensor, first: int, last: int, window: int, horizon: int):
    """Every forecast origin s with targets s + 1, ..., s + horizon inside positions
    first..last of a 1-D `series`: histories (N, window) ending at s, targets
    (N, horizon), and the position of each history's first value (N,)."""
    first_origin, last_origin = first - 1, last - horizon
    if first_origin - window + 1 < 0 or last_origin < first_origin or last >= len(series):
        raise ValueError(f"no origins for targets {first}..{last} with a window of {window} "
                         f"and a horizon of {horizon} in a series of {len(series)} values")
    s = torch.arange(first_origin, last_origin + 1)  # (N,) origins
    history = series[s[:, None] + torch.arange(-window + 1, 1)]  # (N, window)
    targets = series[s[:, None] + torch.arange(1, horizon + 1)]  # (N, horizon)
    return history, targets, s - window + 1


def lagged(series: torch.Tensor, p: int):
    """The regression of AR(p) on a 1-D series: design rows [1, x^<t-1>, ..., x^<t-p>]
    (N - p, p + 1) and targets x^<t> (N - p,) for t = p + 1, ..., N."""
    p = positive_int("p", p)
    if series.dim() != 1 or len(series) <= 2 * p:
        raise ValueError(f"series must be 1-D with more than 2 p = {2 * p} values, got shape "
                         f"{tuple(series.shape)}")
    N = len(series)
    lags = torch.stack([series[p - j: N - j] for j in range(1, p + 1)], dim=1)  # (N - p, p)
    return torch.cat([torch.ones(N - p, 1, dtype=series.dtype), lags], dim=1), series[p:]


def fit_ar(series: torch.Tensor, p: int) -> torch.Tensor:
    """Least-squares AR(p): the coefficients [c, a_1, ..., a_p] minimising
    sum_t (x^<t> - c - a_1 x^<t-1> - ... - a_p x^<t-p>)^2 over a 1-D series."""
    if not isinstance(series, torch.Tensor) or not series.is_floating_point():
        raise TypeError(f"series must be a float tensor, got {getattr(series, 'dtype', series)}")
    A, y = lagged(series, p)
    return torch.linalg.lstsq(A, y.unsqueeze(1)).solution.squeeze(1)  # (p + 1,)


def ar_forecast(coef: torch.Tensor, history: torch.Tensor, horizon: int) -> torch.Tensor:
    """Forecasts of AR(p) with coefficients [c, a_1, ..., a_p] after each history
    (B, T >= p), predictions fed back as for the recurrent forecaster: (B, horizon)."""
    p = len(coef) - 1
    history = check_series(history, "history", min_length=p)
    horizon = positive_int("horizon", horizon)
    past = list(history[:, -p:].unbind(1))[::-1]  # x^<T>, x^<T-1>, ..., x^<T-p+1>
    predictions = []
    for _ in range(horizon):
        y = coef[0] + sum(a * x for a, x in zip(coef[1:], past, strict=True))
        predictions.append(y)
        past = [y, *past[:-1]]
    return torch.stack(predictions, dim=1)
