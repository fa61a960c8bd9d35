"""Tests of seqlib.experiments.classify (encoders and classifiers of sentences, their run
with early stopping) and seqlib.experiments.sentiment (splits, word2vec vectors)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seqlib.experiments import classify, runs, sentiment
from seqlib.experiments.classify import (
    KINDS,
    BagOfEmbeddings,
    Classifier,
    RecurrentEncoder,
    TransformerEncoder,
    build,
    saliency,
)
from seqlib.gated import GRU, LSTM
from seqlib.pages.config import profile
from seqlib.text import pad_batch

V = 30
MODELS = {"bag": dict(p=8, dropout=0.5), "lstm": dict(p=8, hidden_size=6, dropout=0.5),
          "bilstm": dict(p=8, hidden_size=4, dropout=0.5),
          "bigru": dict(p=8, hidden_size=5, dropout=0.5),
          "transformer": dict(p=8, heads=2, m=4, n1=12, dropout=0.5, block_dropout=0.1)}


def model_of(kind: str, seed: int = 0) -> Classifier:
    torch.manual_seed(seed)
    return build(kind, V, MODELS[kind]).eval()


sentences = st.lists(st.lists(st.integers(2, V - 1), min_size=1, max_size=9),
                     min_size=1, max_size=5)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=15, deadline=None)
@given(batch=sentences)
def test_padding_changes_no_prediction(kind, batch):
    """A padded batch gives every sentence the logits it gets alone, for every kind."""
    model = model_of(kind)
    ids, mask = pad_batch(batch)
    with torch.no_grad():
        together = model(ids, mask)  # (B, 2)
        for b, s in enumerate(batch):
            alone = model(*pad_batch([s]))[0]
            torch.testing.assert_close(together[b], alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_shapes_and_kinds(kind):
    model = model_of(kind)
    ids, mask = pad_batch([[4, 5, 6], [7]])
    assert model(ids, mask).shape == (2, 2)
    assert model.encoder(ids, mask).shape == (2, model.encoder.output_size)


def test_recurrent_reads_each_sentence_at_its_own_ends():
    """One direction: the state at the last real token equals seqlib's LSTM run on the
    sentence alone; two directions: (7.14)'s [h_f^<T>; h_r^<1>] of a torch bidirectional
    LSTM with the same weights, run on the unpadded sentence."""
    torch.manual_seed(0)
    enc = RecurrentEncoder(V, 5, 3, bidirectional=True).eval()
    ids, mask = pad_batch([[4, 5, 6, 7], [8, 9]])
    with torch.no_grad():
        out = enc(ids, mask)  # (2, 6)
        ref = torch.nn.LSTM(5, 3, batch_first=True, bidirectional=True)
        for name, unit in [("", enc.forward_unit), ("_reverse", enc.reverse_unit)]:
            cell = unit.cell
            getattr(ref, f"weight_ih_l0{name}").copy_(cell.W_hx)
            getattr(ref, f"weight_hh_l0{name}").copy_(cell.W_hh)
            getattr(ref, f"bias_ih_l0{name}").copy_(cell.b_h)
            getattr(ref, f"bias_hh_l0{name}").zero_()
        for b, n in enumerate([4, 2]):
            H, _ = ref(enc.embedding(ids[b:b + 1, :n]))  # (1, n, 6)
            expected = torch.cat([H[0, -1, :3], H[0, 0, 3:]])  # h_f at T, h_r at 1
            torch.testing.assert_close(out[b], expected, atol=1e-6, rtol=1e-5)


def test_bag_is_the_mean_of_the_real_vectors():
    enc = BagOfEmbeddings(V, 4).eval()
    ids, mask = pad_batch([[3, 4, 5], [6]])
    expected = enc.embedding.weight[[3, 4, 5]].mean(0)
    torch.testing.assert_close(enc(ids, mask)[0], expected)


def test_transformer_masks_padding_and_uses_positions():
    torch.manual_seed(0)
    enc = TransformerEncoder(V, 8, 2, n1=8).eval()
    ids, mask = pad_batch([[3, 4, 5]])
    with torch.no_grad():
        swapped = enc(torch.tensor([[5, 4, 3]]), mask)
        assert not torch.allclose(enc(ids, mask), swapped)  # order matters


def test_encoders_use_seqlib_units():
    enc = RecurrentEncoder(V, 4, 3, unit="gru", bidirectional=True)
    assert isinstance(enc.forward_unit, GRU) and isinstance(enc.reverse_unit, GRU)
    assert isinstance(RecurrentEncoder(V, 4, 3).forward_unit, LSTM)


def test_bad_input():
    model = model_of("lstm")
    ids, mask = pad_batch([[4, 5], [6]])
    with pytest.raises(TypeError, match="src_mask must be a bool"):
        model(ids, mask.long())
    with pytest.raises(ValueError, match="src_mask has shape"):
        model(ids, mask[:, :1])
    with pytest.raises(ValueError, match="prefix"):
        model(ids, mask.flip(1))
    with pytest.raises(ValueError, match="src must lie in"):
        model(ids + V, mask)
    with pytest.raises(ValueError, match="unit must be one of"):
        RecurrentEncoder(V, 4, 3, unit="rnn")
    with pytest.raises(ValueError, match="kind must be one of"):
        build("cnn", V, MODELS["lstm"])
    with pytest.raises(TypeError, match="output_size"):
        Classifier(torch.nn.Linear(3, 3))
    with pytest.raises(ValueError, match="empty"):
        model(torch.zeros(1, 2, dtype=torch.long), torch.tensor([[False, False]]))


def test_saliency_is_gradient_times_input():
    model = model_of("bag")
    ids, mask = pad_batch([[4, 5, 6], [7, 8]])
    s = saliency(model, ids, mask)
    assert s.shape == (2, 3) and s[1, 2] == 0
    # for the bag, margin = w . mean(x) + c, so gradient x input is w . x_t / T per word
    logits = model(ids, mask)
    w = model.head.weight[0] - model.head.weight[1]
    sign = 1 - 2 * logits.argmax(-1)
    x = model.encoder.embedding.weight[ids[0]]
    torch.testing.assert_close(s[0], sign[0] * (x @ w) / 3)


def test_stratified_folds_and_split():
    labels = torch.tensor([0] * 53 + [1] * 47)
    folds = sentiment.stratified_folds(labels, 10, seed=1)
    assert sorted(torch.cat(folds).tolist()) == list(range(100))
    for f in folds:
        assert len(f) == 10 and abs(labels[f].sum().item() - 4.7) <= 1
    assert all(torch.equal(a, b) for a, b in
            zip(folds, sentiment.stratified_folds(labels, 10, seed=1), strict=True))
    tr, va, te = sentiment.stratified_split(labels, (8, 1, 1), seed=1)
    assert (len(tr), len(va), len(te)) == (80, 10, 10)
    assert not set(tr.tolist()) & set(te.tolist())
    with pytest.raises(ValueError, match="k must be"):
        sentiment.stratified_folds(labels, 101)
    with pytest.raises(ValueError, match="parts"):
        sentiment.stratified_split(labels, (8, 0))


def test_words_of_two_letters_drop_punctuation_and_one_letter_words():
    assert sentiment.words_of_two_letters("it's a gem , 10/10 !") == ["it", "gem", "10", "10"]


def test_nbsvm_folds_trains_on_every_other_fold():
    words = [["good", "fine"], ["bad", "awful"]] * 10  # separable: every fold right
    labels = torch.tensor([1, 0] * 10)
    folds = sentiment.stratified_folds(labels, 5, seed=0)
    assert sentiment.nbsvm_folds(words, labels, folds) == [1.0] * 5
    # a fold whose words the others never saw: NBSVM has nothing to go on there
    unseen = [["x"], ["y"]] + words[2:]
    one = [torch.tensor([0, 1])] + [torch.arange(2 + 2 * i, 4 + 2 * i) for i in range(9)]
    assert sentiment.nbsvm_folds(unseen, labels, one)[0] == 0.5


def test_batches_cover_an_epoch_with_little_padding():
    ids = [[4] * n for n in range(1, 41)]
    labels = torch.arange(40) % 2
    stream = classify.batches(ids, labels, 4, torch.Generator().manual_seed(0), pool=10)
    seen = []
    for _ in range(10):
        x, mask, y = next(stream)
        seen += mask.sum(1).tolist()
        assert mask.sum(1).min() >= mask.shape[1] - 3  # sorted by length: padding <= 3
    assert sorted(seen) == list(range(1, 41))


def test_fit_keeps_the_best_checkpoint():
    """A tiny task (is token 5 in the sentence?): training reaches it, the returned weights
    are those of the best validation accuracy."""
    g = torch.Generator().manual_seed(0)
    ids = [torch.randint(6, V, (int(n),), generator=g).tolist()
           for n in torch.randint(1, 6, (200,), generator=g)]
    labels = torch.randint(0, 2, (200,), generator=g)
    for s, y in zip(ids, labels.tolist(), strict=True):
        if y:
            s[0] = 5
    model = model_of("bag")
    history = runs.fit(classify.run(
        "tiny", model, ((ids[:160], labels[:160]), (ids[160:], labels[160:])),
        dict(steps=60, batch_size=20, lr=0.05, weight_decay=0.0, evals=3)))
    assert history["val_steps"] == [20, 40, 60]
    best = max(history["val_acc"])
    assert history["best_step"] == history["val_steps"][history["val_acc"].index(best)]
    assert classify.accuracy(model, ids[160:], labels[160:]) == best > 0.9


def test_word2vec_vectors(tmp_path, monkeypatch):
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path))
    ids = [[4, 5, 6, 7], [4, 5, 8], [9, 1, 4]] * 20
    setup = {"model": dict(dim=6), "fit": dict(window=2, steps=5, batch_size=64, lr=0.02)}
    vectors = sentiment.word2vec(ids, 10, setup)
    assert vectors.shape == (10, 6)
    again = sentiment.word2vec(ids, 10, setup)  # from the cache
    assert torch.equal(vectors, again) and len(list(tmp_path.glob("*.pt"))) == 1


def test_profiles():
    """A setup per classifier, each model built by classify.build, and word2vec."""
    setups = profile(sentiment.PROFILES)
    assert set(setups) == {*classify.KINDS, "word2vec"}
    for kind in classify.KINDS:
        model = build(kind, 20, setups[kind]["model"])
        assert model.dropout.p == setups[kind]["model"]["dropout"] == 0.5
    assert setups["word2vec"]["model"]["dim"] == setups["lstm"]["model"]["p"]
    assert classify.CLASSES == ("negative", "positive")


def test_log_odds_and_predict_agree():
    model = model_of("lstm")
    ids = [[2, 3, 4], [5], [6, 7, 8, 9, 10]]
    probs = classify.predict(model, ids)
    z = classify.predict(model, ids, logits=True)
    torch.testing.assert_close(torch.softmax(z, -1), probs)
    torch.testing.assert_close(sentiment.log_odds(model, ids),
                               (probs[:, 1] / probs[:, 0]).log().double(), rtol=1e-5, atol=1e-5)


def test_stack_recovers_a_logistic_regression():
    """Labels drawn from sigma(2 s_1 - s_2 + 0.5): the stack finds those weights."""
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(20_000, 2, generator=g, dtype=torch.float64)
    truth = torch.tensor([2.0, -1.0], dtype=torch.float64)
    labels = (torch.rand(20_000, generator=g, dtype=torch.float64)
              < torch.sigmoid(scores @ truth + 0.5)).long()
    combiner = sentiment.stack(scores, labels)
    torch.testing.assert_close(combiner.weight.squeeze(0), truth, atol=0.1, rtol=0)
    torch.testing.assert_close(combiner.bias, torch.tensor([0.5], dtype=torch.float64),
                               atol=0.1, rtol=0)
    with pytest.raises(ValueError, match="one row per label"):
        sentiment.stack(scores[:10], labels[:9])


def test_cross_validate_runs_every_fold(tmp_path, monkeypatch):
    """A tiny data set whose label is carried by one word: every fold's classifiers learn
    it, and the report holds the three accuracies and the stack's weights."""
    monkeypatch.setenv("SEQLIB_MODEL_CACHE", str(tmp_path))
    g = torch.Generator().manual_seed(0)
    words = ["a", "b", "c", "d", "e", "f"]
    pairs = []
    for i in range(120):
        y = i % 2
        filler = [words[j] for j in torch.randint(0, 6, (4,), generator=g).tolist()]
        pairs.append((" ".join([*filler[:2], "great" if y else "awful", *filler[2:]]), y))
    setups = {"lstm": {"data": dict(min_freq=1), "model": MODELS["lstm"],
                       "fit": dict(steps=10, batch_size=16, lr=0.05, weight_decay=0.0,
                                   evals=2)},
              "word2vec": {"model": dict(dim=8), "fit": dict(steps=3, batch_size=64, lr=0.02)}}
    results = sentiment.cross_validate(pairs, setups, kind="lstm", k=3)
    assert len(results) == 3
    for r in results:
        assert set(r) == {"test", "nbsvm", "stacked", "val", "weights", "seconds"}
        assert r["nbsvm"] == 1.0 and r["stacked"] == 1.0 and len(r["weights"]) == 2
        assert 0.5 <= r["test"] <= 1.0
