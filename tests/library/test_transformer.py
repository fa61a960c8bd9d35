"""Transformers (7.31)-(7.34): LayerNorm and the blocks against torch.nn, the blocks' steps
in the order they run, the parameter counts of (7.32), padding to a fixed length, teacher
forcing against step-by-step decoding with and without the key/value cache, padding, the
decoder-only language model and its generation, errors."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from seqlib import lm
from seqlib.decoding import beam_search, greedy, sample
from seqlib.lm import TransformerLM
from seqlib.self_attention import MultiHeadAttention
from seqlib.text import SPECIALS, char_vocab, pad_batch
from seqlib.transformer import (
    LayerNorm,
    PreNormBlock,
    PreNormDecoderBlock,
    Transformer,
    TransformerBlock,
    TransformerDecoderBlock,
    pad_to_length,
    transformer_block_params,
)
from seqlib.utils import count_parameters

TOL = dict(atol=1e-12, rtol=1e-12)
V_SRC, V_TGT, START, STOP = 11, 13, 2, 3


def randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def padding(lengths, T):
    return torch.arange(T) < torch.tensor(lengths)[:, None]  # (B, T), True at real tokens


def randomize_(module: nn.Module, seed=0, scale=0.5):
    """Random values for every parameter (torch starts biases at 0 and LayerNorms at 1, 0,
    which would hide a mix-up)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * scale
                    + (1 if p.dim() == 1 and "norm" in module.__class__.__name__.lower()
                       else 0))
    return module


# ----------------------------------------------------------------------------- LayerNorm

def test_layer_norm_equals_torch_outputs_and_gradients():
    ref = randomize_(nn.LayerNorm(6).double())
    ours = LayerNorm(6).double()
    with torch.no_grad():
        ours.gamma.copy_(ref.weight)
        ours.beta.copy_(ref.bias)
    assert not torch.equal(ours.gamma, torch.ones(6))
    x = randn(2, 3, 6) * 3 + 1
    x_ours, x_ref = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    out, out_ref = ours(x_ours), ref(x_ref)
    torch.testing.assert_close(out, out_ref, **TOL)
    g = randn(2, 3, 6, seed=1)
    (out * g).sum().backward()
    (out_ref * g).sum().backward()
    for a, b in [(x_ours.grad, x_ref.grad), (ours.gamma.grad, ref.weight.grad),
                 (ours.beta.grad, ref.bias.grad)]:
        torch.testing.assert_close(a, b, **TOL)
    z = LayerNorm(4)(torch.tensor([[1.0, 2.0, 3.0, 6.0]]))  # by hand: mu = 3, sigma^2 = 3.5
    torch.testing.assert_close(z, (torch.tensor([[-2.0, -1.0, 0.0, 3.0]]) / (3.5 + 1e-5) ** 0.5))
    assert count_parameters(LayerNorm(7)) == 14


# -------------------------------------------------------------------- blocks against torch

def block_grads(block):
    a = block.attention
    return {"in_proj_weight": torch.cat([a.W_q.grad, a.W_k.grad, a.W_v.grad]),
            "in_proj_bias": torch.cat([a.b_q.grad, a.b_k.grad, a.b_v.grad]),
            "out_proj.weight": a.W_c.grad, "out_proj.bias": a.b_c.grad,
            "linear1.weight": block.feed_forward.linear1.weight.grad,
            "linear1.bias": block.feed_forward.linear1.bias.grad,
            "linear2.weight": block.feed_forward.linear2.weight.grad,
            "linear2.bias": block.feed_forward.linear2.bias.grad,
            "norm1.weight": block.norm1.gamma.grad, "norm1.bias": block.norm1.beta.grad,
            "norm2.weight": block.norm2.gamma.grad, "norm2.bias": block.norm2.beta.grad}


@pytest.mark.parametrize("masking", ["padding", "causal", "both"])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("norm_first", [False, True])
def test_block_from_torch_outputs_and_gradients(norm_first, batch_first, masking):
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(8, 2, 12, dropout=0.0, norm_first=norm_first,
                                     batch_first=batch_first, layer_norm_eps=1e-4).double()
    randomize_(ref)
    ref.eval()
    ours = TransformerBlock.from_torch(ref)
    assert type(ours) is (PreNormBlock if norm_first else TransformerBlock)
    assert ours.norm_first == norm_first and ours.norm1.eps == 1e-4
    B, T = 3, 5
    x = randn(B, T, 8)
    x_ours, x_ref = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    mask = padding([5, 2, 4], T) if masking in ("padding", "both") else None
    causal = masking in ("causal", "both")
    out = ours(x_ours, mask=mask, causal=causal)
    kw = {}
    if mask is not None:
        kw["src_key_padding_mask"] = ~mask
    if causal:  # 0 / -inf; as a bool (True: hidden) next to the bool padding mask
        M = nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
        kw |= dict(src_mask=M.isinf() if mask is not None else M, is_causal=True)
    inp = x_ref if batch_first else x_ref.transpose(0, 1)
    out_ref = ref(inp, **kw)
    if not batch_first:
        out_ref = out_ref.transpose(0, 1)
    torch.testing.assert_close(out, out_ref, **TOL)
    g = randn(B, T, 8, seed=1)
    (out * g).sum().backward()
    (out_ref * g).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_ref.grad, **TOL)
    ours_grads = block_grads(ours)
    for name, p in ref.named_parameters():
        torch.testing.assert_close(ours_grads[name.removeprefix("self_attn.")], p.grad,
                                   **TOL, msg=name)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_equals_torch_decoder_layer(norm_first):
    torch.manual_seed(0)
    ref = nn.TransformerDecoderLayer(8, 2, 12, dropout=0.0, norm_first=norm_first,
                                     batch_first=True).double()
    randomize_(ref)
    Block = PreNormDecoderBlock if norm_first else TransformerDecoderBlock
    ours = Block(8, 2, n1=12, bias=True).double()
    ours.self_attention.load_state_dict(MultiHeadAttention.from_torch(ref.self_attn)
                                        .state_dict())
    ours.cross_attention.load_state_dict(MultiHeadAttention.from_torch(ref.multihead_attn)
                                         .state_dict())
    ours.feed_forward.linear1.load_state_dict(ref.linear1.state_dict())
    ours.feed_forward.linear2.load_state_dict(ref.linear2.state_dict())
    for i in (1, 2, 3):
        norm = getattr(ref, f"norm{i}")
        getattr(ours, f"norm{i}").load_state_dict({"gamma": norm.weight, "beta": norm.bias})
    y, memory, mask = randn(2, 4, 8), randn(2, 6, 8, seed=1), padding([6, 3], 6)
    out, w = ours(y, memory, memory_mask=mask, need_weights=True)
    out_ref = ref(y, memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(
        4, dtype=torch.float64), memory_key_padding_mask=~mask, tgt_is_causal=True)
    torch.testing.assert_close(out, out_ref, **TOL)
    assert w.shape == (2, 2, 4, 6) and (w[1, :, :, 3:] == 0).all()
    torch.testing.assert_close(ours(y, memory, memory_mask=mask), out, **TOL)


def test_block_from_torch_refuses_what_it_cannot_copy():
    with pytest.raises(ValueError, match="ReLU"):
        TransformerBlock.from_torch(nn.TransformerEncoderLayer(8, 2, 16, 0.0, "gelu"))
    with pytest.raises(ValueError, match="dropout"):
        TransformerBlock.from_torch(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1))
    with pytest.raises(ValueError, match="bias=False"):
        TransformerBlock.from_torch(nn.TransformerEncoderLayer(8, 2, 16, 0.0, bias=False))
    with pytest.raises(TypeError, match="TransformerEncoderLayer"):
        TransformerBlock.from_torch(nn.TransformerDecoderLayer(8, 2, 16, 0.0))


def test_block_padding_and_causality():
    torch.manual_seed(0)
    block = TransformerBlock(8, 2, n1=12).double().eval()
    x, mask = randn(2, 5, 8), padding([5, 3], 5)
    out = block(x, mask=mask)
    torch.testing.assert_close(out[1, :3], block(x[1:, :3])[0], **TOL)
    out = block(x, causal=True)
    x2 = x.clone()
    x2[:, 3:] = 7.0
    torch.testing.assert_close(block(x2, causal=True)[:, :3], out[:, :3], **TOL)
    cache = {}  # one step at a time with the cache = the causal pass
    steps = torch.cat([block(x[:, t:t + 1], causal=True, cache=cache) for t in range(5)], 1)
    torch.testing.assert_close(steps, out, **TOL)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("decoder", [False, True])
def test_steps_are_what_forward_runs_in_order(decoder, norm_first):
    torch.manual_seed(0)
    Block = {(False, False): TransformerBlock, (False, True): PreNormBlock,
             (True, False): TransformerDecoderBlock, (True, True): PreNormDecoderBlock}
    block = Block[decoder, norm_first](8, 2, n1=12)
    steps = block.steps()
    assert len(steps) == (6 if decoder else 4)  # the chapter's count: 6 against 4
    ran = []
    hooks = [module.register_forward_hook(lambda mod, args, out: ran.append(mod))
             for _, module in steps]
    x = torch.randn(2, 3, 8)
    block(x, torch.randn(2, 4, 8)) if decoder else block(x)
    for hook in hooks:
        hook.remove()
    assert ran == [module for _, module in steps]  # forward runs the steps in their order
    names = [name for name, _ in steps]
    if norm_first:
        assert names[0::2] == ["LayerNorm"] * len(block.sublayers())
    else:
        assert names[1::2] == ["residual + LayerNorm"] * len(block.sublayers())
        assert names[0] == ("masked multi-head self-attention" if decoder
                            else "multi-head self-attention")


@pytest.mark.parametrize("batch_first", [True, False])
def test_pre_norm_block_equals_torch_norm_first_layer_with_copied_weights(batch_first):
    """x + MultiHead(LayerNorm(x)), then + FeedForward(LayerNorm(.)): our pre-norm block, its
    weights copied one by one (not through from_torch), against torch's norm_first layer."""
    torch.manual_seed(0)
    ref = randomize_(nn.TransformerEncoderLayer(8, 2, 12, dropout=0.0, norm_first=True,
                                                batch_first=batch_first).double()).eval()
    ours = PreNormBlock(8, 2, n1=12, bias=True).double()
    W_q, W_k, W_v = ref.self_attn.in_proj_weight.chunk(3)
    b_q, b_k, b_v = ref.self_attn.in_proj_bias.chunk(3)
    a = ours.attention
    with torch.no_grad():
        for mine, theirs in [(a.W_q, W_q), (a.W_k, W_k), (a.W_v, W_v), (a.b_q, b_q),
                             (a.b_k, b_k), (a.b_v, b_v), (a.W_c, ref.self_attn.out_proj.weight),
                             (a.b_c, ref.self_attn.out_proj.bias)]:
            mine.copy_(theirs.reshape(mine.shape))
    ours.feed_forward.linear1.load_state_dict(ref.linear1.state_dict())
    ours.feed_forward.linear2.load_state_dict(ref.linear2.state_dict())
    for mine, theirs in [(ours.norm1, ref.norm1), (ours.norm2, ref.norm2)]:
        mine.load_state_dict({"gamma": theirs.weight, "beta": theirs.bias})
    x, mask = randn(3, 5, 8), padding([5, 2, 4], 5)
    out_ref = ref(x if batch_first else x.transpose(0, 1), src_key_padding_mask=~mask)
    torch.testing.assert_close(ours(x, mask=mask),
                               out_ref if batch_first else out_ref.transpose(0, 1), **TOL)


def test_the_blocks_forward_is_the_two_lines_of_7_31_and_pre_norm_a_variant():
    """TransformerBlock.forward runs (7.31) alone: u_[2] = LayerNorm(a_in + MultiHead(a_in)),
    a_out = LayerNorm(u_[2] + FeedForward(u_[2])); PreNormBlock moves each LayerNorm before
    its sublayer; the LM builds the one or the other, or a block class it is given."""
    torch.manual_seed(0)
    post = randomize_(TransformerBlock(8, 2, n1=12))
    pre = PreNormBlock(8, 2, n1=12)
    pre.load_state_dict(post.state_dict())  # the same parameters
    x = torch.randn(2, 5, 8)
    attend = lambda z: post.attention(z, causal=True)[0]  # noqa: E731
    u2 = post.norm1(x + attend(x))
    torch.testing.assert_close(post(x, causal=True), post.norm2(u2 + post.feed_forward(u2)))
    v2 = x + attend(post.norm1(x))
    torch.testing.assert_close(pre(x, causal=True),
                               v2 + post.feed_forward(post.norm2(v2)))
    assert TransformerBlock(8, 2).residual and not TransformerBlock(8, 2).norm_first
    assert PreNormBlock(8, 2).norm_first
    lm_model = TransformerLM(11, 8, 2, 12, 3, max_len=6, norm_first=False)
    assert all(type(b) is TransformerBlock for b in lm_model.blocks)
    assert isinstance(lm_model.norm, nn.Identity)
    default = TransformerLM(11, 8, 2, 12, 3, max_len=6)  # the default: pre-norm
    assert all(type(b) is PreNormBlock for b in default.blocks)
    assert isinstance(default.norm, LayerNorm)

    class Other(TransformerBlock):
        pass

    given = TransformerLM(11, 8, 2, 12, 3, max_len=6, norm_first=False, block=Other)
    assert all(type(b) is Other for b in given.blocks)


def test_pad_to_length_the_chapters_toy():
    ids, mask = pad_to_length([[5, 6, 7, 8, 3], [9, 10, 11, 12, 13, 14, 3]], 9)
    assert ids.tolist() == [[5, 6, 7, 8, 3, 0, 0, 0, 0], [9, 10, 11, 12, 13, 14, 3, 0, 0]]
    assert mask.tolist() == [[True] * 5 + [False] * 4, [True] * 7 + [False] * 2]
    ids, mask = pad_to_length([[4, 4]], 2, pad_id=1)
    assert ids.tolist() == [[4, 4]] and mask.all()
    with pytest.raises(ValueError, match="sequences\\[1\\] has 3 tokens, more than the length 2"):
        pad_to_length([[4], [4, 5, 6]], 2)
    with pytest.raises(ValueError, match="length must be a positive int"):
        pad_to_length([[4]], 0)


# ------------------------------------------------------------------------ counts (7.32)

def test_the_chapters_parameter_counts():
    assert transformer_block_params(512, 2048, 64, 64, 8) == 3_150_336
    assert transformer_block_params(512, 2048, 64, 64, 8, decoder=True) == 4_199_936
    with torch.device("meta"):
        assert count_parameters(TransformerBlock(512, 8, 64, 64, 2048)) == 3_150_336
        assert count_parameters(TransformerDecoderBlock(512, 8, 64, 64, 2048)) == 4_199_936
        # torch adds the attention biases: 4 p per attention
        assert count_parameters(nn.TransformerEncoderLayer(512, 8, 2048)) == 3_152_384
        assert count_parameters(nn.TransformerDecoderLayer(512, 8, 2048)) == 4_204_032
        assert count_parameters(nn.Transformer(batch_first=True)) == 44_140_544
        assert count_parameters(TransformerBlock(512, 8, n1=2048, bias=True)) == 3_152_384
    assert 3_152_384 - 3_150_336 == 4 * 512 and 4_204_032 - 4_199_936 == 8 * 512


@settings(max_examples=25, deadline=None)
@given(p=st.integers(1, 12), heads=st.integers(1, 4), m=st.integers(1, 6),
       m_v=st.integers(1, 6), n1=st.integers(1, 12))
def test_parameter_count_formula_7_32(p, heads, m, m_v, n1):
    assert count_parameters(TransformerBlock(p, heads, m, m_v, n1)) == \
        transformer_block_params(p, n1, m, m_v, heads)
    assert count_parameters(TransformerDecoderBlock(p, heads, m, m_v, n1)) == \
        transformer_block_params(p, n1, m, m_v, heads, decoder=True)


# ----------------------------------------------------------- encoder-decoder transformer

def transformer(seed=0, dtype=torch.float64, **options):
    torch.manual_seed(seed)
    model = Transformer(V_SRC, V_TGT, 8, 2, 16, 2, dropout=0.0, max_len=20, **options)
    with torch.no_grad():  # larger weights: outputs that depend on the source
        for p in model.parameters():
            p.mul_(2)
        for embedding in (model.src_embedding, model.tgt_embedding):
            embedding.weight[1:].normal_()  # entries N(0, 1); the padding row stays 0
    return model.to(dtype).eval()


def sources():
    return pad_batch([[4, 5, 6, 7, 8], [9], [5, 6, 4], [7, 10]])


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("kv_cache", [True, False])
def test_teacher_forcing_equals_step_by_step(kv_cache, norm_first, dtype, tol):
    model = transformer(norm_first=norm_first, dtype=dtype)
    model.kv_cache = kv_cache
    src, src_mask = sources()
    tgt_in = torch.randint(4, V_TGT, (4, 6), generator=torch.Generator().manual_seed(1))
    tgt_in[:, 0] = START
    with torch.no_grad():
        logits = model(src, src_mask, tgt_in)
        assert logits.shape == (4, 6, V_TGT)
        state = model.start(src, src_mask)
        for t in range(6):
            step, state = model.step(tgt_in[:, t], state)
            torch.testing.assert_close(step, logits[:, t], atol=tol, rtol=tol)
        assert state["tokens"].shape == (4, 6)
        assert (state["caches"] is None) != kv_cache


def test_padding_never_changes_the_logits():
    model = transformer()
    src, src_mask = sources()
    tgt_in = torch.tensor([[START, 4, 5, 6]] * 4)
    with torch.no_grad():
        logits, weights = model(src, src_mask, tgt_in, return_attention=True)
        for b in range(4):
            n = int(src_mask[b].sum())
            alone = model(src[b:b + 1, :n], src_mask[b:b + 1, :n], tgt_in[b:b + 1])
            torch.testing.assert_close(logits[b:b + 1], alone, atol=1e-10, rtol=1e-10)
            other = src.clone()
            other[b, n:] = 9  # what the padding holds does not matter either
            torch.testing.assert_close(model(other, src_mask, tgt_in)[b], logits[b],
                                       atol=1e-10, rtol=1e-10)
    assert len(weights) == 2 and weights[0].shape == (4, 2, 4, 5)
    assert (weights[0][1, :, :, 1:] == 0).all() and (weights[1][2, :, :, 3:] == 0).all()
    torch.testing.assert_close(weights[1].sum(-1), torch.ones(4, 2, 4, dtype=torch.float64))


def test_greedy_and_beam_search_do_not_depend_on_the_cache():
    model = transformer(seed=5)  # a random model whose greedy outputs vary with the source
    src, src_mask = sources()
    out = {}
    for kv_cache in (True, False):
        model.kv_cache = kv_cache
        options = dict(start_id=START, stop_id=STOP, max_len=8)
        out[kv_cache] = (greedy(model, src, src_mask, **options),
                         beam_search(model, src, src_mask, beam_size=3, **options))
    (greedy_c, beams_c), (greedy_n, beams_n) = out[True], out[False]
    assert greedy_c == greedy_n
    assert len({tuple(s) for s in greedy_c}) > 1  # the outputs depend on the source
    for b_c, b_n in zip(beams_c, beams_n, strict=True):
        assert [t for t, _ in b_c] == [t for t, _ in b_n]
        assert [s for _, s in b_c] == pytest.approx([s for _, s in b_n], abs=1e-10)
    for b in range(4):  # a padded batch decodes like each sentence alone
        n = int(src_mask[b].sum())
        alone = greedy(model, src[b:b + 1, :n], src_mask[b:b + 1, :n], start_id=START,
                       stop_id=STOP, max_len=8)
        assert alone == [greedy_c[b]]


def test_transformer_errors():
    model = transformer()
    src, src_mask = sources()
    with pytest.raises(ValueError, match="max_len=20"):
        model(src, src_mask, torch.full((4, 21), 4))
    with pytest.raises(ValueError, match="max_len=20"):
        model(torch.full((1, 21), 4), torch.ones(1, 21, dtype=torch.bool), torch.tensor([[2]]))
    with pytest.raises(ValueError, match="src_mask has shape"):
        model(src, src_mask[:, :3], torch.tensor([[2]] * 4))
    with pytest.raises(ValueError, match=r"src must lie in \[0, 11\)"):
        model(src + 10, src_mask, torch.tensor([[2]] * 4))
    with pytest.raises(ValueError, match=r"tgt_in must lie in \[0, 13\)"):
        model(src, src_mask, torch.tensor([[13]] * 4))
    with pytest.raises(ValueError, match="tgt_in has batch size 2, expected 4"):
        model(src, src_mask, torch.tensor([[2]] * 2))
    with pytest.raises(ValueError, match="tokens must lie"):
        model.step(torch.tensor([13] * 4), model.start(src, src_mask))
    with pytest.raises(ValueError, match="p=10 is not divisible by heads=4"):
        Transformer(5, 5, 10, 4, 8, 1)


# ------------------------------------------------------------ decoder-only language model

def language_model(seed=0, max_len=6, dtype=torch.float64, **options):
    torch.manual_seed(seed)
    model = TransformerLM(V_TGT, 8, 2, 16, 2, max_len=max_len, **options)
    with torch.no_grad():  # larger weights: outputs that depend on the prompt
        for p in model.parameters():
            p.mul_(3)
    return model.to(dtype).eval()


def test_lm_forward_returns_logits_and_no_state():
    model = language_model()
    ids = torch.randint(0, V_TGT, (3, 6), generator=torch.Generator().manual_seed(0))
    logits, state = model(ids)
    assert logits.shape == (3, 6, V_TGT) and state is None
    torch.testing.assert_close(logits, model.logits(ids))
    ids2 = ids.clone()
    ids2[:, 4:] = 0  # causal: the future does not change earlier logits
    torch.testing.assert_close(model(ids2)[0][:, :4], logits[:, :4])
    with pytest.raises(ValueError, match="state=None"):
        model(ids, logits)
    with pytest.raises(ValueError, match="max_len=6"):
        model(torch.zeros(1, 7, dtype=torch.long))
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 13\)"):
        model(torch.tensor([[1, 13]]))
    with pytest.raises(ValueError, match="src_mask has shape"):
        model.start(ids, torch.ones(3, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="one length"):
        model.start(*pad_batch([[4, 5], [6]]))


@pytest.mark.parametrize("positional", ["learned", "sinusoidal"])
@pytest.mark.parametrize("prompt_length", [1, 3, 8])
def test_lm_steps_equal_the_parallel_pass_and_slide_past_max_len(prompt_length, positional):
    model = language_model(positional=positional)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(4, V_TGT, (2, prompt_length + 7), generator=gen)
    mask = torch.ones(2, prompt_length, dtype=torch.bool)
    with torch.no_grad():
        for kv_cache in (True, False):
            model.kv_cache = kv_cache
            state = model.start(ids[:, :prompt_length], mask)
            for t in range(prompt_length, ids.shape[1] + 1):  # predict ids[:, t]
                step, state = model.step(ids[:, t - 1], state)
                window = ids[:, max(0, t - model.max_len):t]  # the last max_len tokens
                torch.testing.assert_close(step, model.logits(window)[:, -1], atol=1e-10,
                                           rtol=1e-10)


def test_lm_decoding_does_not_depend_on_the_cache():
    model = language_model()
    prompts = torch.randint(4, V_TGT, (3, 3), generator=torch.Generator().manual_seed(2))
    prompts[:, -1] = 5  # the last prompt token is the decoding's start_id
    mask = torch.ones_like(prompts, dtype=torch.bool)
    options = dict(start_id=5, stop_id=STOP, max_len=10)  # 3 + 10 tokens > max_len = 6
    out = {}
    for kv_cache in (True, False):
        model.kv_cache = kv_cache
        out[kv_cache] = (greedy(model, prompts, mask, **options),
                         beam_search(model, prompts, mask, beam_size=3, **options),
                         sample(model, prompts, mask, generator=torch.Generator().manual_seed(0),
                                **options))
    (greedy_c, beams_c, sampled_c), (greedy_n, beams_n, sampled_n) = out[True], out[False]
    assert greedy_c == greedy_n and sampled_c == sampled_n
    for b_c, b_n in zip(beams_c, beams_n, strict=True):
        assert [t for t, _ in b_c] == [t for t, _ in b_n]
    assert max(len(s) for s in greedy_c + sampled_c) + 3 > model.max_len  # the window slid
    assert len({tuple(s) for s in greedy_c}) > 1  # the prompts matter


def test_generate_greedy_sample_beam():
    text = "the cat sat on the mat. "
    vocab = char_vocab(text)
    torch.manual_seed(0)
    model = TransformerLM(len(vocab), 8, 2, 16, 1, max_len=8).eval()
    letters = set(vocab.itos[len(SPECIALS):])
    for method, options in [("greedy", {}), ("sample", {"temperature": 1.5}),
                            ("beam", {"beam_size": 3})]:
        gen = (lambda: torch.Generator().manual_seed(0)) if method == "sample" else (
            lambda: None)
        out = lm.generate(model, vocab, "the", 12, method=method, generator=gen(), **options)
        assert len(out) == 1 and out[0].startswith("the") and len(out[0]) == 3 + 12
        assert set(out[0]) <= letters  # no special token, only text
        again = lm.generate(model, vocab, "the", 12, method=method, generator=gen(), **options)
        assert again == out
    many = lm.generate(model, vocab, "a", 20, samples=4, generator=torch.Generator()
                       .manual_seed(1), temperature=3.0)
    assert len(many) == 4 and all(s.startswith("a") and len(s) == 21 for s in many)
    assert len(set(many)) > 1  # different draws
    assert lm.generate(model, vocab, "a", 20, samples=4, generator=torch.Generator()
                       .manual_seed(1), temperature=3.0) == many
    with pytest.raises(ValueError, match="method"):
        lm.generate(model, vocab, "the", 5, method="top")
    with pytest.raises(ValueError, match="samples"):
        lm.generate(model, vocab, "the", 5, method="greedy", samples=2)
    with pytest.raises(ValueError, match="prompt"):
        lm.generate(model, vocab, "", 5, method="greedy")


def test_generate_keeps_the_models_mode():
    vocab = char_vocab("abc")
    torch.manual_seed(0)
    model = TransformerLM(len(vocab), 4, 1, 8, 1, max_len=8, dropout=0.5).eval()
    lm.generate(model, vocab, "ab", 3, method="greedy")
    assert not model.training
