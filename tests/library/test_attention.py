"""The attention mechanism (7.20)-(7.21): weights, masks, causality, each score function
against a hand computation, the chapter's parameter shapes, gradients, clear errors."""

import math

import pytest
import torch

from seqlib.attention import (
    SCORES,
    Attention,
    attend,
    attention_weights,
    inner_product_attention,
)


def tensors(B=2, T_q=3, T_k=5, m_q=4, m_k=4, m_v=6, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(B, T_q, m_q, generator=gen, dtype=dtype),
            torch.randn(B, T_k, m_k, generator=gen, dtype=dtype),
            torch.randn(B, T_k, m_v, generator=gen, dtype=dtype))


def module(score, m_q=4, m_k=4, seed=0):
    torch.manual_seed(seed)
    return Attention(m_q, m_k, score)


@pytest.mark.parametrize("score", SCORES)
def test_shapes_and_weights_sum_to_one(score):
    m_k = 4 if score == "inner" else 7
    q, k, v = tensors(m_k=m_k)
    u, alpha = module(score, m_k=m_k)(q, k, v)
    assert u.shape == (2, 3, 6) and alpha.shape == (2, 3, 5)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(2, 3))
    assert (alpha >= 0).all()
    torch.testing.assert_close(u, alpha @ v)  # u = sum_t alpha_t v^<t>, (7.20)


def test_inner_product_attention_by_hand():
    q, k, v = tensors(B=1, T_q=1, T_k=3, m_q=4, m_k=4, m_v=2)
    u, alpha = inner_product_attention(q, k, v)
    s = [sum(q[0, 0, i] * k[0, t, i] for i in range(4)) / 2.0 for t in range(3)]  # sqrt(4)
    e = [math.exp(x) for x in s]
    expected = torch.tensor([x / sum(e) for x in e])
    torch.testing.assert_close(alpha[0, 0], expected)
    torch.testing.assert_close(u[0, 0], sum(expected[t] * v[0, t] for t in range(3)))
    torch.testing.assert_close(module("inner")(q, k, v)[0], u)  # the module agrees


@pytest.mark.parametrize("score", ["general", "concat", "additive"])
def test_one_score_by_hand(score):
    att = module(score, m_q=3, m_k=5)
    q, k, _ = tensors(B=1, T_q=2, T_k=4, m_q=3, m_k=5)
    z_q, z_k = q[0, 1], k[0, 2]  # query 2, key 3
    if score == "general":
        expected = z_q @ att.W_s @ z_k
    elif score == "concat":
        expected = att.w_s @ torch.tanh(att.W @ torch.cat([z_q, z_k]))
    else:
        expected = att.w_s @ torch.tanh(att.W_sa @ z_q + att.W_sb @ z_k)
    torch.testing.assert_close(att.scores(q, k)[0, 1, 2], expected)


def test_concat_is_additive_with_split_matrix():
    additive, concat = module("additive", 3, 5), module("concat", 3, 5, seed=1)
    with torch.no_grad():
        concat.W.copy_(torch.cat([additive.W_sa, additive.W_sb], dim=1))
        concat.w_s.copy_(additive.w_s)
    q, k, _ = tensors(m_q=3, m_k=5)
    torch.testing.assert_close(concat.scores(q, k), additive.scores(q, k))


def test_parameter_counts():
    count = {s: sum(p.numel() for p in Attention(3, 5, s, **({} if s in ("inner", "general")
                                                              else {"attention_size": 7}))
                    .parameters()) for s in SCORES if s != "inner"}
    assert count == {"general": 3 * 5, "concat": 7 * 8 + 7, "additive": 7 * 3 + 7 * 5 + 7}
    assert sum(p.numel() for p in Attention(4, 4, "inner").parameters()) == 0


@pytest.mark.parametrize("score", SCORES)
def test_masked_keys_get_weight_zero_and_do_not_matter(score):
    att = module(score)
    q, k, v = tensors()
    mask = torch.tensor([[True, True, True, False, False], [True] * 5])
    u, alpha = att(q, k, v, mask=mask)
    assert (alpha[0, :, 3:] == 0).all() and (alpha[1] > 0).all()
    torch.testing.assert_close(alpha.sum(-1), torch.ones(2, 3))
    k2, v2 = k.clone(), v.clone()
    k2[0, 3:], v2[0, 3:] = 100.0, -50.0  # change the padded keys and values
    u2, _ = att(q, k2, v2, mask=mask)
    torch.testing.assert_close(u2, u)
    u_short, _ = att(q[:1], k[:1, :3], v[:1, :3])  # the same as without the padding
    torch.testing.assert_close(u[:1], u_short)


@pytest.mark.parametrize("score", SCORES)
def test_causal_output_ignores_the_future(score):
    att = module(score)
    q, k, v = tensors(T_q=5, T_k=5)
    u, alpha = att(q, k, v, causal=True)
    assert torch.equal(alpha > 0, torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 5, 5))
    for t in range(5):
        k2, v2 = k.clone(), v.clone()
        k2[:, t + 1:] += 3.0
        v2[:, t + 1:] -= 2.0
        u2, _ = att(q, k2, v2, causal=True)
        torch.testing.assert_close(u2[:, :t + 1], u[:, :t + 1])
        if t < 4:
            assert not torch.allclose(u2[:, t + 1:], u[:, t + 1:])


def test_causal_with_fewer_queries_sees_the_last_times():
    q, k, v = tensors(T_q=5, T_k=5)
    u, _ = inner_product_attention(q, k, v, causal=True)
    u_last, alpha = inner_product_attention(q[:, 3:], k, v, causal=True)  # cached keys
    torch.testing.assert_close(u_last, u[:, 3:])
    assert (alpha[:, 0, 4] == 0).all()


def test_a_query_with_no_visible_key_raises_instead_of_nan():
    q, k, v = tensors()
    with pytest.raises(ValueError, match="query 0 of batch entry 1 sees no key"):
        inner_product_attention(q, k, v, mask=torch.tensor([[True] * 5, [False] * 5]))
    left_padded = torch.tensor([[False, True, True, True, True]] * 2)
    with pytest.raises(ValueError, match="sees no key"):
        inner_product_attention(*tensors(T_q=5), mask=left_padded, causal=True)
    with pytest.raises(ValueError, match="no keys"):
        inner_product_attention(q, k[:, :0], v[:, :0])


def test_clear_errors():
    q, k, v = tensors()
    with pytest.raises(ValueError, match="same size"):
        inner_product_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="query_size == key_size"):
        Attention(4, 6, "inner")
    with pytest.raises(ValueError, match="score must be one of"):
        Attention(4, 4, "dot")
    with pytest.raises(ValueError, match="attention_size"):
        Attention(4, 4, "general", attention_size=3)
    att = Attention(4, 4)
    with pytest.raises(ValueError, match="keys has 3 features, expected 4"):
        att(q, k[..., :3], v)
    with pytest.raises(ValueError, match=r"\(batch, time, features\)"):
        att(q[0], k, v)
    with pytest.raises(ValueError, match="values has shape"):
        att(q, k, v[:, :4])
    with pytest.raises(ValueError, match="batch sizes"):
        att(q, k[:1], v[:1])
    with pytest.raises(ValueError, match="mask has shape"):
        att(q, k, v, mask=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool"):
        att(q, k, v, mask=torch.ones(2, 5))
    with pytest.raises(ValueError, match="no more queries than keys"):
        att(*tensors(T_q=6), causal=True)
    with pytest.raises(TypeError, match="floats"):
        att(q.long(), k, v)


def test_attend_is_the_softmax_and_weighted_sum():
    scores = torch.tensor([[[0.0, math.log(3.0)]]])
    u, alpha = attend(scores, torch.tensor([[[1.0], [5.0]]]))
    torch.testing.assert_close(alpha, torch.tensor([[[0.25, 0.75]]]))
    torch.testing.assert_close(u, torch.tensor([[[4.0]]]))


@pytest.mark.parametrize("score", SCORES)
def test_gradcheck(score):
    att = module(score, m_q=3, m_k=3).double()
    q, k, v = (t.requires_grad_(True) for t in tensors(B=2, T_q=2, T_k=3, m_q=3, m_k=3,
                                                        m_v=2, dtype=torch.float64))
    mask = torch.tensor([[True, True, False], [True, True, True]])
    assert torch.autograd.gradcheck(lambda *x: att(*x, mask=mask)[0], (q, k, v))
    if score == "inner":
        return  # no parameters
    names = [n for n, _ in att.named_parameters()]  # and with respect to the parameters
    params = tuple(p.detach().clone().requires_grad_(True) for p in att.parameters())
    assert torch.autograd.gradcheck(
        lambda *p: torch.func.functional_call(att, dict(zip(names, p, strict=True)),
                                              (q.detach(), k.detach(), v.detach()))[0], params)


def test_weights_7_20_by_hand():
    """alpha^<t>_tau = exp(s(z_q^<t>, z_k^<tau>)) / sum_tau' exp(s(z_q^<t>, z_k^<tau'>))."""
    scores = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(0))
    alpha = attention_weights(scores)
    for b in range(2):
        for t in range(3):
            e = [math.exp(scores[b, t, tau]) for tau in range(5)]
            torch.testing.assert_close(alpha[b, t], torch.tensor([x / sum(e) for x in e]))


@pytest.mark.parametrize("score", SCORES)
def test_causal_7_21_is_the_explicit_sum_over_earlier_times(score):
    """u^<t> = sum_{tau <= t} alpha^<t>_tau v^<tau>, the softmax over tau <= t only."""
    att = module(score)
    q, k, v = tensors(T_q=5, T_k=5)
    u, alpha = att(q, k, v, causal=True)
    s = att.scores(q, k)  # (B, 5, 5)
    for t in range(5):
        a = torch.softmax(s[:, t, :t + 1], dim=-1)  # (B, t + 1): (7.20) over tau <= t
        torch.testing.assert_close(alpha[:, t, :t + 1], a)
        explicit = sum(a[:, tau, None] * v[:, tau] for tau in range(t + 1))
        torch.testing.assert_close(u[:, t], explicit)


def test_the_chapters_causal_form_with_fewer_outputs_uses_the_first_keys():
    """With T_out < T_in, query t sees keys 1, ..., t: causal attention on the first T_out."""
    q, k, v = tensors(T_q=3, T_k=5)
    u, _ = inner_product_attention(q, k[:, :3], v[:, :3], causal=True)
    s = q @ k.transpose(1, 2) / 2.0  # sqrt(m) = 2
    for t in range(3):
        a = torch.softmax(s[:, t, :t + 1], dim=-1)
        torch.testing.assert_close(u[:, t], (a[:, :, None] * v[:, :t + 1]).sum(1))


def test_score_parameters_have_the_chapters_shapes():
    m_q, m_k, m_tilde = 3, 5, 7
    general = Attention(m_q, m_k, "general")
    concat = Attention(m_q, m_k, "concat", attention_size=m_tilde)
    additive = Attention(m_q, m_k, "additive", attention_size=m_tilde)
    assert general.W_s.shape == (m_q, m_k)
    assert concat.W.shape == (m_tilde, m_q + m_k) and concat.w_s.shape == (m_tilde,)
    assert additive.W_sa.shape == (m_tilde, m_q) and additive.W_sb.shape == (m_tilde, m_k)
    assert additive.w_s.shape == (m_tilde,)


@pytest.mark.parametrize("score", SCORES)
def test_keys_projected_once_give_the_same_scores_and_outputs(score):
    """A decoder projects its keys once per sentence (`project_keys`); attending with them
    is the same computation as projecting inside every call."""
    q, k, v = tensors()
    att = module(score)
    projected = att.project_keys(k)
    assert torch.equal(att.scores(q, k, projected=projected), att.scores(q, k))
    for a, b in zip(att(q, k, v, projected=projected), att(q, k, v), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match=r"projected keys have shape \(2, 4, .*\(2, 5\)"):
        att(q, k, v, projected=projected[:, :4])
