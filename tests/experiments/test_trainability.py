"""seqlib.experiments.trainability: the gradient norm of each block, and the recorded run
(validation loss, per-block norms before clipping) against the plain language-model run
(streams.run)."""

import pytest
import torch

from seqlib.experiments import runs, streams, trainability
from seqlib.lm import TransformerLM
from seqlib.pages.seeds import seed_everything

V = 11
CONFIG = dict(batch_size=4, context=8, steps=12, lr=3e-3, warmup=3, record_every=5)


def model(**kw):
    seed_everything(0)
    return TransformerLM(V, 8, 2, 16, 3, max_len=8, **kw)


def stream(n=400, seed=0):
    return torch.randint(4, V, (n,), generator=torch.Generator().manual_seed(seed))


def test_block_grad_norms_by_hand_and_at_init():
    m = model()
    ids = stream()[:36].view(4, 9)  # (B, T + 1)
    norms = trainability.init_grad_norms(m, ids)
    assert all(p.grad is None for p in m.parameters())  # cleared again
    logits, _ = m(ids[:, :-1])
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten()).backward()
    for norm, block in zip(norms, m.blocks, strict=True):
        by_hand = torch.cat([p.grad.flatten() for p in block.parameters()]).norm()
        assert norm == pytest.approx(float(by_hand), rel=1e-6) and norm > 0
    assert trainability.block_grad_norms(m) == pytest.approx(norms, rel=1e-6)
    with pytest.raises(TypeError, match="model must have `blocks`"):
        trainability.block_grad_norms(torch.nn.Linear(2, 2))


def test_a_recorded_run_is_the_plain_run_plus_its_records():
    train_ids, val_ids = stream(), stream(120, seed=1)
    plain, recorded = model(norm_first=False), model(norm_first=False)
    history = runs.fit(streams.run("plain", plain, train_ids,
                                   {k: v for k, v in CONFIG.items() if k != "record_every"}))
    rich = runs.fit(trainability.run("rich", recorded, (train_ids, val_ids), CONFIG))
    assert rich["loss"] == history["loss"]  # the same run: evaluation draws no randomness
    assert rich["val_step"] == [5, 10, 12] and len(rich["val_loss"]) == 3
    assert rich["val_loss"][-1] == pytest.approx(
        streams.evaluate(recorded, val_ids, 4, 8, carry_state=False))
    norms = torch.tensor(rich["block_grad_norm"])  # (steps, blocks), before clipping
    assert norms.shape == (12, 3)
    total = torch.tensor(rich["grad_norm"])  # every parameter, before clipping
    assert (norms.pow(2).sum(1) <= total.pow(2) * (1 + 1e-5)).all()
    assert (total > 1).any()  # some steps were clipped, and their norms rescaled
    with pytest.raises(ValueError, match="val_ids has 2"):
        trainability.run("short", model(), (train_ids, val_ids[:3]), CONFIG)


def test_recorded_runs_trained_together_are_saved_then_loaded(monkeypatch, tmp_path):
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path))
    train_ids, val_ids = stream(), stream(120, seed=1)
    pre = trainability.run("pre", model(), (train_ids, val_ids), CONFIG)
    first = runs.trained_together([pre, trainability.run(
        "no-residual", model(block=trainability.NoResidualBlock), (train_ids, val_ids),
        CONFIG)])
    assert len(list(tmp_path.glob("*.pt"))) == 2
    fresh = model()
    monkeypatch.setattr(runs, "fit", None)  # a second run must not train
    again = runs.trained(trainability.run("pre", fresh, (train_ids, val_ids), CONFIG))
    assert again[1] == first[0][1]
    for a, b in zip(fresh.parameters(), pre.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_dropout_run_does_not_depend_on_the_generator_it_finds():
    train_ids, val_ids = stream(), stream(120, seed=1)

    def losses(found_seed, config=CONFIG):
        run = trainability.run("drop", model(dropout=0.2), (train_ids, val_ids), config)
        torch.manual_seed(found_seed)  # what an earlier run in the same process left behind
        return runs.fit(run)["loss"]

    assert losses(1) == losses(2)
    assert losses(1, CONFIG | dict(seed=5)) != losses(1)


def test_the_block_without_residual_connections():
    """(7.31) without the terms a_in and u_[2]: nothing of a block's input reaches its output
    but through its sublayers, and its steps name no residual connection."""
    torch.manual_seed(0)
    block = trainability.NoResidualBlock(8, 2, n1=12)
    x = torch.randn(2, 5, 8)
    attend = lambda z: block.attention(z, causal=True)[0]  # noqa: E731
    expected = block.norm2(block.feed_forward(block.norm1(attend(x))))
    torch.testing.assert_close(block(x, causal=True), expected)
    names = [name for name, _ in block.steps()]
    assert not any("residual" in name for name in names) and len(names) == 4
