"""Positional embeddings (7.28)-(7.30): the sinusoidal table against its formula, one-hot
positions, added and appended embeddings, and why they are needed: self-attention without
positions is permutation-equivariant."""

import math

import pytest
import torch

from seqlib.positional import PositionalEmbedding, one_hot_positions, sinusoidal_table
from seqlib.self_attention import MultiHeadAttention, self_attention


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64)


def test_sinusoidal_table_is_the_formula_7_29():
    table = sinusoidal_table(50, 6)
    assert table.shape == (50, 6) and table.dtype == torch.float32
    for t, j in [(0, 0), (0, 1), (1, 0), (1, 1), (3, 2), (3, 3), (7, 4), (7, 5), (49, 5)]:
        if j % 2 == 0:
            expected = math.sin(t / 10000 ** (j / 6))
        else:
            expected = math.cos(t / 10000 ** ((j - 1) / 6))
        assert table[t, j].item() == pytest.approx(expected, abs=1e-7), (t, j)
    assert table[0].tolist() == [0, 1, 0, 1, 0, 1]  # sin 0 = 0, cos 0 = 1
    assert sinusoidal_table(3, 5, base=2.0)[2, 2].item() == pytest.approx(
        math.sin(2 / 2 ** (2 / 5)), abs=1e-7)  # odd p_e: the last column is a sine


def test_sinusoidal_rows_are_distinct_and_bounded():
    table = sinusoidal_table(200, 8)
    distances = torch.cdist(table.double(), table.double())  # (200, 200)
    assert (distances + torch.eye(200, dtype=torch.float64) > 1e-3).all()
    assert table.abs().max() <= 1
    norms = table.norm(dim=1)  # each sin/cos pair has norm 1: |r^<t>| = sqrt(p_e / 2)
    torch.testing.assert_close(norms, torch.full((200,), 2.0))


def test_one_hot_positions_tell_equal_inputs_apart():
    # the chapter's example: p = 2, T = 4 with x^<1> = x^<4>
    x = torch.tensor([[[1.0, 2.0], [0.5, -1.0], [3.0, 0.0], [1.0, 2.0]]])
    assert torch.equal(x[0, 0], x[0, 3])
    extended = one_hot_positions(x)
    assert extended.shape == (1, 4, 6)
    assert torch.equal(extended[0, 0], torch.tensor([1.0, 2.0, 1, 0, 0, 0]))
    assert torch.equal(extended[0, 3], torch.tensor([1.0, 2.0, 0, 0, 0, 1]))
    assert not torch.equal(extended[0, 0], extended[0, 3])
    assert torch.equal(extended[..., :2], x)
    assert torch.equal(extended[0, :, 2:], torch.eye(4))
    u, _ = self_attention(x)  # without positions, equal inputs give equal outputs
    assert torch.equal(u[0, 0], u[0, 3])
    u, _ = self_attention(extended)
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


def test_errors():
    emb = PositionalEmbedding(4, 3)
    with pytest.raises(ValueError, match="max_len=4"):
        emb(torch.zeros(1, 5, 3))
    with pytest.raises(ValueError, match="max_len=4"):
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
    torch.testing.assert_close(self_attention(x[:, perm])[0], self_attention(x)[0][:, perm],
                               atol=1e-12, rtol=1e-12)
    for positions in (PositionalEmbedding(5, 6), PositionalEmbedding(5, 6, kind="learned"),
                      one_hot_positions):
        features = 11 if positions is one_hot_positions else 6
        att = MultiHeadAttention(features, 1).double()
        u, _ = att(positions(x))
        u_perm, _ = att(positions(x[:, perm]))
        assert not torch.allclose(u_perm[..., :6], u[:, perm, :6], atol=1e-3)
