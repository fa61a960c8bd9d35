"""What the experiments on sentences share (seqlib.experiments.sentences): batches of
sentences of similar lengths and corpus BLEU."""

import itertools

import pytest
import sacrebleu
import torch

from seqlib.experiments.sentences import batch_indices, bleu


def test_batch_indices_cover_each_example_once_per_epoch():
    examples = [("a" * (i % 7 + 1), "x") for i in range(23)]
    stream = batch_indices(examples, 4, torch.Generator().manual_seed(0), pool=2)
    epoch = list(itertools.islice(stream, 6))  # 23 examples: 6 batches, the last of 3
    assert sorted(i for batch in epoch for i in batch) == list(range(23))
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        next(batch_indices(examples, 0, torch.Generator()))
    with pytest.raises(ValueError, match="empty"):
        next(batch_indices([], 2, torch.Generator()))


def test_bleu_is_sacrebleu_on_lower_case_tokens():
    refs = ["A man rides a horse.", "Two dogs play in the snow."]
    assert bleu(refs, refs) == pytest.approx(100)
    assert bleu([r.upper() for r in refs], refs) == pytest.approx(100)  # case-insensitive
    hyps = ["a man rides a bike .", "two cats play in snow ."]
    expected = sacrebleu.corpus_bleu(hyps, [["a man rides a horse .",
                                             "two dogs play in the snow ."]],
                                     tokenize="none").score
    assert bleu(hyps, refs) == pytest.approx(expected)
    assert 0 < expected < 100
    assert bleu(["a <unk> ."], ["a zebra ."]) == bleu(["a x ."], ["a zebra ."])
    with pytest.raises(ValueError, match="as many"):
        bleu(hyps, refs[:1])
    with pytest.raises(TypeError):
        bleu("a", "a")
