"""Checkers for the exercises of the page on the LSTM (7.16)-(7.17) and the GRU (7.18)-(7.19)."""

import torch
from torch import nn

from seqlib.exercises.toolkit import (
    close,
    expect,
    expect_close,
    expect_tensor,
    name_mistake,
    passed,
    require_callable,
    run_attempt,
    seeded,
)
from seqlib.gated import LSTMCell

P, M, B = 3, 4, 5  # input features, hidden units (the chapter's m~), batch
TOL = dict(atol=1e-9, rtol=1e-6)  # float64 steps: round-off only


# ---------------------------------------------------------------------------------------------
# A peephole LSTM step


def _peephole_reference(cell, w_f, w_i, w_o, x, state, output_reads_new_c=True):
    """One step of the peephole LSTM: the gates of (7.17) with w * c added to their
    pre-activations (c^<t-1> for g_f and g_i, c^<t> for g_o), then (7.16)."""
    h, c = state
    g_i = torch.sigmoid(cell.block(0, x, h) + w_i * c)
    g_f = torch.sigmoid(cell.block(1, x, h) + w_f * c)
    c_tilde = torch.tanh(cell.block(2, x, h))
    c_new = g_f * c + g_i * c_tilde
    g_o = torch.sigmoid(cell.block(3, x, h) + w_o * (c_new if output_reads_new_c else c))
    return g_o * torch.tanh(c_new), c_new


def _step(attempt, x, state, cell, w_f, w_i, w_o, what):
    """Call the attempt and check the form of what it returns: (h, c), each (B, m~)."""
    result = run_attempt(attempt, x, state, cell, w_f, w_i, w_o, what=what,
                         returns=("h", "c"))
    for name, value in zip(("h", "c"), result, strict=True):
        expect_tensor(f"{what}: {name}", value, (B, M), dims="(B, m~)")
    return result


def check_peephole_lstm(attempt) -> None:
    """Check `attempt(x, state, cell, w_f, w_i, w_o) -> (h, c)`, one step of an LSTM with
    peephole connections: `cell` is a seqlib.gated.LSTMCell holding the matrices and
    biases of (7.16)-(7.17), w_f, w_i, w_o are (m~,) vectors, x is (B, p) and state is
    (h, c), each (B, m~). The forget and input gates add w_f * c^<t-1> and w_i * c^<t-1> to
    their pre-activations, the output gate adds w_o * c^<t>, the new cell state."""
    require_callable(attempt, "peephole_lstm_step(x, state, cell, w_f, w_i, w_o) -> (h, c)")
    generator = torch.Generator().manual_seed(716)
    with seeded(0):  # initial weights, replaced below: the caller's random numbers untouched
        cell = LSTMCell(P, M).double()
    with torch.no_grad():
        for weight in cell.parameters():
            weight.copy_(torch.rand(weight.shape, generator=generator, dtype=torch.float64)
                         - 0.5)
    x = torch.randn(B, P, generator=generator, dtype=torch.float64)
    state = (torch.randn(B, M, generator=generator, dtype=torch.float64) * 0.5,
             torch.randn(B, M, generator=generator, dtype=torch.float64) * 2)  # (h, c)
    w = {k: torch.randn(M, generator=generator, dtype=torch.float64) * 1.5 for k in "fio"}
    zero = torch.zeros(M, dtype=torch.float64)

    with torch.no_grad():
        # 1. Without peepholes the step is the chapter's LSTM.
        h, c = _step(attempt, x, state, cell, zero, zero, zero, "with w_f = w_i = w_o = 0")
        h_ref, c_ref = cell(x, state)
        expect(close(c, c_ref, **TOL),
               "with w_f = w_i = w_o = 0 the step must be the LSTM of (7.16)-(7.17) (seqlib's "
               "LSTMCell), but c^<t> differs: check the gate blocks (block k of W_hx, W_hh and "
               "b_h is cell.block(k, x, h), in the order i, f, c~, o)")
        expect(close(h, h_ref, **TOL),
               "with w_f = w_i = w_o = 0, c^<t> matches the LSTM of (7.16)-(7.17) but h^<t> "
               "does not: check the output gate (block 3) and h = g_o * S_Tanh(c^<t>)")

        # 2. One peephole at a time: which gate looks wrong.
        for gate, where in (("f", "c^<t-1>"), ("i", "c^<t-1>")):
            ws = {k: (w[k] if k == gate else zero) for k in "fio"}
            h, c = _step(attempt, x, state, cell, ws["f"], ws["i"], ws["o"],
                         f"with only w_{gate} nonzero")
            h_ref, c_ref = _peephole_reference(cell, ws["f"], ws["i"], ws["o"], x, state)
            other = {"f": "i", "i": "f"}[gate]
            swapped = {"f": zero, "i": zero, other: w[gate]}  # w_gate in the other gate
            _, c_swapped = _peephole_reference(cell, swapped["f"], swapped["i"], zero, x, state)
            name_mistake(f"with only w_{gate} nonzero, c^<t>", c, [(c_swapped, f"it is what "
                         f"w_{gate} gives in the g_{other} gate: w_f belongs to the forget gate, "
                         "w_i to the input gate")], **TOL)
            expect(close(c, c_ref, **TOL),
                   f"with only w_{gate} nonzero, c^<t> differs: check the peephole of g_{gate}, "
                   f"which adds w_{gate} * {where} (element-wise) to the gate's "
                   "pre-activation, inside the sigmoid")
            expect(close(h, h_ref, **TOL), f"with only w_{gate} nonzero, c^<t> matches but "
                                           f"h^<t> does not: w_{gate} should change h only "
                                           "through c^<t>")
        h, c = _step(attempt, x, state, cell, zero, zero, w["o"], "with only w_o nonzero")
        h_ref, c_ref = _peephole_reference(cell, zero, zero, w["o"], x, state)
        expect(close(c, c_ref, **TOL), "with only w_o nonzero, c^<t> differs: the output gate's "
                                       "peephole must not change the cell state, only g_o and h")
        h_old, _ = _peephole_reference(cell, zero, zero, w["o"], x, state,
                                       output_reads_new_c=False)
        name_mistake("with only w_o nonzero, h^<t>", h, [(h_old, "it is what you get when g_o "
                     "looks at the old cell state c^<t-1>: the output gate reads the new one, "
                     "c^<t>, computed first")], **TOL)
        expect(close(h, h_ref, **TOL), "with only w_o nonzero, c^<t> matches but h^<t> does "
                                       "not: the output gate adds w_o * c^<t> to its "
                                       "pre-activation")

        # 3. All three peepholes, over a few steps (the state carried).
        state_ref = state_att = state
        for t in range(4):
            x_t = torch.randn(B, P, generator=generator, dtype=torch.float64)
            state_att = _step(attempt, x_t, state_att, cell, w["f"], w["i"], w["o"],
                              f"step {t + 1} of a sequence")
            state_ref = _peephole_reference(cell, w["f"], w["i"], w["o"], x_t, state_ref)
            expect_close(f"h^<t> at step {t + 1} of a sequence", state_att[0], state_ref[0],
                         **TOL)
            expect_close(f"c^<t> at step {t + 1} of a sequence", state_att[1], state_ref[1],
                         **TOL)
    passed("the peephole LSTM step: equal to seqlib's LSTMCell without peepholes, each "
           "peephole in its gate, and four steps of a sequence")


# ---------------------------------------------------------------------------------------------
# PyTorch's GRU step


def _torch_gru_variants(cell: nn.GRUCell, x: torch.Tensor, h: torch.Tensor):
    """torch.nn.GRUCell's step h_new, and the usual mistakes, (h_new, message) pairs."""
    W_x = x @ cell.weight_ih.T + cell.bias_ih  # (B, 3 m): blocks r, z, n
    W_h = h @ cell.weight_hh.T + cell.bias_hh
    m = cell.hidden_size
    (x_r, x_z, x_n), (h_r, h_z, h_n) = W_x.split(m, -1), W_h.split(m, -1)
    b_hn = cell.bias_hh[2 * m:]
    r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)  # reset after the product, b_hn inside
    n_before = torch.tanh(x_n + (r * h) @ cell.weight_hh[2 * m:].T + b_hn)
    n_bias_outside = torch.tanh(x_n + r * (h_n - b_hn) + b_hn)
    r_swapped, z_swapped = z, r  # the blocks read in the wrong order
    n_swapped = torch.tanh(x_n + r_swapped * h_n)
    return (1 - z) * n + z * h, [
        (z * n + (1 - z) * h,
         "the update is the wrong way round: torch.nn.GRUCell keeps z of the old state, "
         "h' = (1 - z) * n + z * h, so its z is the chapter's 1 - g_u"),
        ((1 - z) * n_before + z * h,
         "you applied the reset gate before the product, W_hn (r * h), which is the chapter's "
         "form (7.18); torch.nn applies it after: r * (W_hn h + b_hn)"),
        ((1 - z) * n_bias_outside + z * h,
         "the reset gate must multiply b_hn too: torch.nn computes "
         "n = tanh(W_in x + b_in + r * (W_hn h + b_hn))"),
        ((1 - z_swapped) * n_swapped + z_swapped * h,
         "the first two blocks are swapped: the rows of weight_ih and weight_hh are the "
         "blocks r (reset), z (update), n (candidate), in that order"),
    ]


def check_pytorch_gru(attempt) -> None:
    """Check `attempt(x, h, cell) -> h_new`, one step of torch.nn.GRUCell computed from
    the cell's own weights (weight_ih, weight_hh, bias_ih, bias_hh) without calling it:
    x (B, p), h and h_new (B, m~)."""
    require_callable(attempt, "torch_gru_step(x, h, cell) -> h_new")
    generator = torch.Generator().manual_seed(718)
    with seeded(0):  # initial weights, replaced below: the caller's random numbers untouched
        cell = nn.GRUCell(P, M).double()
    with torch.no_grad():
        for weight in cell.parameters():
            weight.copy_(torch.rand(weight.shape, generator=generator, dtype=torch.float64)
                         * 2 - 1)
    h = torch.randn(B, M, generator=generator, dtype=torch.float64)
    for t in range(3):
        x = torch.randn(B, P, generator=generator, dtype=torch.float64)
        with torch.no_grad():
            expected = cell(x, h)
            right, mistakes = _torch_gru_variants(cell, x, h)
        assert close(right, expected, **TOL)  # the checker's own formula
        what = f"h' at step {t + 1}"
        got = run_attempt(attempt, x, h, cell, what=what)
        expect_tensor(what, got, (B, M), dims="(B, m~)")
        if not close(got, expected, **TOL):
            name_mistake(f"{what} differs from torch.nn.GRUCell", got, mistakes, **TOL)
            expect_close(what, got, expected, **TOL)
        h = expected
    passed("one step of torch.nn.GRUCell from its weights: reset gate after the product, "
           "z = 1 - g_u, over three steps")
