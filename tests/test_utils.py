"""Helpers: seeding, device choice, parameter counts and the training loop."""

import pytest
import torch
from torch import nn

import seqlib


def test_seed_everything_returns_a_reproducible_cpu_generator():
    a = torch.randn(5, generator=seqlib.seed_everything(7))
    b = torch.randn(5, generator=seqlib.seed_everything(7))
    assert torch.equal(a, b)
    assert torch.are_deterministic_algorithms_enabled()
    with pytest.raises(TypeError, match="seed must be an int"):
        seqlib.seed_everything(1.5)


def test_default_device_honours_the_variable(monkeypatch):
    monkeypatch.setenv("SEQLIB_DEVICE", "cpu")
    assert seqlib.default_device() == torch.device("cpu")
    monkeypatch.setenv("SEQLIB_DEVICE", "tpu-please")
    with pytest.raises(ValueError, match="SEQLIB_DEVICE='tpu-please'"):
        seqlib.default_device()
    if not torch.cuda.is_available():
        monkeypatch.setenv("SEQLIB_DEVICE", "cuda")
        with pytest.raises(ValueError, match="asks for CUDA"):
            seqlib.default_device()


def test_count_parameters():
    layer = nn.Linear(3, 2)
    assert seqlib.count_parameters(layer) == 8
    layer.bias.requires_grad_(False)
    assert seqlib.count_parameters(layer, trainable_only=True) == 6
    with pytest.raises(TypeError, match="torch.nn.Module"):
        seqlib.count_parameters([1, 2])


def regression_problem():
    gen = seqlib.seed_everything(0)
    x = torch.randn(64, 3, generator=gen)
    y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1

    def loss_fn(model, batch):
        return ((model(batch[0]).squeeze(-1) - batch[1]) ** 2).mean()

    return nn.Linear(3, 1), loss_fn, (x, y)


def test_train_reduces_the_loss_and_records_history():
    model, loss_fn, batch = regression_problem()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    history = seqlib.train(model, loss_fn, lambda step: batch, steps=50, optimizer=opt,
                           progress=False)
    assert set(history) == {"loss", "grad_norm", "seconds"}
    assert all(len(v) == 50 for v in history.values())
    assert history["loss"][-1] < 0.01 * history["loss"][0]


def test_train_clips_the_gradient_norm():
    model, loss_fn, batch = regression_problem()
    seen = []
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    original_step = opt.step

    def step():
        seen.append(torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item())
        original_step()

    opt.step = step
    history = seqlib.train(model, loss_fn, [batch] * 3, steps=3, optimizer=opt, clip=0.5,
                           progress=False)
    assert history["grad_norm"][0] > 0.5  # recorded before clipping
    assert all(n == pytest.approx(0.5) for n in seen)


def test_train_bad_arguments():
    model, loss_fn, batch = regression_problem()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="steps"):
        seqlib.train(model, loss_fn, [batch], steps=0, optimizer=opt)
    with pytest.raises(ValueError, match="ran out after 1 of 2"):
        seqlib.train(model, loss_fn, [batch], steps=2, optimizer=opt, progress=False)
    with pytest.raises(ValueError, match="clip"):
        seqlib.train(model, loss_fn, [batch], steps=1, optimizer=opt, clip=0)
