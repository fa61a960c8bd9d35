"""Character-level language models: shapes, the carried state of truncated BPTT, the
contiguous batches, evaluation against a direct computation, reproducible sampling."""

import itertools

import pytest
import torch
import torch.nn.functional as F

from seqlib import lm
from seqlib.text import char_vocab

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n"
UNITS = ["rnn", "lstm", "gru"]


def tiny_model(unit, vocab_size=12, layers=1, seed=0):
    torch.manual_seed(seed)
    return lm.RecurrentLM(unit, vocab_size, 5, 7, layers).double()


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("unit", UNITS)
def test_shapes_and_state_carried_between_chunks(unit, layers):
    model = tiny_model(unit, layers=layers)
    ids = torch.randint(0, 12, (3, 10), generator=torch.Generator().manual_seed(0))
    logits, state = model(ids)
    assert logits.shape == (3, 10, 12)
    states = state if isinstance(state, tuple) else (state,)
    assert len(states) == (2 if unit == "lstm" else 1)
    assert all(s.shape == (layers, 3, 7) for s in states)
    # Two chunks with the state carried give the outputs of one pass over the whole.
    first, state = model(ids[:, :4])
    second, _ = model(ids[:, 4:], lm.detach_state(state))
    torch.testing.assert_close(torch.cat([first, second], dim=1), logits, rtol=0, atol=1e-12)


def test_textbook_path_gives_the_same_logits():
    fast, slow = tiny_model("gru"), lm.RecurrentLM("gru", 12, 5, 7, fast=False).double()
    slow.load_state_dict(fast.state_dict())
    ids = torch.randint(0, 12, (2, 6), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(fast(ids)[0], slow(ids)[0], rtol=0, atol=1e-12)


def test_bad_model_arguments():
    with pytest.raises(ValueError, match="unit must be one of"):
        lm.RecurrentLM("transformer", 10, 4, 4)
    with pytest.raises(ValueError, match="hidden_size"):
        lm.RecurrentLM("lstm", 10, 4, 0)
    model = tiny_model("lstm")
    with pytest.raises(TypeError, match="integer token ids"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"\[0, 12\)"):
        model(torch.tensor([[1, 12]]))
    with pytest.raises(ValueError, match="batch, time"):
        model(torch.tensor([1, 2, 3]))


def test_detach_state():
    w = torch.ones(2, requires_grad=True)
    h, c = w * 2, w * 3
    assert lm.detach_state(None) is None
    assert not lm.detach_state(h).requires_grad
    detached = lm.detach_state((h, c))
    assert isinstance(detached, tuple) and not any(s.requires_grad for s in detached)
    torch.testing.assert_close(detached[1], c.detach())
    with pytest.raises(TypeError, match="state must be"):
        lm.detach_state([h, c])


def test_split_corpus_keeps_the_first_part_for_training():
    ids = torch.arange(100)
    train, val = lm.split_corpus(ids)
    assert torch.equal(train, torch.arange(90)) and torch.equal(val, torch.arange(90, 100))
    train, val = lm.split_corpus(ids, 0.75)
    assert len(train) == 75 and torch.equal(torch.cat([train, val]), ids)
    for bad in (0, 1, 1.5, -0.1, True):
        with pytest.raises(ValueError, match="train_fraction"):
            lm.split_corpus(ids, bad)
    with pytest.raises(ValueError, match="1-D"):
        lm.split_corpus(ids.view(10, 10))
    with pytest.raises(TypeError, match="integer"):
        lm.split_corpus(ids.float())


@pytest.mark.parametrize("N, B, T", [(50, 3, 4), (37, 5, 7), (20, 1, 6), (30, 4, 19)])
def test_contiguous_batches_continue_each_stream(N, B, T):
    ids = torch.arange(N) * 10  # id j*10 at position j: x tells where a row is in the text
    chunks = list(itertools.islice(lm.contiguous_batches(ids, B, T), 3 * N // T + 2))
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
        next(lm.contiguous_batches(torch.arange(10), 0, 4))
    with pytest.raises(ValueError, match="context"):
        next(lm.contiguous_batches(torch.arange(10), 2, -1))
    with pytest.raises(ValueError, match="fewer than batch_size=20"):
        next(lm.contiguous_batches(torch.arange(10), 20, 4))
    with pytest.raises(ValueError, match="1-D"):
        next(lm.contiguous_batches(torch.arange(10).view(2, 5), 2, 2))


def test_carried_state_loss_continues_from_the_previous_chunk():
    model = tiny_model("lstm")
    ids = torch.randint(0, 12, (2, 9), generator=torch.Generator().manual_seed(2))
    loss_fn = lm.carried_state_loss()
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
    result = lm.evaluate(model, ids, B, T)
    assert result == pytest.approx(manual_loss(model, ids, B), rel=1e-12)
    assert model.training  # the mode is restored
    if B == 1:  # one stream read in chunks = the whole text in one pass
        logits, _ = model(ids[None, :-1])
        assert result == pytest.approx(F.cross_entropy(logits[0], ids[1:]).item(), rel=1e-12)


def test_evaluate_of_an_untrained_model_is_near_log_vocabulary():
    vocab = char_vocab(TEXT)
    model = lm.RecurrentLM("lstm", len(vocab), 4, 8)
    loss = lm.evaluate(model, torch.tensor(vocab.encode(TEXT)), 2, 16)
    assert abs(loss - torch.log(torch.tensor(len(vocab))).item()) < 0.2


@pytest.mark.parametrize("unit", UNITS)
def test_sample_is_reproducible_with_the_same_generator_seed(unit):
    vocab = char_vocab(TEXT)
    model = tiny_model(unit, len(vocab)).float()
    texts = [lm.sample(model, vocab, "Speak", 40, 1.0, torch.Generator().manual_seed(s))
             for s in (0, 0, 1)]
    assert texts[0] == texts[1] and texts[0] != texts[2]
    assert all(t.startswith("Speak") and len(t) == 45 for t in texts)
    assert all(set(t) <= set(TEXT) for t in texts)  # no special token is ever drawn
    assert lm.sample(model, vocab, "S", 0, 0.5, torch.Generator()) == "S"


def test_low_temperature_concentrates_on_the_most_likely_character():
    vocab = char_vocab(TEXT)
    model = tiny_model("gru", len(vocab))
    with torch.no_grad():
        model.recurrent.b_y[vocab["e"]] = 50.0  # "e" is by far the most likely next character
    cold = lm.sample(model, vocab, "a", 30, 0.05, torch.Generator().manual_seed(0))
    assert cold == "a" + "e" * 30
    hot = lm.sample(model, vocab, "a", 30, 100.0, torch.Generator().manual_seed(0))
    assert len(set(hot[1:])) > 5 and set(hot) <= set(TEXT)


def test_sample_bad_arguments():
    vocab = char_vocab(TEXT)
    model, gen = tiny_model("rnn", len(vocab)).float(), torch.Generator()
    for bad in (0, -1.0, True, "hot"):
        with pytest.raises(ValueError, match="temperature must be a number > 0"):
            lm.sample(model, vocab, "a", 5, bad, gen)
    with pytest.raises(ValueError, match="prompt"):
        lm.sample(model, vocab, "", 5, 1.0, gen)
    with pytest.raises(ValueError, match="length"):
        lm.sample(model, vocab, "a", -1, 1.0, gen)
    with pytest.raises(TypeError, match="generator"):
        lm.sample(model, vocab, "a", 5, 1.0, 0)
    with pytest.raises(TypeError, match="vocab"):
        lm.sample(model, {"a": 4}, "a", 5, 1.0, gen)
