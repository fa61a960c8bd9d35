"""The checker of the encoder-decoder chapter's coding exercise accepts the book's solution
and rejects typical mistakes with a message that names them."""

import pytest
import torch

from seqlib.decoding import greedy
from seqlib.exercises import ExerciseError, check_greedy_decoding
from seqlib.exercises.encoder_decoder import START, STOP, _models, _sources


def greedy_decode(model, src, src_mask, start_id, stop_id, max_len):
    """The book's solution: one step for the whole batch, each sentence until its <stop>."""
    state = model.start(src, src_mask)
    tokens = torch.full((len(src),), start_id, dtype=torch.long)
    out, done = [[] for _ in range(len(src))], [False] * len(src)
    for _ in range(max_len):
        logits, state = model.step(tokens, state)
        tokens = logits.argmax(dim=-1)
        for b, token in enumerate(tokens.tolist()):
            done[b] = done[b] or token == stop_id
            if not done[b]:
                out[b].append(token)
        if all(done):
            break
    return out


def decoder_with(mistake):
    """greedy_decode with one mistake."""
    def decode(model, src, src_mask, start_id, stop_id, max_len):
        state = model.start(src, src_mask)
        first = state
        tokens = torch.full((len(src),), start_id, dtype=torch.long)
        out, done = [[] for _ in range(len(src))], [False] * len(src)
        for _ in range(max_len):
            logits, new_state = model.step(tokens, first if mistake == "state" else state)
            state = new_state
            chosen = logits.argmax(dim=-1)
            tokens = torch.full_like(chosen, start_id) if mistake == "feed" else chosen
            for b, token in enumerate(chosen.tolist()):
                if mistake == "keep-stop":
                    if not done[b]:
                        out[b].append(token)
                    done[b] = done[b] or token == stop_id
                elif mistake == "no-stop":
                    out[b].append(token)
                else:
                    done[b] = done[b] or token == stop_id
                    if not done[b]:
                        out[b].append(token)
        if mistake == "tensor":
            return torch.tensor([o[:1] for o in out])
        return out
    return decode


def test_the_test_batch_has_sentences_that_stop_early_and_late():
    src, src_mask = _sources()
    for model in _models().values():
        lengths = [len(t) for t in greedy(model, src, src_mask, start_id=START, stop_id=STOP,
                                          max_len=12)]
        assert 12 in lengths and min(lengths) <= 1 and len(set(lengths)) >= 3, lengths


@pytest.mark.parametrize("mistake, message", [
    ("keep-stop", "end with <stop>"),
    ("no-stop", "go on after <stop>"),
    ("feed", "read the token chosen at the step before"),
    ("state", "pass on the state"),
    ("tensor", "returned a tensor"),
])
def test_typical_mistakes_are_named(mistake, message):
    with pytest.raises(ExerciseError, match=message):
        check_greedy_decoding(decoder_with(mistake))


def test_other_failures_are_reported():
    with pytest.raises(ExerciseError, match="returned 1 token lists for a batch of 5"):
        check_greedy_decoding(lambda model, src, src_mask, start, stop, max_len: [[]])
    with pytest.raises(ExerciseError, match="raised ZeroDivisionError"):
        check_greedy_decoding(lambda model, src, src_mask, start, stop, max_len: 1 / 0)
    with pytest.raises(ExerciseError, match="must be Python ints"):
        check_greedy_decoding(lambda model, src, src_mask, start, stop, max_len:
                              [list(torch.arange(2)) for _ in range(len(src))])
    with pytest.raises(ExerciseError, match="take the most probable token|differ"):
        check_greedy_decoding(lambda model, src, src_mask, start, stop, max_len:
                              [[4] * max_len for _ in range(len(src))])
