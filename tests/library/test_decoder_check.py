"""check_decoder, the check of (7.34): a transformer passes it, with and without its key and
value cache, and so do the recurrent encoder-decoders; a decoder that ignores the code z, one
whose teacher-forced pass reads later tokens, and bad arguments are caught."""

import pytest
import torch

from seqlib.decoding import check_decoder
from seqlib.seq2seq import AttentionSeq2Seq, Seq2Seq
from seqlib.text import pad_batch
from seqlib.transformer import Transformer

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
