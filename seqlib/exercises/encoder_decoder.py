"""Checkers for the exercises of the encoder-decoder chapter (Section 7.4): greedy decoding
written from the decoding protocol, model.start and model.step."""

import operator

import torch

from seqlib.decoding import greedy
from seqlib.exercises.toolkit import (
    expect,
    name_mistake,
    passed,
    require_callable,
    run_attempt,
    seeded,
)
from seqlib.seq2seq import AttentionSeq2Seq, Seq2Seq
from seqlib.text import pad_batch

START, STOP = 2, 3  # the ids of <start> and <stop> in every seqlib vocabulary
V_SRC, V_TGT = 11, 13  # small vocabularies: 4 special tokens and a few words


def _models() -> dict:
    """Two small untrained encoder-decoders, the same on every call: Fig. 7.9 (b) and
    Fig. 7.10. Their weights are scaled up, so that the chosen tokens depend on the source
    and on the step; <empty>, <unk> and <start> are never chosen, and the bias at <stop> is
    set so that the sentences end at different steps, some before max_len and some not."""
    models = {}
    for name, seed, stop_bias, build in [
            ("Seq2Seq (Fig. 7.9 (b))", 4, 1.0,
             lambda: Seq2Seq(V_SRC, V_TGT, 6, 8, feed_code=True)),
            ("AttentionSeq2Seq (Fig. 7.10)", 8, 1.75,
             lambda: AttentionSeq2Seq(V_SRC, V_TGT, 6, 8, attention_size=5))]:
        with seeded(seed):  # the caller's random numbers stay untouched
            model = build()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter *= 3.0
            model.decoder.output.bias[:START + 1] = -10.0  # <empty>, <unk>, <start>
            model.decoder.output.bias[STOP] += stop_bias
        models[name] = model.eval()
    return models


def _sources():
    """A padded batch of five source sentences of different lengths: src (5, 6), src_mask."""
    sentences = [[4, 5, 6, 7, 8, 9], [10, 4], [6, 6, 6, 5], [9], [8, 7, 10, 4, 5]]
    return pad_batch(sentences)


class _FeedStart:
    """A model whose step always reads <start>: what a loop that forgets to feed back the
    chosen token computes (used to recognise that mistake)."""

    def __init__(self, model):
        self.model = model

    def start(self, src, src_mask):
        return self.model.start(src, src_mask)

    def step(self, tokens, state):
        return self.model.step(torch.full_like(tokens, START), state)

    def reorder(self, state, index):
        return self.model.reorder(state, index)


class _KeepFirstState(_FeedStart):
    """A model whose step always starts from the first state (the state returned by
    model.step is dropped)."""

    def start(self, src, src_mask):
        self.first = self.model.start(src, src_mask)
        return self.first

    def step(self, tokens, state):
        logits, _ = self.model.step(tokens, self.first)
        return logits, state

    def reorder(self, state, index):
        self.first = self.model.reorder(self.first, index)
        return self.model.reorder(state, index)


def _as_lists(got, B: int, what: str) -> list:
    """The attempt's output as B lists of ints, or an ExerciseError saying what it is."""
    given = f"a tensor of shape {tuple(got.shape)}" if isinstance(got, torch.Tensor) else \
        f"a {type(got).__name__}"
    expect(isinstance(got, (list, tuple)),
           f"{what} returned {given}; return a list of {B} lists of token ids, one per source "
           f"sentence, each as long as its translation (tensor.tolist() converts a tensor)")
    expect(len(got) == B, f"{what} returned {len(got)} token lists for a batch of {B} source "
                          f"sentences: one list per sentence")
    lists = []
    for b, tokens in enumerate(got):
        expect(isinstance(tokens, (list, tuple)),
               f"{what}: the translation of sentence {b} is a {type(tokens).__name__}; "
               f"expected a list of ints")
        for token in tokens:
            expect(isinstance(token, int) and not isinstance(token, bool),
                   f"{what}: sentence {b} holds {token!r} of type {type(token).__name__}; the "
                   f"token ids must be Python ints (use .item() or .tolist())")
        lists.append(list(tokens))
    return lists


def _check_sentence(name: str, model, src, src_mask, b: int, got: list, expected: list,
                    max_len: int) -> None:
    """Sentence b's tokens against greedy decoding's, saying why they differ as far as can
    be told."""
    if got == expected:
        return
    where = f"{name}, max_len={max_len}, source sentence {b}"
    special = dict(start_id=START, stop_id=STOP, max_len=max_len)
    feed_start, keep_state = (greedy(variant(model), src, src_mask, **special)[b]
                              for variant in (_FeedStart, _KeepFirstState))
    name_mistake(f"{where}: your tokens are {got}, expected {expected}", got, [
        ([START] + expected, f"they begin with <start> (id {START}); return only the tokens "
                             f"the decoder chose, without <start>"),
        (expected + [STOP], f"they end with <stop> (id {STOP}); leave <stop> out, it only "
                            f"marks the end"),
        (feed_start, "each step must read the token chosen at the step before (<start> only "
                     "at the first step)"),
        (keep_state, "pass on the state that model.step returns: each step continues from "
                     "the state of the step before")], same=operator.eq)
    stop = got.index(STOP) + 1 if STOP in got else None  # the step that wrote <stop>
    expect(stop is None, f"{where}: your tokens go on after <stop> (id {STOP}, at step {stop}); "
                         f"a sentence ends when its decoder writes <stop>, even while other "
                         f"sentences of the batch go on")
    expect(len(got) <= max_len, f"{where}: {len(got)} tokens, more than max_len={max_len}")
    expect(got != expected[:len(got)], f"{where}: your tokens stop after {len(got)} of the "
                                       f"{len(expected)} expected ({expected}): stop at <stop> "
                                       f"or after max_len tokens, not before")
    step = next((t for t, (a, e) in enumerate(zip(got, expected, strict=False)) if a != e),
                None)
    expect(step is not None, f"{where}: your tokens {got} go on past the expected {expected}: "
                             f"a sentence ends when its decoder writes <stop> or after max_len "
                             f"tokens")
    expect(got == expected, f"{where}: your tokens {got} differ from the expected {expected} "
                            f"first at step {step + 1} (got {got[step]}, expected "
                            f"{expected[step]}): at every step take the most probable token, "
                            f"the argmax of the logits over the vocabulary")


def check_greedy_decoding(attempt) -> None:
    """Check `attempt(model, src, src_mask, start_id, stop_id, max_len)`, greedy decoding
    written from model.start and model.step: for each source sentence of the padded batch
    src (B, S), src_mask (B, S), the list of the ids it chose, without <start> and <stop>,
    stopping at <stop> or after max_len tokens. It is compared with seqlib.decoding.greedy
    on two small untrained models (Fig. 7.9 (b) and Fig. 7.10) and three values of max_len.
    """
    require_callable(attempt, "greedy_decode(model, src, src_mask, start_id, stop_id, "
                     "max_len) -> token lists")
    src, src_mask = _sources()
    B = len(src)
    for name, model in _models().items():
        for max_len in (1, 4, 12):
            special = dict(start_id=START, stop_id=STOP, max_len=max_len)
            expected = greedy(model, src, src_mask, **special)
            what = f"greedy_decode on {name} with max_len={max_len}"
            got = run_attempt(attempt, model, src.clone(), src_mask.clone(), START, STOP,
                              max_len, what=what)
            got = _as_lists(got, B, what)
            for b in range(B):
                _check_sentence(name, model, src, src_mask, b, got[b], expected[b], max_len)
    passed("greedy decoding from model.start and model.step gives seqlib.decoding.greedy's "
           f"tokens for {B} source sentences, on Fig. 7.9 (b) and Fig. 7.10, with max_len 1, "
           "4 and 12")
