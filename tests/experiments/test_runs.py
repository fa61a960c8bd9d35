"""seqlib.experiments.runs, what every experiment shares: the record of a run (its checks and
the key it derives), a run trained deterministically on random numbers of its own, the model
cache (its key and what it depends on) and runs trained together in worker processes; with
the run of a language model (seqlib.experiments.streams.run) as the example."""

import dataclasses
from functools import partial

import pytest
import torch

from seqlib import lm
from seqlib.experiments import runs, shakespeare, streams
from seqlib.text import char_vocab
from seqlib.training import adam, warmup_cosine, warmup_linear

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n"
UNITS = ["rnn", "lstm", "gru"]
CONFIG = dict(batch_size=3, context=8, steps=40, lr=1e-2, warmup=5)


def tiny_model(unit, vocab_size, seed=0):
    torch.manual_seed(seed)
    return lm.RecurrentLM(unit, vocab_size, 5, 7)


def corpus():
    vocab = char_vocab(TEXT)
    return vocab, torch.tensor(vocab.encode(TEXT * 4))


@pytest.mark.parametrize("edited, changes", [
    ("self_attention.py", False), ("decoding.py", False), ("pages/claims.py", False),
    ("gated.py", True), ("training.py", True), ("experiments/streams.py", True)])
def test_editing_a_module_changes_the_keys_of_the_runs_that_use_it_only(monkeypatch, edited,
                                                                         changes):
    """A GRU language model's run: a comment added to a module it does not use leaves its
    key as it was; one added to the unit's module, the training loop or the batches'
    module changes it."""
    vocab, ids = corpus()

    def key():
        return streams.run("tiny", tiny_model("gru", len(vocab)), ids, CONFIG).key

    before = key()
    path = (runs.LIBRARY / edited).resolve()
    read = runs._source
    monkeypatch.setattr(runs, "_source",
                        lambda p: read(p) + (b"# an edit\n" if p == path else b""))
    assert (key() != before) == changes


def record(settings=None, **changes):
    """A run of a tiny model, with `settings` changed in its fit and `changes` to its
    fields."""
    vocab, ids = corpus()
    fields = dict(name="tiny", model=tiny_model("gru", len(vocab)), loss=streams.CarriedStateLoss(),
                  batches=partial(streams.contiguous_batches, ids, 3, 8),
                  optimizer=partial(adam, lr=0.01),
                  fit=dict(steps=10, warmup=2, batch_size=3, context=8) | (settings or {}),
                  schedule=warmup_linear, data=(ids,))
    return runs.Run(**fields | changes)


def test_a_run_checks_its_steps_and_warmup():
    for steps in (0, -3, 2.5, True, "10"):
        with pytest.raises(ValueError, match=f"steps must be a positive int, got {steps!r}"):
            record(dict(steps=steps))
    for warmup in (-1, 10, 11, 1.5, False, None):
        with pytest.raises(ValueError, match=r"warmup must be an int in \[0, steps=10\), got "
                           + f"{warmup!r}"):
            record(dict(warmup=warmup))
    with pytest.raises(ValueError, match="warmup=2 needs a schedule .*got schedule=None"):
        record(schedule=None)
    with pytest.raises(ValueError, match="fit must hold the steps"):
        record(fit=dict(batch_size=3))
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got str"):
        record(model="lstm")
    with pytest.raises(TypeError, match="fit must be a dict and data a tuple, got list and"):
        record(fit=[("steps", 3)])
    with pytest.raises(TypeError, match="got dict and Tensor"):
        record(data=torch.zeros(3))  # its rows would be digested one by one
    with pytest.raises(TypeError, match="seed must be an int"):
        record(dict(seed=1.0))
    constant = record(dict(warmup=0), schedule=None)  # a constant rate
    assert (constant.warmup, constant.clip, constant.seed) == (0, None, 0)  # what fit leaves out


def test_a_run_derives_its_key():
    base = record()
    assert len(base.key) == 64 and record().key == base.key  # the same record, the same key
    assert runs.cache_path(base).name == f"tiny-{base.key[:20]}.pt"
    vocab, ids = corpus()
    others = [record(name="other"), record(dict(steps=11)), record(dict(warmup=3)),
              record(dict(clip=1.0)), record(dict(seed=1)), record(dict(batch_size=4)),
              record(data=(ids.flip(0),)), record(model=tiny_model("gru", len(vocab), seed=1)),
              record(model=tiny_model("lstm", len(vocab))),
              record(module=shakespeare.__name__)]
    frozen = tiny_model("gru", len(vocab))
    frozen.embedding.requires_grad_(False)  # the same weights, fewer of them train
    others.append(record(model=frozen))
    keys = [run.key for run in others]
    assert base.key not in keys and len(set(keys)) == len(keys)  # a changed field, another key
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.fit = {}  # a run never changes: its key would no longer be its own
    assert dataclasses.replace(base, fit=base.fit | dict(steps=20)).key == \
        record(dict(steps=20)).key


def test_built_is_the_model_or_what_a_function_builds_after_seeding():
    model = tiny_model("rnn", 5)
    assert runs.built(model, seed=3) is model
    first, second = (runs.built(lambda: lm.RecurrentLM("rnn", 5, 3, 4), seed=3)
                     for _ in range(2))
    assert all(torch.equal(p, q) for p, q in zip(first.parameters(), second.parameters(),
                                                  strict=True))
    with pytest.raises(TypeError, match="model must be a torch.nn.Module or a function that "
                       "builds one, got str"):
        runs.built("rnn", seed=0)


def rates_of(run):
    """The learning rate of each step of runs.fit(run), read as the optimizer steps."""
    rates, train = [], runs.train

    def spy(*args, optimizer, **kwargs):
        optimizer.register_step_pre_hook(lambda opt, *_: rates.append(opt.param_groups[0]["lr"]))
        return train(*args, optimizer=optimizer, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runs, "train", spy)
        runs.fit(run)
    return rates


def test_a_language_model_run_is_deterministic_and_follows_the_schedule():
    vocab, ids = corpus()
    histories = [runs.fit(streams.run("tiny", tiny_model("lstm", len(vocab)), ids,
                                              CONFIG)) for _ in range(2)]
    assert histories[0]["loss"] == histories[1]["loss"] and len(histories[0]["loss"]) == 40
    assert sum(histories[0]["loss"][-5:]) < sum(histories[0]["loss"][:5]) - 0.5  # it learns
    # The rate of every step is exactly what torch's LambdaLR, stepped after each optimizer
    # step, gives with the same schedule.
    rates = rates_of(streams.run("tiny", tiny_model("rnn", len(vocab)), ids,
                                         dict(CONFIG, steps=120, warmup=10)))
    optimizer = torch.optim.AdamW([torch.zeros(1, requires_grad=True)], lr=CONFIG["lr"])
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup_cosine(s, 120, warmup=10))
    before = []
    for _ in range(120):
        before.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert rates == before


def test_a_language_model_run_refuses_a_bad_config():
    vocab, ids = corpus()
    model = tiny_model("rnn", len(vocab))
    with pytest.raises(ValueError, match="config must be a dict with the keys"):
        streams.run("tiny", model, ids, {k: v for k, v in CONFIG.items()
                                                 if k != "warmup"})
    with pytest.raises(ValueError, match="config must be a dict"):
        streams.run("tiny", model, ids, list(CONFIG.items()))
    with pytest.raises(ValueError, match="data has 2"):
        streams.run("tiny", model, ids[:3], CONFIG)  # 2 pairs, 3 streams
    with pytest.raises(ValueError, match=r"config has the keys \['lr_'\]"):
        streams.run("tiny", model, ids, CONFIG | {"lr_": 1e-2})  # a misspelt setting


def test_a_transformer_language_model_learns():
    from seqlib.lm import TransformerLM

    vocab, ids = corpus()
    torch.manual_seed(0)
    model = TransformerLM(len(vocab), 16, 2, 32, 1, max_len=CONFIG["context"])
    before = streams.evaluate(model, ids, 3, 8)
    history = runs.fit(streams.run("tiny", model, ids, CONFIG))
    assert len(history["loss"]) == 40
    assert streams.evaluate(model, ids, 3, 8) < before - 0.5


def test_a_run_draws_its_dropout_from_its_own_seed_and_leaves_the_callers_generator():
    """A run with dropout (any run: runs.fit has one policy) trains the same whatever
    generator state it finds (as in a worker process that trained another run first, or
    after a page drew other numbers), and the caller's state is as before."""
    from seqlib.lm import TransformerLM
    ids = torch.randint(0, 12, (400,), generator=torch.Generator().manual_seed(0))
    config = dict(steps=3, batch_size=2, context=8, lr=1e-2, warmup=0)

    def losses(config, found_seed):
        torch.manual_seed(0)
        model = TransformerLM(12, p=16, heads=2, n1=32, num_layers=1, max_len=8, dropout=0.3)
        torch.manual_seed(found_seed)
        before = torch.get_rng_state()
        loss = runs.fit(streams.run("tiny", model, ids, config))["loss"]
        assert torch.equal(torch.get_rng_state(), before)
        return loss

    assert losses(config, 1) == losses(config, 2)
    assert losses(config | dict(seed=5), 1) != losses(config, 1)


class Retrained(Exception):
    pass


def test_trained_saves_then_loads(monkeypatch, tmp_path):
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path))
    vocab, ids = corpus()
    first, history = runs.trained(streams.run("tiny", tiny_model("gru", len(vocab)),
                                                      ids, CONFIG))
    assert len(history["loss"]) == 40 and len(list(tmp_path.glob("tiny-*.pt"))) == 1

    def no_training(*args, **kwargs):
        raise Retrained

    monkeypatch.setattr(runs, "fit", no_training)
    second = tiny_model("gru", len(vocab))  # the same initial weights
    loaded, again = runs.trained(streams.run("tiny", second, ids, CONFIG))
    assert loaded is second and again == history  # loaded, not trained
    for p, q in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(p, q)
    # Another configuration, other data or another name is another run: it trains.
    for name, data, config in [("tiny", ids, dict(CONFIG, lr=2e-2)),
                               ("tiny", ids.flip(0), CONFIG), ("other", ids, CONFIG)]:
        with pytest.raises(Retrained):
            runs.trained(streams.run(name, tiny_model("gru", len(vocab)), data, config))


@pytest.mark.parametrize("damage", [b"", b"not a torch file", "half"])
def test_an_unreadable_cache_file_is_set_aside_and_retrained(monkeypatch, tmp_path, capsys,
                                                             damage):
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path))
    vocab, ids = corpus()
    config = dict(CONFIG, steps=5, warmup=2)
    model, history = runs.trained(streams.run("tiny", tiny_model("gru", len(vocab)),
                                                      ids, config))
    (path,) = tmp_path.glob("tiny-*.pt")
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2] if damage == "half" else damage)
    again = tiny_model("gru", len(vocab))
    retrained, history_again = runs.trained(streams.run("tiny", again, ids, config))
    assert retrained is again and history_again["loss"] == history["loss"]
    for p, q in zip(model.parameters(), again.parameters(), strict=True):
        assert torch.equal(p, q)  # trained again from the same start, not half loaded
    said = capsys.readouterr().out
    assert said.count("\n") == 1 and f"{path.name} could not be read" in said
    assert f"set aside as {path.name}.damaged" in said
    assert path.with_name(path.name + ".damaged").exists()
    assert path.read_bytes() != b"" and runs.trained(
        streams.run("tiny", tiny_model("gru", len(vocab)), ids, config))[1] == history_again


def test_the_cache_key_covers_the_device_dtype_threads_kernels_seed_and_code(
        monkeypatch):
    vocab, ids = corpus()

    def key(**changes):
        model = tiny_model("gru", len(vocab))
        if "dtype" in changes:
            model = model.to(changes["dtype"])
        return runs.cache_path(streams.run("tiny", model, ids, CONFIG,
                                                   module=changes.get("module"))).name

    base = key()
    assert key(dtype=torch.float64) != base
    assert key(module=shakespeare.__name__) != base  # its source is hashed too
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        assert key() != base
    finally:
        torch.set_num_threads(threads)
    assert key() == base
    # The kernel settings and SEQLIB_SEED too: each trains other weights.
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "SOMETHING_ELSE")
    assert key() != base
    monkeypatch.undo()
    assert key() == base
    monkeypatch.setenv("SEQLIB_SEED", "1")
    assert key() != base
    monkeypatch.undo()
    # The source of the modules the run uses is hashed, and no other.
    sources = runs._sources(streams.run("tiny", tiny_model("gru", len(vocab)), ids,
                                                CONFIG))
    for used in ["rnn.py", "gated.py", "lm.py", "training.py", "experiments/runs.py",
                 "experiments/streams.py"]:  # the model, the training loop, the batches
        assert (runs.LIBRARY / used).read_bytes() in sources, used
    for unused in ["decoding.py", "self_attention.py", "transformer.py",
                   "experiments/translation.py", "pages/claims.py"]:
        assert (runs.LIBRARY / unused).read_bytes() not in sources, unused
    # ... the experiment modules the run's code uses: the digit strips a captioning run
    # draws its batches from.
    from seqlib.experiments import captioning
    caption = runs.Run("c", tiny_model("gru", len(vocab)), None,
                       partial(captioning._strips, None, None, None, 1, "cpu"), None,
                       {"steps": 1})
    assert (runs.LIBRARY / "experiments" / "digits.py").read_bytes() in runs._sources(caption)
    with pytest.raises(ValueError, match="an imported module"):
        key(module="seqlib.experiments.no_such_module")


def test_trained_together_trains_in_processes_exactly_as_here(monkeypatch, tmp_path):
    vocab, ids = corpus()
    config = dict(CONFIG, steps=20)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the workers take this process's number of threads
    try:
        monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path / "here"))
        here = [runs.trained(streams.run(unit, tiny_model(unit, len(vocab)), ids,
                                                 config)) for unit in UNITS]
        monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path / "workers"))
        together = [streams.run(unit, tiny_model(unit, len(vocab)), ids, config)
                    for unit in UNITS]
        there = runs.trained_together(together, processes=2)
        assert len(list((tmp_path / "workers").glob("*.pt"))) == 3
        monkeypatch.setattr(runs, "ProcessPoolExecutor", None)  # all cached: no workers
        assert [h for _, h in runs.trained_together(together)] == [h for _, h in there]
    finally:
        torch.set_num_threads(threads)
    for (model, history), (expected, expected_history) in zip(there, here, strict=True):
        assert history["loss"] == expected_history["loss"]
        for p, q in zip(model.parameters(), expected.parameters(), strict=True):
            assert torch.equal(p, q)
    with pytest.raises(ValueError, match="processes"):
        runs.trained_together([streams.run("new", tiny_model("rnn", len(vocab)), ids,
                                                   config)] * 2, processes=0)


def test_a_run_that_trains_shows_its_progress_then_clears_it(monkeypatch, tmp_path, capfd):
    """Run by hand, a page shows a bar while a run trains, gone when it ends; with
    SEQLIB_PROGRESS=0 (make execute, make nbval) nothing, so that the stored outputs are the
    same whether a model was trained or loaded."""
    vocab, ids = corpus()
    config = dict(CONFIG, steps=5, warmup=2)
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path / "quiet"))
    monkeypatch.setenv("SEQLIB_PROGRESS", "0")
    runs.trained(streams.run("tiny", tiny_model("gru", len(vocab)), ids, config))
    assert capfd.readouterr().err == ""
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path / "shown"))
    monkeypatch.delenv("SEQLIB_PROGRESS")
    runs.trained(streams.run("tiny", tiny_model("gru", len(vocab)), ids, config))
    shown = capfd.readouterr().err
    assert "tiny:" in shown and "/5 [" in shown
    assert shown.rstrip("\r").split("\r")[-1].strip() == ""  # cleared at the end
    assert not list((tmp_path / "shown").glob("*.progress"))  # its file removed


def test_runs_in_worker_processes_report_their_steps_to_one_bar(monkeypatch, tmp_path):
    vocab, ids = corpus()
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path))
    together = [streams.run(unit, tiny_model(unit, len(vocab)), ids,
                                    dict(CONFIG, steps=7, warmup=2)) for unit in UNITS[:2]]
    bar = runs._Progress(together)
    assert bar.bar.total == 14
    runs._progress_path(runs.cache_path(together[0])).write_text("3")
    runs._progress_path(runs.cache_path(together[1])).write_text("5")
    bar.update()
    assert bar.bar.n == 8
    bar.close()
    seen = []
    runs.run_in_processes([(runs.trained, (run,)) for run in together], 2,
                          lambda: seen.append(1))
    assert all(runs.cache_path(run).exists() for run in together)
    assert not list(tmp_path.glob("*.progress"))
