"""Translation plumbing: preparation, batches, BLEU, the training cache, decoding to text."""

import itertools

import pytest
import torch

from seqlib import seq2seq
from seqlib.experiments import runs, sentences
from seqlib.experiments import translation as tr
from seqlib.seq2seq import AttentionSeq2Seq, Seq2Seq
from seqlib.training import warmup_linear
from seqlib.transformer import Transformer

WORDS = "red blue green cat dog bird big small".split()


def synthetic(n, seed):
    """Pairs (sentence, the same words reversed and upper-cased): a learnable toy task."""
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(n):
        length = int(torch.randint(1, 6, (1,), generator=g))
        words = [WORDS[int(i)] for i in torch.randint(len(WORDS), (length,), generator=g)]
        pairs.append((" ".join(words), " ".join(w.upper() for w in reversed(words)) + "."))
    return pairs


@pytest.fixture(scope="module")
def data():
    return tr.prepare({"train": synthetic(200, 0), "test": synthetic(20, 1) + [("zebra", "Z")]},
                      min_freq=1)


def test_prepare_builds_vocabularies_on_train_and_frames_targets(data):
    assert "zebra" not in data.src_vocab and "z" not in data.tgt_vocab  # test words unseen
    src, tgt = data.ids["test"][-1]
    assert src == [data.src_vocab.unk_id]
    assert tgt == [data.tgt_vocab.start_id, data.tgt_vocab.unk_id, data.tgt_vocab.stop_id]
    s, t = data.pairs["train"][0]
    ids_s, ids_t = data.ids["train"][0]
    assert data.src_vocab.decode(ids_s) == s.split()
    assert data.tgt_vocab.decode(ids_t) == t.lower().replace(".", " .").split()
    with pytest.raises(ValueError, match="'train'"):
        tr.prepare({"test": []})


def test_batches_are_padded_bucketed_and_reproducible(data):
    examples = data.ids["train"]
    draw = lambda seed: tr.batches(examples, 16, torch.Generator().manual_seed(seed))  # noqa: E731
    first, again, other = draw(0), draw(0), draw(1)
    seen = []
    for _ in range(13):  # one epoch: ceil(200 / 16) batches
        b, b2 = next(first), next(again)
        assert all(torch.equal(b[k], b2[k]) for k in b)
        lengths = b["src_mask"].sum(1)
        assert torch.equal(b["src"] == 0, ~b["src_mask"])  # <empty> exactly where masked
        assert torch.equal(b["tgt_in"][:, 1:], b["tgt_out"][:, :-1])  # shifted by one
        assert (b["tgt_in"][:, 0] == data.tgt_vocab.start_id).all()
        assert lengths.max() - lengths.min() <= 4  # sorted by length inside the pool
        seen += [tuple(r[m].tolist()) for r, m in zip(b["src"], b["src_mask"], strict=True)]
    assert sorted(seen) == sorted(tuple(s) for s, _ in examples)  # every example once
    assert not torch.equal(next(draw(0))["src"], next(other)["src"])  # another order
    with pytest.raises(ValueError, match="batch_size"):
        next(tr.batches(examples, 0, torch.Generator()))


def test_bleu_by_length_buckets():
    hyps, refs = ["a b c d", "x y", "a b c d e f"], ["a b c d", "p q", "a b c d e f"]
    rows = tr.bleu_by_length(hyps, refs, [2, 5, 9], edges=[0, 4, 8, 12, 20])
    assert [(r["low"], r["count"]) for r in rows] == [(0, 1), (4, 1), (8, 1)]
    assert rows[0]["bleu"] == pytest.approx(100) and rows[1]["bleu"] == pytest.approx(0)
    with pytest.raises(ValueError, match="edges"):
        tr.bleu_by_length(hyps, refs, [1, 2, 3], edges=[5, 1])


def build(data):
    return lambda: Seq2Seq(len(data.src_vocab), len(data.tgt_vocab), 8, 16)


def trained(name, build, data, **config):
    return runs.trained(tr.run(name, build, data, config))


def fit(model, data, **config):
    return runs.fit(tr.run("toy", model, data, config))


def test_trained_caches_deterministic_weights(data, tmp_path, monkeypatch):
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path))
    kwargs = dict(steps=5, batch_size=8, lr=1e-2, seed=3)
    model, history = trained("toy", build(data), data, **kwargs)
    assert len(list(tmp_path.glob("*.pt"))) == 1 and len(history["loss"]) == 5
    calls = []
    monkeypatch.setattr(runs, "fit", lambda *a, **k: calls.append(1))
    loaded, history2 = trained("toy", build(data), data, **kwargs)
    assert not calls and history2 == history  # loaded, not trained
    for (name, p), q in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    monkeypatch.undo()
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path))
    torch.manual_seed(123)  # the global state does not matter: the run seeds it
    fresh, _ = trained("toy", build(data), data, **kwargs)
    assert all(torch.equal(p, q) for p, q in zip(fresh.state_dict().values(),
                                                  loaded.state_dict().values(), strict=True))
    retrained, _ = trained("toy", build(data), data, **{**kwargs, "steps": 6})
    assert len(list(tmp_path.glob("*.pt"))) == 2  # a changed fit argument trains again
    assert not torch.equal(retrained.decoder.output.weight, loaded.decoder.output.weight)


def test_cache_key_covers_configuration_and_data(data, tmp_path, monkeypatch):
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path))
    kwargs = dict(steps=2, batch_size=8, lr=1e-2, seed=0)
    V_s, V_t = len(data.src_vocab), len(data.tgt_vocab)
    trained("m", lambda: Seq2Seq(V_s, V_t, 8, 16), data, **kwargs)
    trained("m", lambda: Seq2Seq(V_s, V_t, 8, 16, reverse_source=True), data, **kwargs)
    other = tr.prepare({"train": synthetic(200, 5)}, min_freq=1)
    trained("m", lambda: Seq2Seq(len(other.src_vocab), len(other.tgt_vocab), 8, 16), other,
            **kwargs)
    assert len(list(tmp_path.glob("*.pt"))) == 3


def test_a_run_learns_and_translate_decodes(data):
    torch.manual_seed(0)
    model = AttentionSeq2Seq(len(data.src_vocab), len(data.tgt_vocab), 16, 32)
    history = fit(model, data, steps=80, batch_size=32, lr=2e-2)
    assert sum(history["loss"][-10:]) / 10 < 0.5 * sum(history["loss"][:10]) / 10
    sources = [s for s, _ in data.pairs["test"][:20]]
    refs = [t for _, t in data.pairs["test"][:20]]
    greedy = tr.translate(model, data, sources)
    assert all(isinstance(h, str) for h in greedy) and len(greedy) == 20
    assert tr.translate(model, data, sources, method="beam", beam_size=1) == greedy
    assert tr.bleu(greedy, refs) > 30
    g = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    one = tr.translate(model, data, sources, method="sample", temperature=0.5, generator=g())
    assert one == tr.translate(model, data, sources, method="sample", temperature=0.5,
                               generator=g())
    with pytest.raises(ValueError, match="method"):
        tr.translate(model, data, sources, method="top")


def test_a_run_sets_each_steps_learning_rate(data, monkeypatch):
    rates, train = [], runs.train  # the rate of each step, read as the optimizer steps

    def spy(*args, optimizer, **kwargs):
        optimizer.register_step_pre_hook(lambda opt, *_: rates.append(opt.param_groups[0]["lr"]))
        return train(*args, optimizer=optimizer, **kwargs)

    monkeypatch.setattr(runs, "train", spy)
    model = build(data)()
    fit(model, data, steps=6, batch_size=8, lr=0.1, warmup=2, decay=True)
    assert rates == pytest.approx([0.05, 0.1, 0.1, 0.075, 0.05, 0.025])
    rates.clear()
    fit(model, data, steps=120, batch_size=8, lr=3e-3, warmup=40, decay=True)
    assert rates == [3e-3 * warmup_linear(step, 120, 40, True) for step in range(120)]
    rates.clear()
    fit(model, data, steps=3, batch_size=8, lr=0.1)
    assert rates == [0.1, 0.1, 0.1]  # no schedule: the constant rate
    with pytest.raises(ValueError, match=r"warmup must be an int in \[0, steps=3\), got 3"):
        fit(model, data, steps=3, batch_size=8, lr=0.1, warmup=3)
    with pytest.raises(ValueError, match=r"config has the keys \['warmpu'\]"):
        fit(model, data, steps=3, batch_size=8, lr=0.1, warmpu=2)  # misspelt: refused
    with pytest.raises(ValueError, match="config must be a dict with the keys"):
        fit(model, data, steps=3, lr=0.1)


def test_batches_collate_the_drawn_indices(data):
    examples = data.ids["train"]
    drawn = sentences.batch_indices(examples, 16, torch.Generator().manual_seed(4))
    for batch in itertools.islice(tr.batches(examples, 16, torch.Generator().manual_seed(4)),
                                  30):  # more than an epoch of 13 batches
        expected = tr.collate([examples[j] for j in next(drawn)])
        assert all(torch.equal(batch[k], expected[k]) for k in expected)


def test_draws_from_tensors_are_the_batches_of_lists(data):
    """The runs' batches, taken from tensors padded once, are `batches`' (lists padded at
    every step): the same pairs in the same order, the same values, dtypes and layout."""
    examples = data.ids["train"]
    from_lists = tr.batches(examples, 16, torch.Generator().manual_seed(4))
    from_tensors = tr.draws(examples, 16, torch.device("cpu"), torch.Generator().manual_seed(4))
    for old, new in itertools.islice(zip(from_lists, from_tensors, strict=True), 30):
        assert old.keys() == new.keys()
        for k in old:
            assert torch.equal(old[k], new[k]) and old[k].dtype == new[k].dtype
            assert old[k].stride() == new[k].stride(), k
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        next(tr.draws(examples, 0, "cpu", torch.Generator()))


def test_scheduled_training_is_cached_under_its_own_key(data, tmp_path, monkeypatch):
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path))
    kwargs = dict(steps=4, batch_size=8, lr=1e-2, seed=0)
    plain, _ = trained("s", build(data), data, **kwargs)
    on_cpu, _ = trained("s", lambda: build(data)().to("cpu"), data, **kwargs)  # loaded
    assert len(list(tmp_path.glob("*.pt"))) == 1
    assert all(torch.equal(p, q) for p, q in zip(plain.state_dict().values(),
                                                  on_cpu.state_dict().values(), strict=True))
    warm, _ = trained("s", build(data), data, warmup=2, decay=True, **kwargs)
    assert len(list(tmp_path.glob("*.pt"))) == 2
    assert not torch.equal(warm.decoder.output.weight, plain.decoder.output.weight)


def test_subword_preparation_round_trips_and_leaves_fewer_unknowns():
    pairs = {"train": synthetic(200, 0),
             "test": [("red bluegreen", "GREENBLUE RED."), ("zebra", "Z")]}
    words, subwords = tr.prepare(pairs, min_freq=1), tr.prepare(pairs, min_freq=1, merges=30)
    assert words.src_bpe is None
    assert len(subwords.src_bpe.merges) == 20  # then each of the 8 words is one symbol
    for (s, t), (ids_s, ids_t) in zip(pairs["train"], subwords.ids["train"], strict=True):
        tokens = subwords.tgt_vocab.decode(ids_t)
        assert subwords.target_text(tokens) == t.lower().replace(".", " .")
        assert subwords.src_vocab.decode(ids_s) == subwords.source_tokens(s)
    # an unseen compound of known words: unknown as a word, spelled out as subwords
    assert tr.unknown_rate(words, "test") == (2 / 3, 2 / 4)
    src_unk, tgt_unk = tr.unknown_rate(subwords, "test")
    assert src_unk < 2 / 3 and tgt_unk < 2 / 4
    assert subwords.target_text(["re", "<unk>", "d</w>"]) == "re <unk> d"
    with pytest.raises(ValueError, match="split must be one of"):
        tr.unknown_rate(words, "valid")


def test_a_run_with_label_smoothing_trains_on_the_smoothed_loss(data, monkeypatch):
    seen = []
    smoothed = seq2seq.masked_cross_entropy

    def spy(logits, targets, label_smoothing=0.0, **kwargs):
        seen.append(label_smoothing)
        return smoothed(logits, targets, label_smoothing=label_smoothing, **kwargs)

    monkeypatch.setattr(seq2seq, "masked_cross_entropy", spy)
    torch.manual_seed(0)
    model = Seq2Seq(len(data.src_vocab), len(data.tgt_vocab), 8, 16)
    fit(model, data, steps=3, batch_size=8, lr=1e-2, label_smoothing=0.1)
    fit(model, data, steps=2, batch_size=8, lr=1e-2)
    assert seen == [0.1, 0.1, 0.1, 0.0, 0.0]


def test_trained_together_trains_in_processes_exactly_as_here(data, tmp_path, monkeypatch):
    V_s, V_t = len(data.src_vocab), len(data.tgt_vocab)

    def transformer():
        return Transformer(V_s, V_t, p=16, heads=2, n1=32, num_layers=1, dropout=0.1)

    calls = [  # dropout draws from the run's own seed, here as in a worker
        ("rnn", build(data), dict(steps=4, batch_size=8, lr=1e-2, seed=3)),
        ("transformer", transformer, dict(steps=4, batch_size=8, lr=1e-3, seed=5)),
        ("transformer", transformer,
         dict(steps=4, batch_size=8, lr=1e-3, seed=5, label_smoothing=0.1)),
    ]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the workers take this process's number of threads
    try:
        monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path / "here"))
        here = [trained(name, b, data, **kw) for name, b, kw in calls]
        monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path / "workers"))
        together = runs.trained_together([tr.run(name, b, data, kw) for name, b, kw in calls],
                                         processes=2)
        assert len(list((tmp_path / "workers").glob("*.pt"))) == 3
        monkeypatch.setattr(runs, "ProcessPoolExecutor", None)  # all cached
        again = runs.trained_together([tr.run(name, b, data, kw) for name, b, kw in calls])
    finally:
        torch.set_num_threads(threads)
    for (model, history), (other, saved), (_, loaded) in zip(here, together, again, strict=True):
        assert saved == loaded and saved["loss"] == history["loss"]
        for p, q in zip(model.state_dict().values(), other.state_dict().values(), strict=True):
            assert torch.equal(p, q)
    assert here[1][1]["loss"] != here[2][1]["loss"]  # the two transformers differ
