"""Positional embeddings (7.28)-(7.30), positions t = 1, ..., T: the sinusoidal table
against its formula, one-hot positions and the chapter's toy, the joint learned embedding
(7.28), added and appended embeddings, and why they are needed: self-attention without
positions is permutation-equivariant."""

import math

import pytest
import torch

from seqlib.positional import (
    JointPositionalEmbedding,
    PositionalEmbedding,
    one_hot_positions,
    sinusoidal_table,
)
from seqlib.self_attention import MultiHeadAttention, self_attention


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64)


def test_sinusoidal_table_is_the_formula_7_29_from_t_1():
    table = sinusoidal_table(50, 6)
    assert table.shape == (50, 6) and table.dtype == torch.float32
    for t in [1, 2, 4, 8, 50]:  # row t - 1 is r^<t>
        for i in range(3):  # r_{2i} = sin(t / M^(2i/p_e)), r_{2i+1} = cos(t / M^(2i/p_e))
            angle = t / 10_000 ** (2 * i / 6)
            assert table[t - 1, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-7)
            assert table[t - 1, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-7)
    assert table[0, :2].tolist() == pytest.approx([math.sin(1), math.cos(1)])  # r^<1>
    assert sinusoidal_table(3, 5, M=2.0)[2, 4].item() == pytest.approx(
        math.sin(3 / 2 ** (4 / 5)), abs=1e-7)  # odd p_e: the last column is a sine
    with pytest.raises(ValueError, match="M must be a number > 1, got 1"):
        sinusoidal_table(3, 4, M=1)


def test_sinusoidal_rows_are_distinct_and_bounded():
    table = sinusoidal_table(200, 8)
    distances = torch.cdist(table.double(), table.double())  # (200, 200)
    assert (distances + torch.eye(200, dtype=torch.float64) > 1e-3).all()
    assert table.abs().max() <= 1
    norms = table.norm(dim=1)  # each sin/cos pair has norm 1: |r^<t>| = sqrt(p_e / 2)
    torch.testing.assert_close(norms, torch.full((200,), 2.0))


def test_one_hot_positions_tell_equal_inputs_apart():
    # the chapter's example: p = 2, T = 4 with x^<1> = x^<4> = (0.2, 1.3)
    x = torch.tensor([[[0.2, 1.3], [0.5, -1.0], [3.0, 0.0], [0.2, 1.3]]])
    assert torch.equal(x[0, 0], x[0, 3])
    extended = one_hot_positions(x)
    assert extended.shape == (1, 4, 6)  # p~ = p + T
    assert torch.equal(extended[0, 0], torch.tensor([0.2, 1.3, 1, 0, 0, 0]))
    assert torch.equal(extended[0, 3], torch.tensor([0.2, 1.3, 0, 0, 0, 1]))
    assert not torch.equal(extended[0, 0], extended[0, 3])
    assert torch.equal(extended[..., :2], x)
    assert torch.equal(extended[0, :, 2:], torch.eye(4))
    u, _ = self_attention(x, causal=False)  # no positions: equal inputs, equal outputs
    assert torch.equal(u[0, 0], u[0, 3])
    u, _ = self_attention(extended, causal=False)
    assert not torch.allclose(u[0, 0], u[0, 3])
    with pytest.raises(ValueError, match="x must be"):
        one_hot_positions(torch.ones(4, 2))


@pytest.mark.parametrize("kind", ["sinusoidal", "learned"])
def test_add_and_append(kind):
    x = randn(2, 5, 6)
    add = PositionalEmbedding(10, 6, kind=kind)
    out = add(x)
    assert out.shape == (2, 5, 6) and add.output_size == 6 and out.dtype == torch.float64
    table = add.table.detach().double()
    torch.testing.assert_close(out, x + table[:5])
    torch.testing.assert_close(add(x[:, 2:], offset=3), x[:, 2:] + table[3:6])
    torch.testing.assert_close(add(x[:, :1], offset=9), x[:, :1] + table[9:])
    append = PositionalEmbedding(10, 6, kind=kind, combine="append", p_e=4)
    out = append(x, offset=2)
    assert out.shape == (2, 5, 10) and append.output_size == 10
    assert torch.equal(out[..., :6], x)
    torch.testing.assert_close(out[..., 6:], append.table.detach().double()[2:7].expand(2, 5, 4))
    if kind == "sinusoidal":
        torch.testing.assert_close(table, sinusoidal_table(10, 6).double())
        assert not list(add.parameters()) and "table" not in add.state_dict()


def test_learned_table_is_a_trained_parameter():
    emb = PositionalEmbedding(7, 3, kind="learned")
    (parameter,) = emb.parameters()
    assert parameter is emb.table and parameter.shape == (7, 3) and parameter.requires_grad
    emb(torch.ones(2, 4, 3), offset=1).sum().backward()
    expected = torch.zeros(7, 3)
    expected[1:5] = 2.0  # positions 1..4, each used by 2 sequences
    assert torch.equal(parameter.grad, expected)
    assert PositionalEmbedding(7, 3, kind="learned", combine="append", p_e=5).table.shape \
        == (7, 5)


def test_joint_embedding_is_the_formula_7_28():
    torch.manual_seed(0)
    emb = JointPositionalEmbedding(3, 6).double()  # p = 3, T = 6, p~ = p
    assert {n: tuple(w.shape) for n, w in emb.named_parameters()} == {
        "W_1": (3, 3), "W_2": (3, 3), "W_3": (3, 6), "b": (3,)}
    with torch.no_grad():
        emb.b.normal_()
    x = randn(2, 4, 3)
    out = emb(x, offset=1)  # positions 2, ..., 5
    assert out.shape == (2, 4, 3) and emb.output_size == 3
    for b in range(2):
        for t in range(2, 6):
            e_t = torch.zeros(6, dtype=torch.float64)
            e_t[t - 1] = 1.0  # the one-hot position e_t
            expected = emb.W_1 @ torch.relu(emb.W_2 @ x[b, t - 2] + emb.W_3 @ e_t + emb.b)
            torch.testing.assert_close(out[b, t - 2], expected)
    wide = JointPositionalEmbedding(3, 6, p_tilde=5)
    assert wide(torch.ones(1, 6, 3)).shape == (1, 6, 5) and wide.W_2.shape == (5, 3)
    out.sum().backward()  # every matrix is trained
    assert all(w.grad is not None and w.grad.abs().sum() > 0 for w in emb.parameters())
    with pytest.raises(ValueError, match="positions 6 to 7 are past the last position T=6"):
        emb(x[:, :2], offset=5)
    with pytest.raises(ValueError, match="x has 4 features, expected 3"):
        emb(randn(1, 2, 4))
    with pytest.raises(ValueError, match="p_tilde"):
        JointPositionalEmbedding(3, 6, p_tilde=0)


def test_joint_embedding_tells_equal_inputs_apart():
    torch.manual_seed(0)
    emb = JointPositionalEmbedding(2, 4)
    with torch.no_grad():
        emb.W_3.fill_(0.0)  # without W_3 e_t, x^<1> = x^<4> gives x~^<1> = x~^<4>
    x = torch.tensor([[[0.2, 1.3], [0.5, -1.0], [3.0, 0.0], [0.2, 1.3]]])
    assert torch.equal(emb(x)[0, 0], emb(x)[0, 3])
    torch.manual_seed(0)
    emb = JointPositionalEmbedding(2, 4)
    assert not torch.allclose(emb(x)[0, 0], emb(x)[0, 3])


def test_errors():
    emb = PositionalEmbedding(4, 3)
    with pytest.raises(ValueError, match="positions 1 to 5 are past the last position max_len=4"):
        emb(torch.zeros(1, 5, 3))
    with pytest.raises(ValueError, match="positions 4 to 5 .* max_len=4"):
        emb(torch.zeros(1, 2, 3), offset=3)
    with pytest.raises(ValueError, match="offset"):
        emb(torch.zeros(1, 2, 3), offset=-1)
    with pytest.raises(ValueError, match="x has 2 features, expected 3"):
        emb(torch.zeros(1, 2, 2))
    with pytest.raises(ValueError, match="p_e=5 and p=3"):
        PositionalEmbedding(4, 3, p_e=5)
    with pytest.raises(ValueError, match="kind"):
        PositionalEmbedding(4, 3, kind="rotary")
    with pytest.raises(ValueError, match="combine"):
        PositionalEmbedding(4, 3, combine="concat")
    with pytest.raises(ValueError, match="max_len"):
        PositionalEmbedding(0, 3)
    with pytest.raises(ValueError, match="p_e"):
        sinusoidal_table(3, 0)


def test_self_attention_without_positions_is_permutation_equivariant():
    torch.manual_seed(0)
    att = MultiHeadAttention(6, 2).double()
    x = randn(2, 5, 6)
    perm = torch.tensor([3, 0, 4, 1, 2])
    u, _ = att(x)
    torch.testing.assert_close(att(x[:, perm])[0], u[:, perm], atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(self_attention(x[:, perm], causal=False)[0],
                               self_attention(x, causal=False)[0][:, perm],
                               atol=1e-12, rtol=1e-12)
    for positions in (PositionalEmbedding(5, 6), PositionalEmbedding(5, 6, kind="learned"),
                      JointPositionalEmbedding(6, 5).double(), one_hot_positions):
        features = 11 if positions is one_hot_positions else 6
        att = MultiHeadAttention(features, 1).double()
        u, _ = att(positions(x))
        u_perm, _ = att(positions(x[:, perm]))
        assert not torch.allclose(u_perm[..., :6], u[:, perm, :6], atol=1e-3)


def test_the_first_token_gets_r_1():
    x = torch.zeros(1, 3, 4)
    r = PositionalEmbedding(8, 4)(x)[0]  # (T, p): r^<1>, r^<2>, r^<3>
    for t in (1, 2, 3):
        expected = [math.sin(t), math.cos(t), math.sin(t / 100), math.cos(t / 100)]
        assert r[t - 1].tolist() == pytest.approx(expected, abs=1e-7)
    later = PositionalEmbedding(8, 4)(x[:, :1], offset=2)[0, 0]  # one token at t = 3
    assert later.tolist() == pytest.approx(r[2].tolist())
