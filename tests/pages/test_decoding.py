"""The worked examples of decoding and the check of (7.34), tools of the pages
(seqlib.pages.decoding): a decoder written as a table, where a beam of two misses the most
probable sentence and a beam of three finds it; the trace of a search; and check_decoder,
which a transformer and the recurrent encoder-decoders pass, with and without the key and value
cache, while a decoder that ignores the code z, one whose teacher-forced pass reads later
tokens, and bad arguments are caught."""

import math

import pytest
import torch

from seqlib.decoding import beam_search, beam_steps, greedy
from seqlib.pages.decoding import TableDecoder, beam_trace, check_decoder
from seqlib.seq2seq import AttentionSeq2Seq, Seq2Seq
from seqlib.text import pad_batch
from seqlib.transformer import Transformer

GO, END, X, Y, Z = range(5)  # <start>, <stop> and three words
MISSED = TableDecoder({
    (): [0, 0, 0.4, 0.35, 0.25],  # the best first word, x, does not begin the best sentence
    (X,): [0, 0.3, 0, 0.4, 0.3],
    (X, Y): [0, 1, 0, 0, 0],
    (Y,): [0, 0.3, 0.4, 0, 0.3],
    (Y, X): [0, 1, 0, 0, 0],
    (Z,): [0, 0.96, 0.04, 0, 0],
}, vocab_size=5, stop_id=END)


def most_probable(decoder, max_len=4):
    """The most probable sentence by enumerating them all, and its probability."""
    best, frontier = ([], 0.0), [((), 1.0)]
    for _ in range(max_len):
        grown = []
        for prefix, p in frontier:
            for y, q in enumerate(decoder.probabilities(prefix).tolist()):
                if q > 0 and y == END and p * q > best[1]:
                    best = (list(prefix), p * q)
                elif q > 0 and y != END:
                    grown.append((prefix + (y,), p * q))
        frontier = grown
    return best


def test_a_beam_of_two_misses_the_most_probable_sentence_and_a_beam_of_three_finds_it():
    src, mask = torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool)
    ids = dict(start_id=GO, stop_id=END, max_len=4)
    assert most_probable(MISSED) == ([Z], pytest.approx(0.24))
    assert greedy(MISSED, src, mask, **ids) == [[X, Y]]  # 0.4 x 0.4 x 1 = 0.16
    two, three = ([hyp for hyp in beam_search(MISSED, src, mask, **ids, beam_size=k,
                                              length_penalty=0)[0]] for k in (2, 3))
    assert [(tokens, round(math.exp(s), 6)) for tokens, s in two] == [([X, Y], 0.16),
                                                                      ([Y, X], 0.14)]
    assert (three[0][0], round(math.exp(three[0][1]), 6)) == ([Z], 0.24)
    # per token (length_penalty 1), "x y <stop>" beats "z <stop>": log 0.16 / 3 > log 0.24 / 2
    normalised = beam_search(MISSED, src, mask, **ids, beam_size=3, length_penalty=1)[0]
    assert normalised[0][0] == [X, Y]


def test_the_trace_records_every_extension_and_what_the_beam_did_with_it():
    src, mask = torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool)
    result, trace = beam_trace(MISSED, src, mask, start_id=GO, stop_id=END, max_len=4,
                               beam_size=2, length_penalty=0)
    assert result == beam_search(MISSED, src, mask, start_id=GO, stop_id=END, max_len=4,
                                 beam_size=2, length_penalty=0)
    first = {(e["prefix"], e["token"]): (round(math.exp(e["log_p"]), 6), e["status"])
             for e in trace[0][0]}
    assert first == {((), X): (0.4, "live"), ((), Y): (0.35, "live"), ((), Z): (0.25, "dropped")}
    second = {(e["prefix"], e["token"]): e["status"] for e in trace[1][0]}
    assert len(second) == 6 and second[(X,), Y] == "live" and second[(Y,), X] == "live"
    assert second[(X,), END] == "dropped"  # third best: not among the two that count
    assert [e["status"] for e in trace[2][0]] == ["finished", "finished"]


def test_the_steps_of_several_sources_leave_out_a_source_once_it_is_done():
    # source 0 ends at once (<stop> is certain after <start>); source 1 runs three steps
    quick = TableDecoder({(): [0, 1, 0, 0, 0]}, vocab_size=5, stop_id=END)
    both = TableDecoder({(): [0, 0, 0.4, 0.35, 0.25], (X,): [0, 0.3, 0, 0.4, 0.3]},
                        vocab_size=5, stop_id=END)
    two = torch.zeros(2, 1, dtype=torch.long), torch.ones(2, 1, dtype=torch.bool)

    class Pair(TableDecoder):  # source 0 reads the quick table, source 1 the other
        def step(self, tokens, state):
            logits, state = both.step(tokens, state)
            first = quick.step(tokens, state)[0]
            rows = torch.arange(len(tokens)) < len(tokens) // 2
            return torch.where(rows[:, None], first, logits), state

    ids = dict(start_id=GO, stop_id=END, max_len=4, beam_size=2, length_penalty=0)
    model = Pair({}, vocab_size=5, stop_id=END)
    steps = list(beam_steps(model, *two, **ids))
    assert [step.status[0] is None for step in steps] == [False, True, True]
    assert steps[0].status[0] == {(0, END): "finished"}
    assert steps[0].total.shape == (2, 2, 5) and steps[0].prefixes[1] == [[], []]
    result, trace = beam_trace(model, *two, **ids)
    assert result == beam_search(model, *two, **ids)
    assert [len(step[0]) for step in trace] == [1, 0, 0] and all(trace[t][1] for t in range(3))


def test_a_table_must_hold_probabilities():
    with pytest.raises(ValueError, match=r"table\[\(1,\)\] must be 3 probabilities summing to 1"):
        TableDecoder({(1,): [0.5, 0.4, 0.2]}, vocab_size=3, stop_id=1)


V_SRC, V_TGT = 11, 13


def transformer(cls=Transformer):
    torch.manual_seed(0)
    return cls(V_SRC, V_TGT, 16, 2, 32, 2, dropout=0.0)


def batch():
    src, src_mask = pad_batch([[4, 5, 6, 7], [8, 9], [5, 10, 4], [7, 6, 6, 9, 10]])
    tgt_in = torch.tensor([[2, 4, 5, 6, 7], [2, 8, 9, 3, 0], [2, 12, 11, 5, 3],
                           [2, 7, 7, 7, 4]])
    return src, src_mask, tgt_in


class IgnoresCode(Transformer):
    """A decoder that reads zeros where the code z should be: the same output for any
    source."""

    def decode(self, tgt_in, memory, src_mask, **options):
        return super().decode(tgt_in, torch.zeros_like(memory), src_mask, **options)


class ReadsAhead(Transformer):
    """A teacher-forced pass whose position t also reads the token after it."""

    def forward(self, src, src_mask, tgt_in, return_attention=False):
        logits = super().forward(src, src_mask, tgt_in)
        return logits + 0.1 * logits.roll(-1, dims=1)


@pytest.mark.parametrize("kv_cache", [True, False])
def test_a_transformer_passes(kv_cache):
    model = transformer()
    model.kv_cache = kv_cache
    result = check_decoder(model, *batch(), atol=1e-5)
    assert result.max_diff <= 1e-5 and result.code_effect.shape == (4,)
    assert result.code_effect.min() > 1e-2, result.code_effect


@pytest.mark.parametrize("build", [
    lambda: Seq2Seq(V_SRC, V_TGT, 6, 8, unit="lstm", feed_code=True),
    lambda: AttentionSeq2Seq(V_SRC, V_TGT, 6, 8, unit="gru")])
def test_the_recurrent_encoder_decoders_pass(build):
    torch.manual_seed(0)
    check_decoder(build(), *batch(), atol=1e-5)


def test_a_decoder_that_ignores_the_code_is_caught():
    model = transformer(IgnoresCode)
    with pytest.raises(AssertionError, match="ignores its code z"):
        check_decoder(model, *batch())


def test_a_teacher_forced_pass_that_reads_ahead_is_caught():
    with pytest.raises(AssertionError, match="step-by-step logits equal"):
        check_decoder(transformer(ReadsAhead), *batch())


def test_bad_arguments_are_errors():
    src, src_mask, tgt_in = batch()
    with pytest.raises(ValueError, match="B >= 2"):
        check_decoder(transformer(), src[:1], src_mask[:1], tgt_in[:1])
    with pytest.raises(ValueError, match="tgt_in must be"):
        check_decoder(transformer(), src, src_mask, tgt_in[:2])
