"""A learner's likely mistakes get an error that names the argument, what was expected and
what was given: the decoder without the encoder's memory, an input of another dtype than
the model's, a decoding step before `start` (or from None instead of the state `start`
returned), a prompt with characters outside the vocabulary, a time-major x, attention over
an empty sequence, a list where a tensor of token ids goes."""

import re
import warnings

import pytest
import torch

import seqlib
import seqlib.decoding
from seqlib.attention import Attention, inner_product_attention
from seqlib.bptt import forward_states
from seqlib.lm import RecurrentLM, TransformerLM, generate
from seqlib.positional import JointPositionalEmbedding
from seqlib.self_attention import MultiHeadAttention, SelfAttention, self_attention
from seqlib.seq2seq import AttentionSeq2Seq, Seq2Seq
from seqlib.text import char_vocab


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


# ------------------------------------------------- a stream model's state after start

@pytest.mark.parametrize("unit", ["rnn", "lstm", "gru"])
def test_a_stream_step_from_none_instead_of_the_state_start_returned(unit):
    torch.manual_seed(0)
    model = RecurrentLM(unit, 7, 4, 5, num_layers=2).eval()
    prompts = torch.tensor([[4, 5, 6], [6, 5, 4]])
    state = model.start(prompts, torch.ones_like(prompts, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"state must be the state that model.start\(prompts, "
                                         r"mask\) returned \(the prompt read so far\).*got None"):
        model.step(prompts[:, -1], None)
    logits, _ = model.step(prompts[:, -1], state)
    assert logits.shape == (2, 7)


@pytest.mark.parametrize("unit", ["rnn", "lstm", "gru"])
def test_a_one_token_prompt_starts_from_the_explicit_zero_state(unit):
    torch.manual_seed(0)
    model = RecurrentLM(unit, 7, 4, 5, num_layers=2).eval()
    with torch.no_grad():
        model.recurrent.b_y[3] = -float("inf")  # never <stop>: every row runs every step
    prompts = torch.tensor([[4], [5], [6]])
    state = model.start(prompts, torch.ones_like(prompts, dtype=torch.bool))
    zeros = torch.zeros(2, 3, 5)  # (L, B, m)
    if unit == "lstm":
        assert isinstance(state, tuple) and all(torch.equal(s, zeros) for s in state)
    else:
        assert torch.equal(state, zeros)

    class Recording:  # the decoding protocol, keeping each step's logits
        def __init__(self):
            self.logits = []

        def start(self, src, src_mask):
            return model.start(src, src_mask)

        def step(self, tokens, state):
            logits, state = model.step(tokens, state)
            self.logits.append(logits)
            return logits, state

        def reorder(self, state, index):
            return model.reorder(state, index)

    recording = Recording()
    out = seqlib.decoding.greedy(recording, prompts, torch.ones_like(prompts, dtype=torch.bool),
                                 start_id=4, stop_id=3, max_len=6)
    # before: the first step ran from None, the state forward starts from by default
    state, tokens, before = None, torch.full((3,), 4), []
    with torch.no_grad():
        for _ in range(6):
            logits, state = model(tokens[:, None], state)
            before.append(logits[:, -1])
            tokens = before[-1].argmax(-1)
    assert all(torch.equal(a, b) for a, b in zip(recording.logits, before, strict=True))
    assert out == torch.stack(before).argmax(-1).T.tolist()


def test_a_prompt_with_characters_outside_the_vocabulary():
    vocab = char_vocab("hello world")
    torch.manual_seed(0)
    model = RecurrentLM("gru", len(vocab), 4, 5)
    with pytest.warns(UserWarning, match=r"prompt 'Hello!' has characters not in the "
                                         r"vocabulary, \['H', '!'\]: they are read as <unk>; "
                                         r"expected characters of the vocabulary"):
        text = generate(model, vocab, "Hello!", 3, method="greedy")
    assert text[0].startswith("Hello!")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        generate(model, vocab, "hello", 3, method="greedy")  # every character known: silent


# ------------------------------------------------- a time-major x for a batch-first unit

@pytest.mark.parametrize("build, state", [
    (lambda: seqlib.RNN(3, 4), lambda h: h),
    (lambda: seqlib.GRU(3, 4), lambda h: h),
    (lambda: seqlib.LSTM(3, 4), lambda h: (h, h.clone())),
    (lambda: seqlib.RNN(3, 4, 3, output_feedback=True), lambda h: h),
])
def test_a_time_major_x_with_a_state_for_its_batch(build, state):
    model = build()
    x, h0 = torch.randn(5, 2, 3), torch.zeros(1, 2, 4)  # x as torch.nn's (T, B, p), B = 2
    with pytest.raises(ValueError, match=r"x has shape \(5, 2, 3\) and h0 has shape \(1, 2, 4\), "
                                         r"made for a batch of 2 = x.shape\[1\]: x looks "
                                         r"time-major \(time, batch, features\), torch.nn's "
                                         r"default, but seqlib's tensors are \(batch, time, "
                                         r"features\) \(batch_first\): expected x of shape "
                                         r"\(2, 5, 3\)"):
        model(x, state(h0))
    model(x.transpose(0, 1), state(h0))  # batch first, it runs
    with pytest.raises(ValueError, match=r"h0 has shape \(1, 3, 4\), expected \(1, 2, 4\)"):
        model(x.transpose(0, 1), state(torch.zeros(1, 3, 4)))  # a state of another batch


# ------------------------------------------------- attention over an empty sequence

def small_decode(memory_length):
    """The transformer's decoder reading the first `memory_length` times of the code z."""
    model = small_transformer()
    src, src_mask = torch.randint(4, 11, (2, 5)), torch.ones(2, 5, dtype=torch.bool)
    memory = model.encode(src, src_mask)[:, :memory_length]
    return model.decode(torch.randint(4, 13, (2, 3)), memory, src_mask[:, :memory_length])


@pytest.mark.parametrize("call, name, shape", [
    (lambda x, e: MultiHeadAttention(4, 2)(e), "x", (2, 0, 4)),
    (lambda x, e: MultiHeadAttention(4, 2, fast=False)(e, causal=True), "x", (2, 0, 4)),
    (lambda x, e: MultiHeadAttention(4, 2)(x, e), "context", (2, 0, 4)),
    (lambda x, e: SelfAttention(4)(e), "x", (2, 0, 4)),
    (lambda x, e: self_attention(e), "x", (2, 0, 4)),
    (lambda x, e: Attention(4, 4)(x, e, e), "keys", (2, 0, 4)),
    (lambda x, e: Attention(4, 4, score="inner")(x, e, e), "keys", (2, 0, 4)),
    (lambda x, e: inner_product_attention(x, e, e), "keys", (2, 0, 4)),
    (lambda x, e: small_decode(e.shape[1]), "memory", (2, 0, 8)),
])
def test_attention_over_an_empty_sequence_names_it(call, name, shape):
    x, empty = torch.randn(2, 3, 4), torch.randn(2, 0, 4)
    with pytest.raises(ValueError, match=rf"^{name} has shape {re.escape(str(shape))}, an empty "
                                         r"sequence: there are no keys to attend to \(the "
                                         r"attention weights are undefined\); expected "
                                         r"\(batch, time >= 1, features\)$"):
        call(x, empty)
    call(x, x)  # one key or more: it runs


# ------------------------------------------------- a list where a tensor of ids goes

@pytest.mark.parametrize("name, call", [
    ("src", lambda m, src, mask, tgt: m(src.tolist(), mask, tgt)),
    ("tgt_in", lambda m, src, mask, tgt: m(src, mask, tgt.tolist())),
    ("src", lambda m, src, mask, tgt: m.encode(src.tolist(), mask)),
    ("tgt_in", lambda m, src, mask, tgt: m.decode(tgt.tolist(), m.encode(src, mask), mask)),
    ("src", lambda m, src, mask, tgt: m.start(src.tolist(), mask)),
])
def test_a_transformer_given_a_list_of_ids(name, call):
    model = small_transformer()
    src, src_mask = torch.randint(4, 11, (2, 5)), torch.ones(2, 5, dtype=torch.bool)
    tgt_in = torch.randint(4, 13, (2, 3))
    with pytest.raises(TypeError, match=rf"^{name} must be a torch.Tensor of token ids "
                                        r"\(batch, time\), got list$"):
        call(model, src, src_mask, tgt_in)
    assert model(src, src_mask, tgt_in).shape == (2, 3, 13)
