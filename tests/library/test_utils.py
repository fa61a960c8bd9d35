"""Helpers: device choice, parameter counts and the training loop."""

import copy

import pytest
import torch
from torch import nn

import seqlib
from seqlib.pages.seeds import seed_everything


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
    gen = seed_everything(0)
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


def test_train_schedule_sets_each_steps_rate_from_the_initial_one():
    model, loss_fn, batch = regression_problem()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    rates = []
    opt.register_step_pre_hook(lambda o, *_: rates.append(o.param_groups[0]["lr"]))
    seqlib.train(model, loss_fn, lambda step: batch, steps=4, optimizer=opt,
                 schedule=lambda step: 1 / (step + 1), progress=False)
    assert rates == [0.5, 0.25, 0.5 / 3, 0.125]
    assert opt.param_groups[0]["initial_lr"] == 0.5
    seqlib.train(model, loss_fn, lambda step: batch, steps=2, optimizer=opt,
                 schedule=lambda step: 2.0, progress=False)  # from the initial rate again
    assert rates[-2:] == [1.0, 1.0]


def test_train_resumes_where_a_run_stopped():
    def run(steps, start=0, history=None, state=None):
        model, loss_fn, _ = regression_problem()
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        if state is not None:
            model.load_state_dict(state[0])
            opt.load_state_dict(state[1])
        gen = torch.Generator().manual_seed(1)
        data = [(torch.randn(8, 3, generator=gen), torch.randn(8, generator=gen))
                for _ in range(10)]
        saved = {}

        def on_step(step, history):
            saved[step] = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()),
                           copy.deepcopy(history))

        history = seqlib.train(model, loss_fn, lambda step: data[step], steps=steps,
                               optimizer=opt, schedule=lambda step: 0.9 ** step, start=start,
                               history=history, on_step=on_step, progress=False)
        return model, history, saved

    whole, history, saved = run(10)
    assert sorted(saved) == list(range(10))
    model_state, opt_state, before = saved[3]  # after step 3: resume at step 4
    resumed, history2, _ = run(10, start=4, history=before, state=(model_state, opt_state))
    assert history2["loss"] == history["loss"] and len(history2["seconds"]) == 10
    assert all(torch.equal(p, q) for p, q in zip(whole.parameters(), resumed.parameters(),
                                                  strict=True))


def test_train_bad_arguments():
    model, loss_fn, batch = regression_problem()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="steps"):
        seqlib.train(model, loss_fn, [batch], steps=0, optimizer=opt)
    with pytest.raises(ValueError, match="ran out after 1 of 2"):
        seqlib.train(model, loss_fn, [batch], steps=2, optimizer=opt, progress=False)
    with pytest.raises(ValueError, match="clip"):
        seqlib.train(model, loss_fn, [batch], steps=1, optimizer=opt, clip=0)
    for start in (-1, 2, 1.0):
        with pytest.raises(ValueError, match="start must be an int"):
            seqlib.train(model, loss_fn, [batch], steps=2, optimizer=opt, start=start)
    with pytest.raises(ValueError, match="history must hold"):
        seqlib.train(model, loss_fn, [batch], steps=2, optimizer=opt, start=1,
                     history={"loss": [1.0], "grad_norm": [1.0]})


def test_train_is_the_function_and_training_the_module():
    import seqlib.training

    assert seqlib.train is seqlib.training.train and callable(seqlib.train)
