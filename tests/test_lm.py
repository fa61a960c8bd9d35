"""Character-level language models: shapes, the carried state of truncated BPTT, the
contiguous batches, evaluation against a direct computation, reproducible sampling through
seqlib.decoding, the parameter counts of the book profile."""

import itertools

import pytest
import torch
import torch.nn.functional as F

from seqlib import lm
from seqlib.experiments import shakespeare
from seqlib.text import SPECIALS, char_vocab

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
    loss_fn = lm.CarriedStateLoss()
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


@torch.no_grad()
def sample_as_before(model, vocab, prompt, length, temperature, generator):
    """The sampling loop lm.sample ran before generation went through seqlib.decoding: the
    whole prompt in one pass, then one character at a time from softmax(logits / T)."""
    logits, state = model(torch.tensor([vocab.encode(prompt)]))
    drawn = []
    for _ in range(length):
        last = logits[0, -1].float() / temperature  # (V,)
        last[: len(SPECIALS)] = -float("inf")
        next_id = torch.multinomial(torch.softmax(last, dim=-1), 1, generator=generator)
        drawn.append(next_id.item())
        logits, state = model(next_id.view(1, 1), state)
    return prompt + vocab.to_text(vocab.decode(drawn))


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("unit", UNITS)
def test_generate_draws_what_the_sampling_loop_drew(unit, layers):
    vocab = char_vocab(TEXT)
    model = tiny_model(unit, len(vocab), layers).float()
    for prompt, temperature, seed in [("S", 1.0, 0), ("Speak", 0.5, 1), ("All:\n", 3.0, 2)]:
        texts = lm.generate(model, vocab, prompt, 60, temperature=temperature,
                            generator=torch.Generator().manual_seed(seed))
        assert texts == [sample_as_before(model, vocab, prompt, 60, temperature,
                                          torch.Generator().manual_seed(seed))]


@pytest.mark.parametrize("unit", UNITS)
def test_generate_is_reproducible_with_the_same_generator_seed(unit):
    vocab = char_vocab(TEXT)
    model = tiny_model(unit, len(vocab)).float()
    texts = [lm.generate(model, vocab, "Speak", 40, temperature=1.0,
                         generator=torch.Generator().manual_seed(s))[0] for s in (0, 0, 1)]
    assert texts[0] == texts[1] and texts[0] != texts[2]
    assert all(t.startswith("Speak") and len(t) == 45 for t in texts)
    assert all(set(t) <= set(TEXT) for t in texts)  # no special token is ever drawn


def test_low_temperature_concentrates_on_the_most_likely_character():
    vocab = char_vocab(TEXT)
    model = tiny_model("gru", len(vocab))
    with torch.no_grad():
        model.recurrent.b_y[vocab["e"]] = 50.0  # "e" is by far the most likely next character
    cold = lm.generate(model, vocab, "a", 30, temperature=0.05,
                       generator=torch.Generator().manual_seed(0))
    assert cold == ["a" + "e" * 30] == lm.generate(model, vocab, "a", 30, method="greedy")
    hot = lm.generate(model, vocab, "a", 30, temperature=100.0,
                      generator=torch.Generator().manual_seed(0))[0]
    assert len(set(hot[1:])) > 5 and set(hot) <= set(TEXT)


@pytest.mark.parametrize("unit", UNITS)
def test_recurrent_models_follow_the_decoding_protocol(unit):
    vocab = char_vocab(TEXT)
    model = tiny_model(unit, len(vocab))
    prompts = torch.tensor([vocab.encode("Spea"), vocab.encode("hear")])  # (2, 4)
    state = model.start(prompts, torch.ones_like(prompts, dtype=torch.bool))
    logits, state = model.step(prompts[:, -1], state)  # (2, V)
    whole, _ = model(prompts)
    torch.testing.assert_close(logits, whole[:, -1], rtol=0, atol=1e-12)
    assert model.start(prompts[:, :1], torch.ones(2, 1, dtype=torch.bool)) is None
    swapped = model.reorder(state, torch.tensor([1, 0]))
    states = swapped if isinstance(swapped, tuple) else (swapped,)
    originals = state if isinstance(state, tuple) else (state,)
    for s, o in zip(states, originals, strict=True):
        assert torch.equal(s, o.flip(1))  # (L, B, m): the batch is the second dimension
    # Several samples at once, and beam search, which reorders the states.
    samples = lm.generate(model, vocab, "Sp", 20, samples=3,
                          generator=torch.Generator().manual_seed(0))
    assert len(samples) == 3 and len(set(samples)) > 1
    assert lm.generate(model, vocab, "Sp", 20, method="beam", beam_size=1) == \
        lm.generate(model, vocab, "Sp", 20, method="greedy")
    with pytest.raises(ValueError, match="one length"):
        model.start(prompts, torch.tensor([[True] * 4, [True, True, True, False]]))


def test_generate_bad_arguments():
    vocab = char_vocab(TEXT)
    model, gen = tiny_model("rnn", len(vocab)).float(), torch.Generator()
    for bad in (0, -1.0, True, "hot"):
        with pytest.raises(ValueError, match="temperature must be a number > 0"):
            lm.generate(model, vocab, "a", 5, temperature=bad, generator=gen)
    with pytest.raises(ValueError, match="prompt"):
        lm.generate(model, vocab, "", 5, generator=gen)
    with pytest.raises(ValueError, match="length"):
        lm.generate(model, vocab, "a", 0, generator=gen)
    with pytest.raises(TypeError, match="generator"):
        lm.generate(model, vocab, "a", 5, generator=0)
    with pytest.raises(TypeError, match="vocab"):
        lm.generate(model, {"a": 4}, "a", 5, generator=gen)
    with pytest.raises(ValueError, match="method"):
        lm.generate(model, vocab, "a", 5, method="top")


# The shared plumbing of the experiments (chapters 7.3 and 7.5).

BOOK = shakespeare.BOOK_PROFILE


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("unit", UNITS)
def test_parameter_count_counts_the_model(unit, layers):
    model = lm.RecurrentLM(unit, 11, 5, 7, layers)
    assert lm.parameter_count(unit, 11, 7, 5, layers) == sum(p.numel() for p in model.parameters())
    with pytest.raises(ValueError, match="unit must be one of"):
        lm.parameter_count("cnn", 11, 7, 5)


def test_matched_hidden_sizes_of_the_book_profile():
    V = 69  # tiny Shakespeare: 65 characters and 4 special tokens
    sizes = {unit: lm.matched_hidden_size(unit, V, BOOK) for unit in UNITS}
    assert sizes == {"rnn": 383, "lstm": 192, "gru": 223}
    target = lm.parameter_count("lstm", V, 192, 32)
    for unit, m in sizes.items():
        gap = abs(lm.parameter_count(unit, V, m, 32) - target)
        assert all(abs(lm.parameter_count(unit, V, n, 32) - target) >= gap for n in (m - 1, m + 1))


def test_recurrent_model_is_reproducible():
    config = dict(BOOK, embed_size=4, hidden_size=6)
    a, b = lm.recurrent_model("gru", 10, config), lm.recurrent_model("gru", 10, config)
    assert a.recurrent.hidden_size == lm.matched_hidden_size("gru", 10, config)
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    c = lm.recurrent_model("gru", 10, config, seed=1)
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
    result = lm.evaluate(model, ids, B, T, carry_state=False)
    assert result == pytest.approx(manual_chunked_loss(model, ids, B, T), rel=1e-12)
    # With chunks as long as the streams (4 of 20 pairs, no tail), nothing to carry.
    assert lm.evaluate(model, ids, 4, 20, carry_state=False) == pytest.approx(
        lm.evaluate(model, ids, 4, 20), rel=1e-12)
    with pytest.raises(TypeError, match="carry_state"):
        lm.evaluate(model, ids, B, T, carry_state=1)


@pytest.mark.parametrize("B, T", [(1, 8), (3, 4), (6, 8)])
def test_evaluate_a_transformer_language_model(B, T):
    from seqlib.lm import TransformerLM

    vocab = char_vocab(TEXT)
    ids = torch.tensor(vocab.encode(TEXT))
    torch.manual_seed(0)
    model = TransformerLM(len(vocab), 8, 2, 16, 1, max_len=8).double()
    # No state: each chunk (at most max_len characters) is read on its own.
    result = lm.evaluate(model, ids, B, T)
    assert result == pytest.approx(manual_chunked_loss(model, ids, B, T), rel=1e-12)
    assert result == pytest.approx(lm.evaluate(model, ids, B, T, carry_state=False), rel=1e-12)
