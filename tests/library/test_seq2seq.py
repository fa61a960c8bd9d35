"""Encoder-decoder models of Fig. 7.9 (a), (b) and Fig. 7.10: shapes, parameter counts,
padding invariance, input reversal, step-by-step decoding equal to teacher forcing, the
masked loss, freezing, clear errors."""

import pytest
import torch
import torch.nn.functional as F

from seqlib.checks import check_source
from seqlib.gated import GRU, LSTM
from seqlib.rnn import RNN
from seqlib.seq2seq import (
    AttentionSeq2Seq,
    Seq2Seq,
    freeze,
    masked_cross_entropy,
    unfreeze,
)
from seqlib.text import pad_batch, reverse_padded
from seqlib.utils import count_parameters

V_SRC, V_TGT, E, M = 11, 13, 5, 7
UNITS = ["rnn", "lstm", "gru"]
GATES = {"rnn": 1, "gru": 3, "lstm": 4}
MODELS = {
    "fig7.9a": lambda unit: Seq2Seq(V_SRC, V_TGT, E, M, unit=unit),
    "fig7.9b": lambda unit: Seq2Seq(V_SRC, V_TGT, E, M, unit=unit, feed_code=True),
    "reversed-2layers": lambda unit: Seq2Seq(V_SRC, V_TGT, E, M, unit=unit, num_layers=2,
                                             reverse_source=True),
    "fig7.10": lambda unit: AttentionSeq2Seq(V_SRC, V_TGT, E, M, unit=unit, encoder_size=6),
    "fig7.10-deep": lambda unit: AttentionSeq2Seq(V_SRC, V_TGT, E, M, unit=unit, encoder_size=6,
                                                  deep_output=True),
}


def make(name, unit, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return MODELS[name](unit).to(dtype)


def batch(lengths=(4, 2, 3), tgt_lengths=(3, 5, 1), seed=0):
    """Random source and target sentences (ids 4+), padded; tgt_in starts with <start>."""
    gen = torch.Generator().manual_seed(seed)
    src = [torch.randint(4, V_SRC, (n,), generator=gen).tolist() for n in lengths]
    tgt = [[2] + torch.randint(4, V_TGT, (n,), generator=gen).tolist() for n in tgt_lengths]
    src, src_mask = pad_batch(src)
    tgt_in, tgt_mask = pad_batch(tgt)
    return src, src_mask, tgt_in, tgt_mask


def pad_more(ids, mask, extra):
    """The same batch with `extra` more padded columns."""
    return (torch.cat([ids, ids.new_zeros(ids.shape[0], extra)], dim=1),
            torch.cat([mask, mask.new_zeros(mask.shape[0], extra)], dim=1))


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("name", MODELS)
def test_shapes(name, unit):
    model = make(name, unit)
    src, src_mask, tgt_in, _ = batch()
    assert model(src, src_mask, tgt_in).shape == (3, 6, V_TGT)


@pytest.mark.parametrize("unit", UNITS)
def test_parameter_counts(unit):
    G = GATES[unit]

    def unit_count(p, m):
        return G * (m * p + m * m + m)  # W_hx, W_hh, b_h

    enc = V_SRC * E + unit_count(E, M)
    a = V_TGT * E + unit_count(E, M) + M * V_TGT + V_TGT
    assert count_parameters(make("fig7.9a", unit)) == enc + a
    b = V_TGT * E + unit_count(E + M, M) + 2 * M * V_TGT + V_TGT  # z in input and output
    assert count_parameters(make("fig7.9b", unit)) == enc + b
    n = 6  # encoder size per direction; keys v^<t> have 2 n features
    enc = V_SRC * E + 2 * unit_count(E, n)
    dec = (V_TGT * E + (n * M + M)  # embedding, s^<0> = tanh(W_init h_r^<1> + b_init)
           + (M * M + M * 2 * n + M)  # additive score: W_sa, W_sb, w_s with m~ = M
           + unit_count(E + 2 * n, M))  # f_decoder reads [e^<t-1>; u^<t>]
    out = M * V_TGT + V_TGT  # f_decoder-out reads s^<t> alone, (7.22)
    assert count_parameters(make("fig7.10", unit)) == enc + dec + out
    deep = (M + 2 * n + E) * V_TGT + V_TGT  # the deep output reads [s^<t>; u^<t>; e^<t-1>]
    assert count_parameters(make("fig7.10-deep", unit)) == enc + dec + deep


@pytest.mark.parametrize("unit", [RNN, LSTM, GRU], ids=lambda u: u.__name__)
@pytest.mark.parametrize("layers, bidirectional", [(1, False), (2, True)])
def test_a_mask_without_padding_changes_nothing(unit, layers, bidirectional):
    torch.manual_seed(0)
    recurrent = unit(4, 5, num_layers=layers, bidirectional=bidirectional)
    x = torch.randn(3, 6, 4)
    out, last = recurrent.recur(x, mask=torch.ones(3, 6, dtype=torch.bool))
    with pytest.raises(TypeError, match="mask must be a bool tensor"):
        recurrent.recur(x, mask=torch.ones(3, 6))
    with pytest.raises(ValueError, match=r"mask has shape \(3, 5\), expected \(3, 6\)"):
        recurrent.recur(x, mask=torch.ones(3, 5, dtype=torch.bool))
    ref_out, ref_last = recurrent.recur(x)
    torch.testing.assert_close(out, ref_out)
    for a, b in zip(last, ref_last, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_code_is_the_state_after_the_last_real_token(unit, bidirectional):
    model = make("fig7.10" if bidirectional else "reversed-2layers", unit)
    src, src_mask, _, _ = batch(lengths=(5, 2, 3))
    v, code = model.encoder(src, src_mask)
    for b, n in enumerate(src_mask.sum(1).tolist()):
        v_alone, code_alone = model.encoder(src[b:b + 1, :n], src_mask[b:b + 1, :n])
        torch.testing.assert_close(v[b:b + 1, :n], v_alone)
        for state, state_alone in zip(code, code_alone, strict=True):  # h (and c)
            torch.testing.assert_close(state[:, b:b + 1], state_alone)


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("name", MODELS)
def test_extra_padding_changes_nothing(name, unit):
    model = make(name, unit)
    src, src_mask, tgt_in, tgt_mask = batch()
    logits = model(src, src_mask, tgt_in)
    more = model(*pad_more(src, src_mask, 3), pad_more(tgt_in, tgt_mask, 2)[0])
    torch.testing.assert_close(more[:, :6][tgt_mask], logits[tgt_mask])
    for b in range(3):  # each sentence alone, without any padding
        n, t = src_mask[b].sum(), tgt_mask[b].sum()
        alone = model(src[b:b + 1, :n], src_mask[b:b + 1, :n], tgt_in[b:b + 1, :t])
        torch.testing.assert_close(alone[0], logits[b, :t])


@pytest.mark.parametrize("unit", UNITS)
def test_reversed_model_reads_the_reversed_sentence(unit):
    reversed_model = make("reversed-2layers", unit)
    plain = make("reversed-2layers", unit)
    plain.reverse_source = False  # the same weights, reading the sentence as given
    src, src_mask, tgt_in, _ = batch()
    torch.testing.assert_close(reversed_model(src, src_mask, tgt_in),
                               plain(reverse_padded(src, src_mask.sum(1)), src_mask, tgt_in))
    assert not torch.allclose(reversed_model(src, src_mask, tgt_in), plain(src, src_mask, tgt_in))


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("name", MODELS)
def test_step_by_step_equals_teacher_forcing(name, unit):
    model = make(name, unit, dtype=torch.float64)
    src, src_mask, tgt_in, _ = batch()
    logits = model(src, src_mask, tgt_in)
    state = model.start(src, src_mask)
    for t in range(tgt_in.shape[1]):
        step_logits, state = model.step(tgt_in[:, t], state)
        torch.testing.assert_close(step_logits, logits[:, t])


@pytest.mark.parametrize("name", ["fig7.9b", "fig7.10", "fig7.10-deep"])
def test_reorder_selects_and_repeats_batch_entries(name):
    model = make(name, "lstm", dtype=torch.float64)
    src, src_mask, tgt_in, _ = batch()
    index = torch.tensor([2, 0, 2])
    state = model.reorder(model.start(src, src_mask), index)
    picked = model.start(src[index], src_mask[index])
    for t in range(3):
        logits, state = model.step(tgt_in[index, t], state)
        ref, picked = model.step(tgt_in[index, t], picked)
        torch.testing.assert_close(logits, ref)


@pytest.mark.parametrize("deep_output", [False, True])
def test_the_output_reads_what_the_option_says(deep_output):
    """(7.22): y_hat^<t> = f_decoder-out(s^<t>), or the deep output of [s^<t>; u^<t>; e^<t-1>]."""
    model = make("fig7.10-deep" if deep_output else "fig7.10", "gru", dtype=torch.float64)
    src, src_mask, tgt_in, _ = batch()
    state = model.start(src, src_mask)
    logits, after = model.step(tgt_in[:, 0], state)
    s = after["hidden"][0][-1]  # s^<1>
    u = after["weights"][:, None] @ state["keys"]  # u^<1> = sum_tau alpha^<1>_tau v^<tau>
    reads = torch.cat([s, u[:, 0], model.decoder.embedding(tgt_in[:, 0])], -1) if deep_output \
        else s
    torch.testing.assert_close(logits, model.decoder.output(reads))


def test_the_decoder_step_by_hand():
    """(7.22) with the query z_q = s^<t-1> and keys and values v^<tau> = [h_f^<tau>; h_r^<tau>]."""
    model = make("fig7.10", "gru", dtype=torch.float64)
    src, src_mask, tgt_in, _ = batch(lengths=(4,), tgt_lengths=(3,))
    dec = model.decoder
    x = model.encoder.embedding(src)  # (1, 4, E)
    h_f, h_r = model.encoder.recurrent.cells  # forward and reverse GRU cells
    forward, reverse, h = [], [None] * 4, x.new_zeros(1, 6)
    for t in range(4):
        h = h_f(x[:, t], h)
        forward.append(h)
    h = x.new_zeros(1, 6)
    for t in reversed(range(4)):
        h = h_r(x[:, t], h)
        reverse[t] = h
    v = torch.stack([torch.cat([f, r], -1) for f, r in zip(forward, reverse, strict=True)], 1)
    s = torch.tanh(dec.initial(reverse[0]))  # s^<0>
    logits = model(src, src_mask, tgt_in)
    for t in range(tgt_in.shape[1]):
        alpha = torch.softmax(dec.attention.scores(s[:, None], v)[:, 0], -1)  # (7.20)
        u = (alpha[:, :, None] * v).sum(1)  # (7.21)
        s = dec.recurrent.cells[0](torch.cat([dec.embedding(tgt_in[:, t]), u], -1), s)
        torch.testing.assert_close(logits[:, t], dec.output(s))


def test_deep_output_must_be_a_bool():
    with pytest.raises(TypeError, match="deep_output must be a bool"):
        AttentionSeq2Seq(V_SRC, V_TGT, E, M, deep_output="yes")


@pytest.mark.parametrize("score", ["inner", "general", "concat", "additive"])
def test_attention_weights_for_plotting(score):
    torch.manual_seed(0)
    model = AttentionSeq2Seq(V_SRC, V_TGT, E, 8, encoder_size=4, score=score)
    src, src_mask, tgt_in, _ = batch()
    logits, weights = model(src, src_mask, tgt_in, return_attention=True)
    assert logits.shape == (3, 6, V_TGT) and weights.shape == (3, 6, 4)  # (B, T, S)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 6, dtype=weights.dtype))
    assert (weights.masked_select(~src_mask[:, None, :]) == 0).all()
    assert (weights.masked_select(src_mask[:, None, :]) > 0).all()


def test_loss_ignores_padded_positions():
    _, _, tgt_in, tgt_mask = batch()
    targets = tgt_in.masked_fill(~tgt_mask, 0)  # any ids, padded with 0
    real = targets != 0
    logits = torch.randn(3, 6, V_TGT, generator=torch.Generator().manual_seed(0))
    loss = masked_cross_entropy(logits, targets)
    changed = logits.clone()
    changed[~real] = torch.randn(int((~real).sum()), V_TGT) * 10
    torch.testing.assert_close(masked_cross_entropy(changed, targets), loss)
    log_p = torch.log_softmax(logits, -1).gather(-1, targets[..., None])[..., 0]  # (B, T)
    torch.testing.assert_close(loss, -log_p[real].mean())  # mean over real tokens
    assert not torch.isclose(loss, -log_p.mean())  # which differs from the mean over all
    with pytest.raises(ValueError, match="every target is padding"):
        masked_cross_entropy(logits, torch.zeros_like(targets))


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.37, 0.9])
def test_label_smoothing_equals_torch_and_its_formula(epsilon):
    _, _, tgt_in, tgt_mask = batch()
    targets = tgt_in.masked_fill(~tgt_mask, 0)
    logits = torch.randn(3, 6, V_TGT, dtype=torch.float64,
                         generator=torch.Generator().manual_seed(1), requires_grad=True)
    loss = masked_cross_entropy(logits, targets, label_smoothing=epsilon)
    torch_loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=0,
                                 label_smoothing=epsilon)
    torch.testing.assert_close(loss, torch_loss, rtol=0, atol=1e-12)
    grad, = torch.autograd.grad(loss, logits)
    torch_grad, = torch.autograd.grad(torch_loss, logits)
    torch.testing.assert_close(grad, torch_grad, rtol=0, atol=1e-12)
    # the smoothed target: (1 - epsilon) one-hot + epsilon / V, against log p, real tokens
    real = targets != 0
    target = (1 - epsilon) * F.one_hot(targets[real], V_TGT).double() + epsilon / V_TGT
    by_hand = -(target * torch.log_softmax(logits[real], -1)).sum(-1).mean()
    torch.testing.assert_close(loss, by_hand, rtol=0, atol=1e-12)


@pytest.mark.parametrize("epsilon", [-0.1, 1.0, 2])
def test_label_smoothing_out_of_range_is_named(epsilon):
    logits, targets = torch.zeros(1, 2, 3), torch.ones(1, 2, dtype=torch.long)
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\), got"):
        masked_cross_entropy(logits, targets, label_smoothing=epsilon)


@pytest.mark.parametrize("part", ["encoder", "decoder"])
def test_frozen_parameters_get_no_gradient_and_do_not_move(part):
    model = make("fig7.10", "gru")
    frozen = getattr(model, part)
    assert freeze(frozen) is frozen
    assert count_parameters(model, trainable_only=True) == (count_parameters(model)
                                                            - count_parameters(frozen))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.1)
    src, src_mask, tgt_in, tgt_mask = batch()
    loss = masked_cross_entropy(model(src, src_mask, tgt_in), tgt_in.masked_fill(~tgt_mask, 0))
    loss.backward()
    optimizer.step()
    for name, p in model.named_parameters():
        if name.startswith(part):
            assert p.grad is None and torch.equal(p, before[name]), name
        elif p.grad is not None and p.grad.abs().sum() > 0:
            assert not torch.equal(p, before[name]), name
    assert unfreeze(frozen) is frozen
    assert all(p.requires_grad for p in model.parameters())


def test_clear_errors():
    model = make("fig7.9a", "gru")
    src, src_mask, tgt_in, _ = batch()
    with pytest.raises(ValueError, match="unit must be one of"):
        Seq2Seq(V_SRC, V_TGT, E, M, unit="transformer")
    with pytest.raises(ValueError, match="padding at the end"):
        model(src, src_mask.flip(1), tgt_in)
    empty = src_mask.clone()
    empty[1] = False
    with pytest.raises(ValueError, match="source sentence 1 is empty"):
        model(src, empty, tgt_in)
    with pytest.raises(ValueError, match="source batch is empty"):
        check_source(src[:, :0], src_mask[:, :0])
    with pytest.raises(ValueError, match=r"src must lie in \[0, 11\)"):
        model(src + V_SRC, src_mask, tgt_in)
    with pytest.raises(ValueError, match=r"tgt_in must lie in \[0, 13\)"):
        model(src, src_mask, tgt_in + V_TGT)
    with pytest.raises(ValueError, match="tgt_in has shape"):
        model(src, src_mask, tgt_in[:2])
    with pytest.raises(TypeError, match="bool"):
        model(src, src_mask.long(), tgt_in)
    with pytest.raises(TypeError, match="integer token ids"):
        model(src.float(), src_mask, tgt_in)
    with pytest.raises(ValueError,
                       match=r"of one size, got hidden_size=\d+ and 2 \* encoder_size="):
        AttentionSeq2Seq(V_SRC, V_TGT, E, M, score="inner")
