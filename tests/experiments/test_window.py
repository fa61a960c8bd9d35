"""The fixed-window language model: the window it sees, its state across chunks, its size."""

import pytest
import torch

import seqlib
from seqlib import lm
from seqlib.experiments import shakespeare, streams
from seqlib.experiments.window import WindowLM, matched_window_model, window_parameter_count
from seqlib.text import char_vocab

V, E, M = 7, 3, 5


def by_hand(model, ids):
    """Logits from the definition: for each t, the embeddings of x^<t-k+1..t> (zeros before
    the start) concatenated, tanh layer, output layer."""
    B, T = ids.shape
    k, out = model.window, torch.zeros(B, T, model.vocab_size, dtype=torch.float64)
    for b in range(B):
        for t in range(T):
            window = [model.embedding.weight[ids[b, s]] if s >= 0
                      else torch.zeros(E, dtype=torch.float64) for s in range(t - k + 1, t + 1)]
            h = torch.tanh(model.hidden(torch.cat(window)))
            out[b, t] = model.output(h)
    return out


@pytest.mark.parametrize("k", [1, 2, 4])
def test_the_logits_follow_the_definition_and_carry_across_chunks(k):
    torch.manual_seed(0)
    model = WindowLM(V, k, E, M).double()
    ids = torch.randint(0, V, (2, 9))
    logits, state = model(ids)
    assert torch.allclose(logits, by_hand(model, ids), atol=1e-12)
    assert state.shape == (1, 2, k - 1) and torch.equal(state[0], ids[:, 9 - (k - 1):])
    first, carried = model(ids[:, :4])
    second, _ = model(ids[:, 4:], carried)
    assert torch.allclose(torch.cat([first, second], 1), logits, atol=1e-12)


def test_nothing_older_than_the_window_matters():
    torch.manual_seed(1)
    model = WindowLM(V, 3, E, M).double()
    ids = torch.randint(0, V, (1, 10))
    changed = ids.clone()
    changed[0, 2] = (ids[0, 2] + 1) % V
    a, b = model(ids)[0][0], model(changed)[0][0]
    assert torch.equal(a[:2], b[:2]) and torch.equal(a[5:], b[5:])  # t >= 2 + k: unchanged
    assert not torch.allclose(a[2:5], b[2:5])  # the k steps whose window holds position 2


def test_size_matching_and_the_language_model_plumbing():
    vocab = char_vocab("to be or not to be, that is the question")
    config = dict(shakespeare.PROFILES["book"]["recurrent"]["model"])
    lstm = shakespeare.recurrent_model("lstm", len(vocab), config)
    for k in (1, 8, 32):
        model = matched_window_model(len(vocab), k, config)
        n = seqlib.count_parameters(model)
        assert n == window_parameter_count(len(vocab), k, config["embed_size"],
                                           model.hidden.out_features)
        assert abs(n - seqlib.count_parameters(lstm)) < len(vocab) + k * config["embed_size"]
    ids = torch.tensor(vocab.encode("to be or not to be"))
    assert streams.evaluate(model, ids, 2, 4) > 0
    [text] = lm.generate(model, vocab, "to ", 10, generator=torch.Generator().manual_seed(0))
    assert len(text) == 13 and text.startswith("to ")


def test_bad_input_gets_a_clear_error():
    model = WindowLM(V, 3, E, M)
    with pytest.raises(ValueError, match="window must be a positive int, got 0"):
        WindowLM(V, 0, E, M)
    with pytest.raises(ValueError, match=r"state must be None or the last 2 ids, \(1, 1, 2\)"):
        model(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="ids must be"):
        model(torch.zeros(4, dtype=torch.long))
