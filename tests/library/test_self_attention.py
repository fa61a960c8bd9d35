"""Self-attention (7.23)-(7.27): the simple causal form and the form with p x p matrices
against explicit loops over tau <= t, the chapter's masking (key proxies set to -inf)
against the mask matrix Lambda, the explicit path against torch's fused kernel,
multi-head attention against the per-head sum of (7.25)-(7.26) and against
torch.nn.MultiheadAttention, the key/value cache, errors."""

import math

import pytest
import torch
from torch import nn

from seqlib.attention import Attention, inner_product_attention
from seqlib.self_attention import (
    MultiHeadAttention,
    SelfAttention,
    causal_mask,
    masked_key_scores,
    scaled_dot_product,
    scaled_inner_product,
    self_attention,
)

TOL = {torch.float32: 1e-5, torch.float64: 1e-12}


def randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def padding(lengths, T):
    return torch.arange(T) < torch.tensor(lengths)[:, None]  # (B, T), True at real keys


def by_loops(z_q, z_k, v, s, causal):
    """u^<t> = sum_tau alpha^t_tau v^<tau> with alpha^t_tau = e^s(z_q^t, z_k^tau) / sum_t'
    e^s(z_q^t, z_k^t'), the sums over tau, t' <= t (causal) or over all T, one by one."""
    B, T, _ = z_q.shape
    u, alpha = torch.zeros(B, T, v.shape[-1], dtype=v.dtype), torch.zeros(B, T, T,
                                                                         dtype=v.dtype)
    for b in range(B):
        for t in range(T):
            last = t + 1 if causal else T
            e = [math.exp(s(z_q[b, t], z_k[b, tau])) for tau in range(last)]
            for tau in range(last):
                alpha[b, t, tau] = e[tau] / sum(e)
                u[b, t] += alpha[b, t, tau] * v[b, tau]
    return u, alpha


def inner(a, b):
    return float(a @ b) / math.sqrt(len(a))


# ------------------------------------------------------------ (7.23), (7.24) and (7.27)

@pytest.mark.parametrize("causal", [True, False])
def test_self_attention_is_the_formula_7_23(causal):
    x = randn(2, 5, 4)
    u, weights = self_attention(x, causal=causal)
    u_loop, alpha_loop = by_loops(x, x, x, inner, causal)
    torch.testing.assert_close(weights, alpha_loop, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(u, u_loop, atol=1e-12, rtol=1e-12)
    assert (weights.triu(1) == 0).all() == causal
    if causal:  # the first step sees only itself
        torch.testing.assert_close(u[:, 0], x[:, 0])


def test_self_attention_is_causal_by_default_and_takes_any_score():
    x = randn(2, 4, 3)
    torch.testing.assert_close(self_attention(x)[1], self_attention(x, causal=True)[1])
    torch.manual_seed(0)
    general = Attention(3, 3, score="general").double()  # s = z_q^T W_s z_k
    u, w = self_attention(x, score=general.scores)
    W_s = general.W_s.detach()
    u_loop, w_loop = by_loops(x, x, x, lambda a, b: float(a @ W_s @ b), True)
    torch.testing.assert_close(w, w_loop.to(w), atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(u, u_loop.to(u), atol=1e-12, rtol=1e-12)
    with pytest.raises(TypeError, match="score must be a function"):
        self_attention(x, score="inner")
    with pytest.raises(ValueError, match=r"score must return the \(B, T_q, T_k\)"):
        self_attention(x, score=lambda q, k: q)


def test_self_attention_padded():
    x = randn(2, 4, 3)
    mask = padding([2, 4], 4)
    u, w = self_attention(x, mask=mask, causal=False)
    assert (w[0, :, 2:] == 0).all()
    expected = torch.softmax(x[0] @ x[0, :2].T / math.sqrt(3), -1) @ x[0, :2]  # real keys
    torch.testing.assert_close(u[0], expected, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
def test_self_attention_with_p_by_p_matrices_is_the_formula_7_24(causal):
    torch.manual_seed(0)
    attention = SelfAttention(4, causal=causal).double()
    assert [tuple(W.shape) for W in attention.parameters()] == [(4, 4)] * 3
    assert attention.causal == causal and SelfAttention(4).causal
    x = randn(2, 5, 4)
    u, alpha = attention(x)
    with torch.no_grad():
        z_q, z_k, v = x @ attention.W_q.T, x @ attention.W_k.T, x @ attention.W_v.T
    u_loop, alpha_loop = by_loops(z_q, z_k, v, inner, causal)
    torch.testing.assert_close(alpha, alpha_loop, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(u, u_loop, atol=1e-12, rtol=1e-12)
    # W_q = W_k = W_v = I gives (7.23)
    with torch.no_grad():
        for W in attention.parameters():
            W.copy_(torch.eye(4))
    torch.testing.assert_close(attention(x)[0], self_attention(x, causal=causal)[0])
    with pytest.raises(ValueError, match="x has 3 features, expected 4"):
        attention(randn(2, 5, 3))


def test_self_attention_module_registers_a_learned_score():
    score = Attention(4, 4, score="additive", attention_size=3)
    attention = SelfAttention(4, score=score)
    names = {name for name, _ in attention.named_parameters()}
    assert {"W_q", "W_k", "W_v", "score.W_sa", "score.W_sb", "score.w_s"} <= names
    with pytest.raises(TypeError, match="score must be a function"):
        SelfAttention(4, score=3)(randn(1, 2, 4, dtype=torch.float32))


def test_scaled_inner_product():
    z_q, z_k = randn(2, 3, 5), randn(2, 4, 5, seed=1)
    torch.testing.assert_close(scaled_inner_product(z_q, z_k),
                               z_q @ z_k.transpose(1, 2) / math.sqrt(5))
    with pytest.raises(ValueError, match="z_k has 4 features, expected 5"):
        scaled_inner_product(z_q, randn(2, 4, 4))


def test_masking_as_the_chapter_writes_it_equals_the_mask_matrix_7_27():
    z_q, z_k = randn(2, 5, 3), randn(2, 5, 3, seed=1)
    scores = masked_key_scores(z_q, z_k)  # keys after t set to -inf, s(z_q, -inf) = -inf
    plain = scaled_inner_product(z_q, z_k)
    Lambda = causal_mask(5, dtype=torch.float64)
    assert torch.isneginf(scores).equal(torch.isneginf(Lambda).expand(2, 5, 5))
    torch.testing.assert_close(scores, plain + Lambda)
    torch.testing.assert_close(torch.softmax(scores, -1),
                               inner_product_attention(z_q, z_k, z_k, causal=True)[1])
    # with another score function too
    torch.manual_seed(0)
    concat = Attention(3, 3, score="concat").double()
    torch.testing.assert_close(masked_key_scores(z_q, z_k, concat.scores),
                               concat.scores(z_q, z_k) + Lambda)
    # the literal -inf keys: an inner product gives -inf, +inf or nan by the query's signs
    minus_inf = torch.full((3,), -math.inf, dtype=torch.float64)
    assert torch.tensor([1.0, 2, 3], dtype=torch.float64) @ minus_inf == -math.inf
    assert torch.tensor([-1.0, -2, -3], dtype=torch.float64) @ minus_inf == math.inf
    assert torch.isnan(torch.tensor([1.0, -2, 3], dtype=torch.float64) @ minus_inf)
    with pytest.raises(ValueError, match="share batch and time"):
        masked_key_scores(z_q, z_k[:, :4])


def test_causal_mask_values():
    Lambda = causal_mask(4)
    assert Lambda.shape == (4, 4) and Lambda.dtype == torch.float32
    for i in range(4):
        for j in range(4):
            assert Lambda[i, j] == (0.0 if j <= i else -math.inf)
    # T_q < T_k: the queries are the last T_q times of the keys' axis
    Lambda = causal_mask(2, 5)
    assert Lambda.shape == (2, 5)
    expected = torch.tensor([[0, 0, 0, 0, -math.inf], [0, 0, 0, 0, 0]])
    assert torch.equal(Lambda, expected)
    assert torch.equal(causal_mask(1, 3, dtype=torch.float64), torch.zeros(1, 3,
                                                                          dtype=torch.float64))
    with pytest.raises(ValueError, match="T_q"):
        causal_mask(0)
    with pytest.raises(ValueError, match="T_q=3"):
        causal_mask(3, 2)


def test_mask_matrix_is_what_the_softmax_adds():
    q, k, v = randn(1, 2, 4, 3), randn(1, 2, 4, 3, seed=1), randn(1, 2, 4, 5, seed=2)
    out, w = scaled_dot_product(q, k, v, causal=True)
    scores = q @ k.transpose(-2, -1) / math.sqrt(3) + causal_mask(4, dtype=torch.float64)
    torch.testing.assert_close(w, torch.softmax(scores, -1), atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(out, torch.softmax(scores, -1) @ v, atol=1e-12, rtol=1e-12)


# ---------------------------------------------------------- explicit path == fused kernel

CASES = {  # name: (T_q, T_k, lengths or None, causal)
    "none": (5, 5, None, False),
    "causal": (5, 5, None, True),
    "padding": (4, 6, [6, 3], False),
    "causal+padding": (6, 6, [6, 4], True),
    "one query, cached keys": (1, 6, None, True),
    "one query, cached keys, padding": (1, 6, [6, 2], True),
    "fewer queries, causal": (3, 6, None, True),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", CASES)
def test_explicit_equals_fast_outputs_and_gradients(case, dtype):
    T_q, T_k, lengths, causal = CASES[case]
    B, H, m, m_v = 2, 3, 4, 5
    mask = None if lengths is None else padding(lengths, T_k)
    inputs = [randn(B, H, T_q, m, dtype=dtype), randn(B, H, T_k, m, seed=1, dtype=dtype),
              randn(B, H, T_k, m_v, seed=2, dtype=dtype)]
    results = []
    for fast in (False, True):
        q, k, v = (x.clone().requires_grad_(True) for x in inputs)
        out, w = scaled_dot_product(q, k, v, mask=mask, causal=causal, fast=fast)
        assert out.shape == (B, H, T_q, m_v)
        assert (w is None) == fast
        (out * randn(*out.shape, seed=3, dtype=dtype)).sum().backward()
        results.append([out, q.grad, k.grad, v.grad])
    tol = TOL[dtype]
    for name, a, b in zip("out dq dk dv".split(), *results, strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol, msg=name)


def test_weights_sum_to_one_and_masked_entries_are_exactly_zero():
    q, k, v = randn(2, 2, 5, 3), randn(2, 2, 5, 3, seed=1), randn(2, 2, 5, 3, seed=2)
    mask = padding([3, 5], 5)
    _, w = scaled_dot_product(q, k, v, mask=mask, causal=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 5, dtype=torch.float64))
    hidden = ~(mask[:, None, None, :] & torch.ones(5, 5, dtype=torch.bool).tril())
    assert (w[hidden.expand_as(w)] == 0).all()
    assert (w[~hidden.expand_as(w)] > 0).all()


@pytest.mark.parametrize("fast", [False, True])
def test_a_query_that_sees_no_key_raises(fast):
    q, k, v = randn(2, 1, 3, 4), randn(2, 1, 3, 4), randn(2, 1, 3, 4)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    with pytest.raises(ValueError, match="sees no key"):
        scaled_dot_product(q, k, v, mask=mask, fast=fast)
    with pytest.raises(ValueError, match="sees no key"):  # query 0 sees only key 0: padded
        scaled_dot_product(q, k, v, mask=torch.tensor([[False, True, True]] * 2),
                           causal=True, fast=fast)
    with pytest.raises(ValueError, match="sees no key"):
        self_attention(q[:, 0], mask=torch.zeros(2, 3, dtype=torch.bool))


@pytest.mark.parametrize("fast", [False, True])
def test_bad_masks_and_shapes_raise(fast):
    q, k, v = randn(2, 1, 3, 4), randn(2, 1, 5, 4), randn(2, 1, 5, 6)
    with pytest.raises(ValueError, match=r"mask has shape \(2, 3\), expected .* \(2, 5\)"):
        scaled_dot_product(q, k, v, mask=torch.ones(2, 3, dtype=torch.bool), fast=fast)
    with pytest.raises(TypeError, match="bool"):
        scaled_dot_product(q, k, v, mask=torch.ones(2, 5), fast=fast)
    with pytest.raises(ValueError, match="T_q=3 queries and T_k=2 keys"):
        scaled_dot_product(q, k[:, :, :2], v[:, :, :2], causal=True, fast=fast)
    with pytest.raises(ValueError, match=r"q must be a float \(batch, heads, time"):
        scaled_dot_product(q[0], k, v, fast=fast)
    with pytest.raises(ValueError, match="k must be a float"):
        scaled_dot_product(q, k.long(), v, fast=fast)
    with pytest.raises(ValueError, match="q, k, v must be"):
        scaled_dot_product(q, k[..., :3], v, fast=fast)
    with pytest.raises(ValueError, match="q, k, v must be"):
        scaled_dot_product(q, k, v[:, :, :4], fast=fast)
    with pytest.raises(ValueError, match="x must be"):
        self_attention(randn(3, 4))
    with pytest.raises(ValueError, match="mask has shape"):
        self_attention(randn(2, 3, 4), mask=torch.ones(3, 2, dtype=torch.bool))


def test_no_keys_raises():
    q, k = randn(1, 1, 2, 4), randn(1, 1, 0, 4)
    for fast in (False, True):
        with pytest.raises(ValueError, match="no keys"):
            scaled_dot_product(q, k, k, fast=fast)


# ------------------------------------------------------------------ multi-head attention

def mha(p=6, heads=3, m=None, m_v=None, seed=0, **options):
    torch.manual_seed(seed)
    return MultiHeadAttention(p, heads, m, m_v, **options).double()


@pytest.mark.parametrize("m, m_v", [(None, None), (3, 5)])
def test_forward_is_the_sum_over_heads_7_25_7_26(m, m_v):
    att = mha(6, 3, m, m_v)
    x = randn(2, 4, 6)
    u, w = att(x, need_weights=True)
    m, m_v = att.m, att.m_v
    total = torch.zeros(2, 4, 6, dtype=torch.float64)
    for h in range(3):
        W_q, W_k = att.W_q[h * m:(h + 1) * m], att.W_k[h * m:(h + 1) * m]  # (m, p)
        W_v = att.W_v[h * m_v:(h + 1) * m_v]  # (m_v, p)
        W_c = att.W_c[:, h * m_v:(h + 1) * m_v]  # (p, m_v): W_c^h
        for ours, theirs in zip(att.head(h + 1), (W_q, W_k, W_v, W_c), strict=True):
            assert torch.equal(ours, theirs)
        q, k, v = x @ W_q.T, x @ W_k.T, x @ W_v.T
        alpha = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(m), -1)  # (B, T, T)
        torch.testing.assert_close(w[:, h], alpha, atol=1e-12, rtol=1e-12)
        total = total + (alpha @ v) @ W_c.T  # W_c^h u^{h,<t>}
    torch.testing.assert_close(u, total, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(att(x)[0], total, atol=1e-12, rtol=1e-12)  # fast path


def test_one_head_is_single_head_attention_7_24():
    att = mha(5, 1, 3, 4)
    x = randn(2, 6, 5)
    mask = padding([6, 4], 6)
    q, k, v = x @ att.W_q.T, x @ att.W_k.T, x @ att.W_v.T  # (B, T, m), (B, T, m_v)
    scores = (q @ k.transpose(1, 2) / math.sqrt(3)).masked_fill(~mask[:, None], -math.inf)
    expected = torch.softmax(scores, -1) @ v @ att.W_c.T
    torch.testing.assert_close(att(x, mask=mask)[0], expected, atol=1e-12, rtol=1e-12)


def torch_pair(p, heads, bias, batch_first, seed=0):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(p, heads, bias=bias, batch_first=batch_first).double()
    if bias:  # torch starts its biases at 0: make them matter
        with torch.no_grad():
            ref.in_proj_bias.normal_()
            ref.out_proj.bias.normal_()
    return ref, MultiHeadAttention.from_torch(ref)


@pytest.mark.parametrize("masking", ["none", "padding", "causal", "both"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
def test_from_torch_outputs_weights_and_gradients(batch_first, bias, masking):
    ref, ours = torch_pair(8, 2, bias, batch_first)
    assert ours.W_q.dtype == torch.float64 and (ours.b_q is not None) == bias
    B, T = 3, 5
    x = randn(B, T, 8)
    mask = padding([5, 2, 4], T) if masking in ("padding", "both") else None
    causal = masking in ("causal", "both")
    x_ours, x_ref = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    u, w = ours(x_ours, mask=mask, causal=causal, need_weights=True)
    u_fast, _ = ours(x_ours, mask=mask, causal=causal)
    kw = dict(average_attn_weights=True)
    if mask is not None:
        kw["key_padding_mask"] = ~mask
    if causal:  # 0 / -inf; as a bool (True: hidden) next to the bool padding mask
        M = nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
        kw["attn_mask"] = M.isinf() if mask is not None else M
    inp = x_ref if batch_first else x_ref.transpose(0, 1)
    u_ref, w_ref = ref(inp, inp, inp, **kw)
    if not batch_first:
        u_ref = u_ref.transpose(0, 1)
    torch.testing.assert_close(u, u_ref, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(u_fast, u_ref, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(w.mean(1), w_ref, atol=1e-12, rtol=1e-12)  # heads averaged
    g = randn(B, T, 8, seed=5)
    ((u + u_fast) * g).sum().backward()
    (2 * u_ref * g).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_ref.grad, atol=1e-12, rtol=1e-12)
    ours_grads = {"W": torch.cat([ours.W_q.grad, ours.W_k.grad, ours.W_v.grad]),
                  "W_c": ours.W_c.grad}
    ref_grads = {"W": ref.in_proj_weight.grad, "W_c": ref.out_proj.weight.grad}
    if bias:
        ours_grads |= {"b": torch.cat([ours.b_q.grad, ours.b_k.grad, ours.b_v.grad]),
                       "b_c": ours.b_c.grad}
        ref_grads |= {"b": ref.in_proj_bias.grad, "b_c": ref.out_proj.bias.grad}
    for name in ref_grads:
        torch.testing.assert_close(ours_grads[name], ref_grads[name], atol=1e-12, rtol=1e-12,
                                   msg=name)


def test_cross_attention_with_other_context_size():
    att = mha(6, 2, 4, 3, kv_size=5)
    assert att.W_k.shape == (8, 5) and att.W_v.shape == (6, 5) and att.W_c.shape == (6, 6)
    x, context = randn(2, 3, 6), randn(2, 7, 5, seed=1)
    mask = padding([7, 2], 7)
    u, w = att(x, context, mask=mask, need_weights=True)
    assert u.shape == (2, 3, 6) and w.shape == (2, 2, 3, 7)
    assert (w[1, :, :, 2:] == 0).all()
    torch.testing.assert_close(att(x, context, mask=mask)[0], u, atol=1e-12, rtol=1e-12)
    alone = att(x[1:], context[1:, :2])[0]  # padding changes nothing
    torch.testing.assert_close(u[1:], alone, atol=1e-12, rtol=1e-12)
    with pytest.raises(ValueError, match="context has 6 features, expected 5"):
        att(x, randn(2, 7, 6))
    with pytest.raises(ValueError, match="context has batch size 1, expected 2"):
        att(x, context[:1])


@pytest.mark.parametrize("fast", [True, False])
def test_cache_one_step_at_a_time_equals_the_full_causal_pass(fast):
    att = mha(6, 2, fast=fast)
    x = randn(2, 5, 6)
    full, _ = att(x, causal=True)
    cache = {}
    steps = [att(x[:, t:t + 1], causal=True, cache=cache)[0] for t in range(5)]
    assert cache["k"].shape == (2, 2, 5, 3) and cache["v"].shape == (2, 2, 5, 3)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-12, rtol=1e-12)
    cache = {}  # a prompt of 3 at once, then single steps
    first, _ = att(x[:, :3], causal=True, cache=cache)
    rest = [att(x[:, t:t + 1], causal=True, cache=cache)[0] for t in (3, 4)]
    torch.testing.assert_close(torch.cat([first, *rest], 1), full, atol=1e-12, rtol=1e-12)
    # cross-attention: the context's keys and values are computed once and kept
    context, cache = randn(2, 4, 6, seed=1), {}
    u1, _ = att(x[:, :1], context, cache=cache)
    k = cache["k"]
    u2, _ = att(x[:, 1:2], context * 0, cache=cache)  # the context is not read again
    assert cache["k"] is k
    torch.testing.assert_close(u2, att(x[:, 1:2], context)[0], atol=1e-12, rtol=1e-12)


def test_sizes_and_errors():
    att = MultiHeadAttention(8, 2, 3, 5)
    assert (att.W_q.shape, att.W_k.shape, att.W_v.shape, att.W_c.shape) == (
        (6, 8), (6, 8), (10, 8), (8, 10))
    assert sum(p.numel() for p in att.parameters()) == 2 * (2 * 3 * 8 + 5 * 8 + 8 * 5)
    assert sum(p.numel() for p in MultiHeadAttention(8, 2, bias=True).parameters()) == \
        4 * 64 + 4 * 8
    with pytest.raises(ValueError, match="p=10 is not divisible by heads=4"):
        MultiHeadAttention(10, 4)
    assert MultiHeadAttention(10, 4, m=3).m_v == 3  # explicit head size: fine
    with pytest.raises(ValueError, match="heads"):
        MultiHeadAttention(8, 0)
    with pytest.raises(ValueError, match="h must be an int from 1 to H=2, got 0"):
        att.head(0)
    with pytest.raises(ValueError, match="x has 7 features, expected 8"):
        att(torch.randn(2, 3, 7))
    with pytest.raises(ValueError, match="mask has shape"):
        att(torch.randn(2, 3, 8), mask=torch.ones(2, 4, dtype=torch.bool))


def test_from_torch_refuses_what_it_cannot_copy():
    with pytest.raises(ValueError, match="dropout 0.1"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, dropout=0.1))
    with pytest.raises(ValueError, match="kdim"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=5, vdim=5))
    with pytest.raises(TypeError, match="nn.MultiheadAttention"):
        MultiHeadAttention.from_torch(nn.Linear(8, 8))


def test_gradcheck_float64():
    att = mha(4, 2, 2, 3)
    x = randn(1, 3, 4).requires_grad_(True)
    mask = torch.tensor([[True, True, False]])
    assert torch.autograd.gradcheck(
        lambda x, *weights: att(x, mask=mask, causal=True)[0], (x, *att.parameters()),
        fast_mode=True)
    assert torch.autograd.gradcheck(lambda x: att(x, need_weights=True)[1], (x,),
                                    fast_mode=True)
