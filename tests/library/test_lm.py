"""Character-level language models: shapes, the state carried between chunks, the
textbook path, reproducible sampling through seqlib.decoding and the decoding protocol."""


import pytest
import torch

from seqlib import lm
from seqlib.experiments import streams
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
    second, _ = model(ids[:, 4:], streams.detach_state(state))
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
    first = model.start(prompts[:, :1], torch.ones(2, 1, dtype=torch.bool))  # nothing read
    for s in first if isinstance(first, tuple) else (first,):  # the explicit zero state
        assert torch.equal(s, torch.zeros(1, 2, 7, dtype=torch.float64))
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
