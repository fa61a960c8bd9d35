"""seqlib.training beside the loop (tested in test_utils.py): the step it takes, the
learning-rate schedules and the optimizers."""

import itertools

import pytest
import torch
from torch import nn

import seqlib
from seqlib import training
from seqlib.training import adam, adamw, warmup_cosine, warmup_linear


def test_warmup_cosine_warms_up_then_decays_to_the_floor():
    factors = [warmup_cosine(step, 110, warmup=10) for step in range(111)]
    assert factors[:10] == pytest.approx([(s + 1) / 10 for s in range(10)])
    assert factors[10] == pytest.approx(1.0)  # the peak, right after the warm-up
    assert factors[60] == pytest.approx(0.55)  # halfway down: (1 + 0.1) / 2
    assert factors[110] == pytest.approx(0.1)  # a tenth of the peak at the end
    assert all(a > b for a, b in itertools.pairwise(factors[10:]))
    assert warmup_cosine(0, 5) == pytest.approx(1.0)  # no warm-up
    assert warmup_cosine(5, 5, floor=0.0) == pytest.approx(0.0)


def test_warmup_linear_warms_up_then_holds_or_decays():
    held = [warmup_linear(step, 10, warmup=4) for step in range(10)]
    assert held == pytest.approx([0.25, 0.5, 0.75, 1, 1, 1, 1, 1, 1, 1])
    fall = [warmup_linear(step, 10, warmup=4, decay=True) for step in range(10)]
    assert fall[4:] == pytest.approx([6 / 6, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6])
    assert [warmup_linear(s, 10) for s in range(10)] == [1.0] * 10  # constant
    assert [warmup_linear(s, 4, decay=True) for s in range(4)] == [1.0, 0.75, 0.5, 0.25]


def test_warmup_linear_refuses_a_bad_warmup_or_steps():
    for bad in [-1, 10, 2.5, True]:
        with pytest.raises(ValueError, match=r"warmup must be an int in \[0, steps=10\)"):
            warmup_linear(0, 10, warmup=bad)
    with pytest.raises(ValueError, match="steps must be a positive int, got 0"):
        warmup_linear(0, 0)


def test_the_optimizers():
    model = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    model[0].requires_grad_(False)  # a frozen part
    first = adam(model, lr=0.1)
    assert isinstance(first, torch.optim.Adam) and first.param_groups[0]["lr"] == 0.1
    assert len(first.param_groups[0]["params"]) == 2  # the parameters that train only
    second = adamw(model, lr=0.2, weight_decay=0.1, beta2=0.99)
    group = second.param_groups[0]
    assert isinstance(second, torch.optim.AdamW) and len(group["params"]) == 4
    assert (group["lr"], group["weight_decay"], group["betas"]) == (0.2, 0.1, (0.9, 0.99))
    assert adamw(model, lr=0.2).param_groups[0]["weight_decay"] == 0.01


def test_the_package_exports_them():
    assert (seqlib.adam, seqlib.adamw) == (adam, adamw)
    assert (seqlib.warmup_linear, seqlib.warmup_cosine) == (warmup_linear, warmup_cosine)


def test_gradient_step_is_one_step_of_backpropagation_and_clipping():
    """The step seqlib.train takes: the loss, the gradient's norm before clipping, and the
    update of a plain SGD step on the clipped gradient, by hand."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    x, y = torch.randn(8, 3), torch.randn(8, 2)

    def loss_fn(m, batch):
        return ((m(batch[0]) - batch[1]) ** 2).mean()

    before = [p.detach().clone() for p in model.parameters()]
    expected = loss_fn(model, (x, y))
    grads = torch.autograd.grad(expected, list(model.parameters()))
    norm = torch.sqrt(sum((g ** 2).sum() for g in grads))
    loss, measured = training.gradient_step(model, loss_fn, (x, y),
                                            torch.optim.SGD(model.parameters(), lr=0.1),
                                            clip=0.01)
    assert loss == expected.item()
    assert measured == pytest.approx(norm.item(), rel=1e-6)
    for p, p0, g in zip(model.parameters(), before, grads, strict=True):
        torch.testing.assert_close(p.detach(), p0 - 0.1 * g * 0.01 / (norm + 1e-6))


def test_gradient_step_stops_at_a_loss_that_is_not_finite():
    model = torch.nn.Linear(2, 1)
    with pytest.raises(FloatingPointError, match="loss is nan at step 7"):
        training.gradient_step(model, lambda m, b: m(b).sum() * float("nan"),
                               torch.ones(1, 2), torch.optim.SGD(model.parameters(), lr=1.0),
                               step=7)
