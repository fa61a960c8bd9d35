"""Greedy decoding, sampling and beam search: exact checks on a toy model with fixed
probabilities, agreements between the three on small random encoder-decoders, clear errors."""

import math

import pytest
import torch

from seqlib.decoding import beam_search, filter_logits, greedy, sample
from seqlib.seq2seq import AttentionSeq2Seq, Seq2Seq
from seqlib.text import pad_batch

V_SRC, V_TGT = 9, 7  # a small target vocabulary: <stop> is often drawn


START, STOP, A, B, C = 2, 3, 4, 5, 6


class Markov:
    """The decoding protocol with fixed probabilities: the next token depends on the
    previous one only, P(next | prev) = P[prev]."""

    def __init__(self, P):
        self.log_P = P.log()
        self.tgt_vocab_size = P.shape[1]

    def start(self, src, src_mask):
        return {"source": torch.arange(len(src))}  # which source each entry decodes

    def step(self, tokens, state):
        return self.log_P[tokens], state

    def reorder(self, state, index):
        return {"source": state["source"][index]}


def markov(transitions):
    """A Markov model over <empty>, <unk>, <start>, <stop>, A, B, C from
    {previous: {next: probability}}; unlisted rows are uniform over <stop>, A, B, C."""
    P = torch.zeros(7, 7)
    P[:, STOP:] = 1 / 4
    for previous, row in transitions.items():
        P[previous] = 0
        for token, p in row.items():
            P[previous, token] = p
    return Markov(P)


def toy():
    """From <start>: A or B. After A: <stop>, A or B; after B: mostly <stop>. Greedy takes
    A (0.6) then stops: 0.6 x 0.4 = 0.24 < 0.4 x 0.9 = 0.36 for B then <stop>."""
    return markov({START: {A: 0.6, B: 0.4}, A: {STOP: 0.4, A: 0.3, B: 0.3},
                   B: {STOP: 0.9, A: 0.05, B: 0.05}})


def one_source(n=1):
    return pad_batch([[4, 5]] * n)


def models():
    """Three small random encoder-decoders, weights doubled so that what they write depends
    on the source and some sentences stop before max_len (the tests check that they do; the
    seed of the attention model is one for which they do)."""
    torch.manual_seed(0)
    models = [Seq2Seq(V_SRC, V_TGT, 6, 8, unit="lstm", feed_code=True),
              Seq2Seq(V_SRC, V_TGT, 6, 8, unit="rnn", reverse_source=True)]
    torch.manual_seed(1)
    models.append(AttentionSeq2Seq(V_SRC, V_TGT, 6, 8, unit="gru"))
    with torch.no_grad():
        for p in (p for model in models for p in model.parameters()):
            p.mul_(2)
    return models


def sources():
    return pad_batch([[4, 5, 6, 7], [8], [5, 6, 4], [7, 7]])


def settings(**more):
    return dict(start_id=START, stop_id=STOP, max_len=8) | more


def test_greedy_on_the_toy_model_is_suboptimal_and_beam_2_finds_better():
    model = toy()
    assert greedy(model, *one_source(), **settings()) == [[A]]
    (best, second), = beam_search(model, *one_source(), **settings(beam_size=2))
    assert best[0] == [B] and second[0] == [A]
    assert math.isclose(best[1], math.log(0.36) / 2, rel_tol=1e-6)  # 2 tokens with <stop>
    assert math.isclose(second[1], math.log(0.24) / 2, rel_tol=1e-6)
    (best, second), = beam_search(model, *one_source(), **settings(beam_size=2,
                                                                   length_penalty=0))
    assert math.isclose(best[1], math.log(0.36), rel_tol=1e-6)


def test_length_normalisation_can_prefer_a_longer_sentence():
    # [B] has probability 0.45 x 0.6 = 0.27 in 2 tokens, [A, C] 0.55 x 1 x 0.4 = 0.22 in 3.
    model = markov({START: {A: 0.55, B: 0.45}, A: {C: 1.0}, B: {STOP: 0.6, C: 0.4},
                    C: {STOP: 0.4, C: 0.6}})
    raw = beam_search(model, *one_source(), **settings(beam_size=2, length_penalty=0))[0]
    mean = beam_search(model, *one_source(), **settings(beam_size=2, length_penalty=1))[0]
    assert [tokens for tokens, _ in raw] == [[B], [A, C]]  # log 0.27 > log 0.22
    assert [tokens for tokens, _ in mean] == [[A, C], [B]]  # log 0.22 / 3 > log 0.27 / 2
    assert math.isclose(mean[0][1], math.log(0.22) / 3, rel_tol=1e-6)


def test_max_len_cuts_a_sentence_that_never_stops():
    model = markov({START: {B: 1.0}, B: {C: 1.0}, C: {B: 1.0}})
    assert greedy(model, *one_source(), **settings(max_len=5)) == [[B, C, B, C, B]]
    ((tokens, score),), = beam_search(model, *one_source(), **settings(max_len=5, beam_size=3))
    assert tokens == [B, C, B, C, B] and score == 0.0  # the only sentence with P > 0


@pytest.mark.parametrize("k", range(3))
def test_beam_size_1_and_top_k_1_equal_greedy(k):
    model = models()[k]
    src, src_mask = sources()
    expected = greedy(model, src, src_mask, **settings())
    beams = beam_search(model, src, src_mask, **settings(beam_size=1))
    assert [b[0][0] for b in beams] == expected
    gen = torch.Generator().manual_seed(0)
    assert sample(model, src, src_mask, **settings(top_k=1, generator=gen)) == expected
    assert sample(model, src, src_mask, **settings(top_p=1e-6, generator=gen)) == expected
    assert all(STOP not in s for s in expected)
    assert {len(s) < 8 for s in expected} == {True, False}  # some stop, some are cut


@pytest.mark.parametrize("k", range(3))
def test_batch_decoding_equals_one_source_at_a_time(k):
    model = models()[k]
    src, src_mask = sources()
    together = greedy(model, src, src_mask, **settings())
    beams = beam_search(model, src, src_mask, **settings(beam_size=3))
    for b in range(len(src)):
        n = int(src_mask[b].sum())
        alone = src[b:b + 1, :n], src_mask[b:b + 1, :n]
        assert greedy(model, *alone, **settings()) == [together[b]]
        for (tokens, score), (ref_tokens, ref_score) in zip(
                beam_search(model, *alone, **settings(beam_size=3))[0], beams[b], strict=True):
            assert tokens == ref_tokens and math.isclose(score, ref_score, rel_tol=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("k", range(3))
def test_beams_are_ordered_and_scored_by_the_model(k, alpha):
    model = models()[k].double()
    src, src_mask = sources()
    beams = beam_search(model, src, src_mask, **settings(beam_size=4, length_penalty=alpha))
    for b, hypotheses in enumerate(beams):
        assert len(hypotheses) == 4
        scores = [score for _, score in hypotheses]
        assert scores == sorted(scores, reverse=True)
        for tokens, score in hypotheses:
            finished = len(tokens) < 8  # else cut at max_len, without <stop>
            scored = tokens + [STOP] * finished
            tgt_in = torch.tensor([[START] + scored[:-1]])
            log_p = torch.log_softmax(model(src[b:b + 1], src_mask[b:b + 1], tgt_in), -1)
            total = log_p[0, torch.arange(len(scored)), scored].sum().item()
            assert math.isclose(score, total / len(scored) ** alpha, rel_tol=1e-9)
    assert any(len(tokens) < 8 for h in beams for tokens, _ in h)  # finished ones checked


def test_sampling_reproduces_with_a_seed_and_differs_with_another():
    model = models()[2]
    src, src_mask = sources()

    def draw(seed, **options):
        gen = torch.Generator().manual_seed(seed)
        return sample(model, src, src_mask, **settings(generator=gen, **options))

    assert draw(1) == draw(1)
    assert draw(1) != draw(2)
    assert draw(1, temperature=2.0, top_k=3, top_p=0.9) == draw(1, temperature=2.0, top_k=3,
                                                                top_p=0.9)
    allowed = filter_logits(torch.zeros(V_TGT), top_k=3)  # top-k 3 draws among 3 tokens
    assert int(torch.isfinite(allowed).sum()) == 3


def test_sampling_frequencies_follow_the_toy_probabilities():
    gen = torch.Generator().manual_seed(0)
    firsts = [s[0] for s in sample(toy(), *one_source(2000), **settings(generator=gen))]
    assert abs(firsts.count(A) / 2000 - 0.6) < 0.04  # 4 standard deviations
    gen = torch.Generator().manual_seed(0)
    firsts = [s[0] for s in sample(toy(), *one_source(500), **settings(generator=gen,
                                                                       top_p=0.6))]
    assert firsts == [A] * 500  # the nucleus of p = 0.6 is A alone


def test_filter_logits():
    logits = torch.tensor([0.15, 0.5, 0.05, 0.3]).log()  # probabilities, shuffled
    kept = {p: torch.isfinite(filter_logits(logits, top_p=p)).tolist()
            for p in (0.4, 0.5, 0.7, 0.8, 0.96, 1.0)}
    assert kept[0.4] == kept[0.5] == [False, True, False, False]
    assert kept[0.7] == kept[0.8] == [False, True, False, True]  # 0.5 + 0.3 reaches 0.8
    assert kept[0.96] == [True, True, True, True] == kept[1.0]
    assert torch.isfinite(filter_logits(logits, top_k=2)).tolist() == [False, True, False, True]
    assert torch.equal(filter_logits(logits, top_k=10), logits)
    both = filter_logits(logits.expand(3, 4), top_k=3, top_p=0.8)  # batches of rows
    assert torch.isfinite(both).tolist() == [[False, True, False, True]] * 3
    torch.testing.assert_close(both[0, 1], logits[1])  # kept logits are unchanged
    with pytest.raises(ValueError, match="top_p"):
        filter_logits(logits, top_p=0)
    with pytest.raises(ValueError, match="top_k"):
        filter_logits(logits, top_k=0)


DECODERS = {
    "greedy": lambda *a, **o: greedy(*a, **o),
    "sample": lambda *a, **o: sample(*a, generator=torch.Generator(), **o),
    "beam": lambda *a, **o: beam_search(*a, **o),
}


@pytest.mark.parametrize("decode", DECODERS)
def test_empty_sources_are_errors(decode):
    model = models()[2]
    src, src_mask = sources()
    empty = src_mask.clone()
    empty[2] = False
    with pytest.raises(ValueError, match="source sentence 2 is empty"):
        DECODERS[decode](model, src, empty, **settings())
    with pytest.raises(ValueError, match="source batch is empty"):
        DECODERS[decode](model, src[:, :0], src_mask[:, :0], **settings())


@pytest.mark.parametrize("decode", DECODERS)
def test_vocabulary_mismatches_are_errors(decode):
    model = models()[0]
    src, src_mask = sources()
    run = DECODERS[decode]
    with pytest.raises(ValueError, match="start_id=7 is outside the model's target vocab"):
        run(model, src, src_mask, start_id=7, stop_id=STOP, max_len=5)
    with pytest.raises(ValueError, match="stop_id=9 is outside the model's target vocab"):
        run(model, src, src_mask, start_id=START, stop_id=9, max_len=5)
    with pytest.raises(ValueError, match=r"src must lie in \[0, 9\)"):
        run(model, src + V_SRC, src_mask, **settings())
    toy_model = toy()  # a model that does not state its vocabulary: checked on the logits
    del toy_model.tgt_vocab_size
    with pytest.raises(ValueError, match="vocabulary of size 7"):
        run(toy_model, *one_source(), start_id=START, stop_id=7, max_len=5)


def test_bad_arguments_are_errors():
    model, (src, src_mask) = models()[0], sources()
    with pytest.raises(TypeError, match="generator"):
        sample(model, src, src_mask, **settings(), generator=0)
    with pytest.raises(TypeError):
        sample(model, src, src_mask, **settings())  # the generator is required
    with pytest.raises(ValueError, match="temperature"):
        sample(model, src, src_mask, **settings(temperature=0, generator=torch.Generator()))
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, src, src_mask, **settings(beam_size=0))
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(model, src, src_mask, **settings(length_penalty=-1))
    with pytest.raises(ValueError, match="max_len"):
        greedy(model, src, src_mask, start_id=START, stop_id=STOP, max_len=0)
    with pytest.raises(TypeError, match="decoding protocol"):
        greedy(torch.nn.Linear(2, 2), src, src_mask, **settings())


def test_decoding_leaves_the_training_mode_and_gradients_alone():
    model = models()[2].train()
    out = greedy(model, *sources(), **settings())
    assert model.training and len(out) == 4
    assert all(p.grad is None for p in model.parameters())


# ------------------------------------------------ a worked example where the beam misses
