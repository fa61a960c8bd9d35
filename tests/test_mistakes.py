"""A learner's likely mistakes get an error that names the argument, what was expected and
what was given: the decoder without the encoder's memory, an input of another dtype than
the model's, a decoding step before `start`."""

import pytest
import torch

import seqlib
from seqlib.attention import Attention
from seqlib.bptt import forward_states
from seqlib.lm import TransformerLM
from seqlib.positional import JointPositionalEmbedding
from seqlib.self_attention import MultiHeadAttention
from seqlib.seq2seq import AttentionSeq2Seq, Seq2Seq


def small_transformer():
    torch.manual_seed(0)
    return seqlib.Transformer(11, 13, 8, 2, 16, 1, max_len=20)


def test_decode_without_the_encoders_memory():
    model = small_transformer()
    src, src_mask = torch.randint(4, 11, (2, 5)), torch.ones(2, 5, dtype=torch.bool)
    tgt_in = torch.randint(4, 13, (2, 3))
    with pytest.raises(TypeError, match=r"memory must be the encoder's output z = "
                                        r"encode\(src, src_mask\).*got NoneType"):
        model.decode(tgt_in, None, src_mask)
    memory = model.encode(src, src_mask)
    with pytest.raises(ValueError, match="memory has 5 features, expected 8"):
        model.decode(tgt_in, memory[..., :5], src_mask)
    with pytest.raises(ValueError, match="memory has batch size 1, expected 2"):
        model.decode(tgt_in, memory[:1], src_mask)
    with pytest.raises(ValueError, match=r"src_mask has shape \(2, 4\), expected \(2, 5\)"):
        model.decode(tgt_in, memory, src_mask[:, :4])
    assert model.decode(tgt_in, memory, src_mask).shape == (2, 3, 13)


@pytest.mark.parametrize("build, call", [
    (lambda: seqlib.RNN(3, 4), lambda m, x: m(x)),
    (lambda: seqlib.LSTM(3, 4), lambda m, x: m(x)),
    (lambda: seqlib.GRU(3, 4), lambda m, x: m(x)),
    (lambda: seqlib.RNN(3, 4, output_size=2), lambda m, x: forward_states(m, x)),
    (lambda: MultiHeadAttention(3, 1), lambda m, x: m(x)),
    (lambda: Attention(3, 3, score="additive"), lambda m, x: m(x, x, x)),
    (lambda: JointPositionalEmbedding(3, 4), lambda m, x: m(x)),
])
def test_an_input_of_another_dtype_than_the_models(build, call):
    model = build()
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"(x|queries) has dtype torch.float64, but the model's "
                                        r"parameters are torch.float32: convert the input "
                                        r"\((x|queries).to\(torch.float32\)\) or the model"):
        call(model, x)
    call(model.double(), x)  # once they agree, it runs


@pytest.mark.parametrize("model", [
    small_transformer(),
    TransformerLM(13, 8, 2, 16, 1, max_len=20),
    Seq2Seq(11, 13, 4, 6, unit="gru"),
    AttentionSeq2Seq(11, 13, 4, 6),
], ids=lambda m: type(m).__name__)
def test_a_decoding_step_before_start(model):
    tokens = torch.tensor([4, 5])
    with pytest.raises(TypeError, match=r"state must be the dict that start\(src, src_mask\) "
                                        r"returns, with the keys .*got NoneType: call start "
                                        r"before step"):
        model.step(tokens, None)
    with pytest.raises(TypeError, match=r"got a dict with the keys \['oops'\]"):
        model.step(tokens, {"oops": 1})
    src, src_mask = torch.randint(4, 11, (2, 5)), torch.ones(2, 5, dtype=torch.bool)
    logits, _ = model.step(tokens, model.start(src, src_mask))
    assert logits.shape == (2, 13)
