"""Language modelling on one long text (seqlib.experiments.streams): the split, the
contiguous batches, the carried state, the evaluation; and the parameter-matched recurrent
models of seqlib.experiments.shakespeare."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from library.test_lm import TEXT, UNITS, tiny_model

from seqlib import lm
from seqlib.experiments import shakespeare, streams
from seqlib.text import char_vocab


def test_detach_state():
    w = torch.ones(2, requires_grad=True)
    h, c = w * 2, w * 3
    assert streams.detach_state(None) is None
    assert not streams.detach_state(h).requires_grad
    detached = streams.detach_state((h, c))
    assert isinstance(detached, tuple) and not any(s.requires_grad for s in detached)
    torch.testing.assert_close(detached[1], c.detach())
    with pytest.raises(TypeError, match="state must be"):
        streams.detach_state([h, c])


def test_split_corpus_keeps_the_first_part_for_training():
    ids = torch.arange(100)
    train, val = streams.split_corpus(ids)
    assert torch.equal(train, torch.arange(90)) and torch.equal(val, torch.arange(90, 100))
    train, val = streams.split_corpus(ids, 0.75)
    assert len(train) == 75 and torch.equal(torch.cat([train, val]), ids)
    for bad in (0, 1, 1.5, -0.1, True):
        with pytest.raises(ValueError, match="train_fraction"):
            streams.split_corpus(ids, bad)
    with pytest.raises(ValueError, match="1-D"):
        streams.split_corpus(ids.view(10, 10))
    with pytest.raises(TypeError, match="integer"):
        streams.split_corpus(ids.float())


@pytest.mark.parametrize("N, B, T", [(50, 3, 4), (37, 5, 7), (20, 1, 6), (30, 4, 19)])
def test_contiguous_batches_continue_each_stream(N, B, T):
    ids = torch.arange(N) * 10  # id j*10 at position j: x tells where a row is in the text
    chunks = list(itertools.islice(streams.contiguous_batches(ids, B, T), 3 * N // T + 2))
    for x, y in chunks:
        assert x.shape == y.shape == (B, T)
        assert torch.equal(y, ids[x // 10 + 1])  # every target is the true next id
    rows = torch.cat([x for x, _ in chunks], dim=1) // 10  # (B, steps): positions per stream
    # Row b of chunk i+1 continues row b of chunk i: each stream steps through the N - 1
    # (input, target) pairs one at a time, wrapping around from the last to the first.
    assert torch.equal(rows[:, 1:], (rows[:, :-1] + 1) % (N - 1))
    assert torch.equal(rows[:, 0], torch.arange(B) * (N - 1) // B)  # evenly spaced starts


def test_contiguous_batches_bad_arguments():
    with pytest.raises(ValueError, match="batch_size"):
        next(streams.contiguous_batches(torch.arange(10), 0, 4))
    with pytest.raises(ValueError, match="context"):
        next(streams.contiguous_batches(torch.arange(10), 2, -1))
    with pytest.raises(ValueError, match="fewer than batch_size=20"):
        next(streams.contiguous_batches(torch.arange(10), 20, 4))
    with pytest.raises(ValueError, match="1-D"):
        next(streams.contiguous_batches(torch.arange(10).view(2, 5), 2, 2))


def test_carried_state_loss_continues_from_the_previous_chunk():
    model = tiny_model("lstm")
    ids = torch.randint(0, 12, (2, 9), generator=torch.Generator().manual_seed(2))
    loss_fn = streams.CarriedStateLoss()
    loss_fn(model, (ids[:, :4], ids[:, 1:5]))
    second = loss_fn(model, (ids[:, 4:8], ids[:, 5:9]))
    logits, _ = model(ids[:, :8])
    expected = F.cross_entropy(logits[:, 4:].flatten(0, 1), ids[:, 5:9].flatten())
    torch.testing.assert_close(second, expected, rtol=0, atol=1e-12)


def manual_loss(model, ids, B):
    """Each of the B streams of L pairs in one pass, the leftover pairs after the last."""
    N = len(ids) - 1
    L = N // B
    total = 0.0
    for b in range(B):
        end = N if b == B - 1 else (b + 1) * L  # the last stream takes the tail too
        logits, _ = model(ids[None, b * L:end])
        total += F.cross_entropy(logits[0], ids[b * L + 1:end + 1], reduction="sum").item()
    return total / N


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("B, T", [(1, 5), (1, 200), (3, 4), (4, 7), (6, 3)])
def test_evaluate_equals_a_direct_computation(unit, B, T):
    vocab = char_vocab(TEXT)
    ids = torch.tensor(vocab.encode(TEXT))  # 81 characters, 80 pairs
    model = tiny_model(unit, len(vocab))
    model.train()
    result = streams.evaluate(model, ids, B, T)
    assert result == pytest.approx(manual_loss(model, ids, B), rel=1e-12)
    assert model.training  # the mode is restored
    if B == 1:  # one stream read in chunks = the whole text in one pass
        logits, _ = model(ids[None, :-1])
        assert result == pytest.approx(F.cross_entropy(logits[0], ids[1:]).item(), rel=1e-12)


def test_evaluate_of_an_untrained_model_is_near_log_vocabulary():
    vocab = char_vocab(TEXT)
    model = lm.RecurrentLM("lstm", len(vocab), 4, 8)
    loss = streams.evaluate(model, torch.tensor(vocab.encode(TEXT)), 2, 16)
    assert abs(loss - torch.log(torch.tensor(len(vocab))).item()) < 0.2


BOOK = shakespeare.PROFILES["book"]["recurrent"]["model"]


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("unit", UNITS)
def test_parameter_count_counts_the_model(unit, layers):
    model = lm.RecurrentLM(unit, 11, 5, 7, layers)
    assert shakespeare.parameter_count(unit, 11, 7, 5, layers) == \
        sum(p.numel() for p in model.parameters())
    with pytest.raises(ValueError, match="unit must be one of"):
        shakespeare.parameter_count("cnn", 11, 7, 5)


def test_matched_hidden_sizes_of_the_book_profile():
    V = 69  # tiny Shakespeare: 65 characters and 4 special tokens
    sizes = {unit: shakespeare.matched_hidden_size(unit, V, BOOK) for unit in UNITS}
    assert sizes == {"rnn": 383, "lstm": 192, "gru": 223}
    target = shakespeare.parameter_count("lstm", V, 192, 32)
    for unit, m in sizes.items():
        gap = abs(shakespeare.parameter_count(unit, V, m, 32) - target)
        assert all(abs(shakespeare.parameter_count(unit, V, n, 32) - target) >= gap
                   for n in (m - 1, m + 1))


def test_recurrent_model_is_reproducible():
    config = dict(BOOK, embed_size=4, hidden_size=6)
    a, b = (shakespeare.recurrent_model("gru", 10, config) for _ in range(2))
    assert a.recurrent.hidden_size == shakespeare.matched_hidden_size("gru", 10, config)
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    c = shakespeare.recurrent_model("gru", 10, config, seed=1)
    assert not torch.equal(a.embedding.weight, c.embedding.weight)


def manual_chunked_loss(model, ids, B, T):
    """Each stream cut into chunks of T pairs, each chunk read from the initial state."""
    N = len(ids) - 1
    L = N // B
    total = 0.0
    for b in range(B):
        end = N if b == B - 1 else (b + 1) * L
        for i in list(range(b * L, (b + 1) * L, T)) + list(range(B * L, end, T)):
            stop = min(i + T, (b + 1) * L) if i < B * L else min(i + T, end)
            logits, _ = model(ids[None, i:stop])
            total += F.cross_entropy(logits[0], ids[i + 1:stop + 1], reduction="sum").item()
    return total / N


@pytest.mark.parametrize("B, T", [(1, 5), (3, 4), (6, 7)])
def test_evaluate_without_carrying_the_state(B, T):
    vocab = char_vocab(TEXT)
    ids = torch.tensor(vocab.encode(TEXT))  # 80 pairs: B = 3 and 6 leave a tail
    model = tiny_model("lstm", len(vocab))
    result = streams.evaluate(model, ids, B, T, carry_state=False)
    assert result == pytest.approx(manual_chunked_loss(model, ids, B, T), rel=1e-12)
    # With chunks as long as the streams (4 of 20 pairs, no tail), nothing to carry.
    assert streams.evaluate(model, ids, 4, 20, carry_state=False) == pytest.approx(
        streams.evaluate(model, ids, 4, 20), rel=1e-12)
    with pytest.raises(TypeError, match="carry_state"):
        streams.evaluate(model, ids, B, T, carry_state=1)


@pytest.mark.parametrize("B, T", [(1, 8), (3, 4), (6, 8)])
def test_evaluate_a_transformer_language_model(B, T):
    from seqlib.lm import TransformerLM

    vocab = char_vocab(TEXT)
    ids = torch.tensor(vocab.encode(TEXT))
    torch.manual_seed(0)
    model = TransformerLM(len(vocab), 8, 2, 16, 1, max_len=8).double()
    # No state: each chunk (at most max_len characters) is read on its own.
    result = streams.evaluate(model, ids, B, T)
    assert result == pytest.approx(manual_chunked_loss(model, ids, B, T), rel=1e-12)
    assert result == pytest.approx(streams.evaluate(model, ids, B, T, carry_state=False), rel=1e-12)
