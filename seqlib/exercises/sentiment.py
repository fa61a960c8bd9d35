"""Checkers for the exercises of the sentiment chapter (many-to-one, Fig. 7.1 (b)).

- `check_masked_mean`: the mean of a padded batch of vectors over each sentence's real
  tokens only;
- `check_bidirectional_ends`: the sentence vector [h_f^<T_i>; h_r^<1>] of a bidirectional
  unit (7.14) on a padded batch, each direction read at its own sentence's ends.

Each checker pads its batches with junk (large values at the padded positions) and pads the
same sentences to two different lengths: an answer that lets the padding in cannot pass.
Tensors are (batch, time, features); masks are bool (batch, time), True at real tokens, as
seqlib.text.pad_batch makes them.
"""

import torch

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
from seqlib.gated import GRU, LSTM
from seqlib.text import reverse_padded

LENGTHS = (7, 4, 1, 5)  # T_i of the checkers' sentences: one full row, one of one token
TOL = dict(atol=1e-8, rtol=1e-5)  # float64 vectors: round-off only


def _padded_batch(features: int, T: int, generator: torch.Generator):
    """Vectors (B, T, features) whose real tokens are the same for any T >= max(LENGTHS)
    and whose padded positions hold junk (values near 100), and the mask (B, T)."""
    lengths = torch.tensor(LENGTHS)
    real = torch.randn(len(LENGTHS), max(LENGTHS), features, generator=generator,
                       dtype=torch.float64)
    z = 100 + torch.randn(len(LENGTHS), T, features, generator=generator, dtype=torch.float64)
    mask = torch.arange(T) < lengths[:, None]  # (B, T) bool, True at real tokens
    z[:, :max(LENGTHS)] = torch.where(mask[:, :max(LENGTHS), None], real,
                                      z[:, :max(LENGTHS)])
    return z, mask, lengths


def check_masked_mean(attempt) -> None:
    """Check `attempt(z, mask) -> (B, d)`: for vectors z (B, T, d) of a padded batch and its
    bool mask (B, T) (True at real tokens), the mean of each row's vectors over its real
    tokens only, (1 / T_i) sum_{t <= T_i} z^<t>, whatever the padding holds and however far
    the batch is padded."""
    require_callable(attempt, "masked_mean(z, mask) -> (B, d)")
    for T in (7, 10):  # the same sentences, padded to two lengths
        generator = torch.Generator().manual_seed(0)
        z, mask, lengths = _padded_batch(3, T, generator)
        given_z, given_mask = z.clone(), mask.clone()
        what = f"the masked mean (z padded to T = {T})"
        got = run_attempt(attempt, given_z, given_mask, what=what)
        expect(torch.equal(given_z, z) and torch.equal(given_mask, mask),
               "your function changed z or mask in place")
        expected = (z * mask[..., None]).sum(1) / lengths[:, None]  # (B, d)
        expect_tensor(f"{what}: the result", got, expected.shape, dims="(B, d)",
                      why="one vector per sentence")
        if not close(got, expected, **TOL):
            name_mistake(what, got, [
                (z.mean(1), "you averaged over every position, padding included: leave the "
                 "padded positions out of the sum and divide by each sentence's own number of "
                 "tokens T_i"),
                ((z * mask[..., None]).sum(1) / T, f"the padding is left out of the sum, but "
                 f"you divided by T = {T}, the padded length; divide by each sentence's own "
                 "number of tokens T_i (mask.sum(1))"),
                (z.sum(1) / lengths[:, None], "you divided by T_i, but the padded positions' "
                 "vectors entered the sum: zero them first (multiply z by the mask)"),
            ], **TOL)
            expect_close(what, got, expected, atol=1e-8)
    passed("the mean over each sentence's real tokens, unchanged by junk in the padding and "
           "by padding the batch further")


def _units(p: int, m: int):
    with seeded(0):  # seeded weights, the caller's random state untouched
        return [(LSTM(p, m).double(), LSTM(p, m).double(), "LSTM"),
                (GRU(p, m).double(), GRU(p, m).double(), "GRU")]


def check_bidirectional_ends(attempt) -> None:
    """Check `attempt(forward_unit, reverse_unit, x, mask) -> (B, 2 m~)`: for word vectors x
    (B, T, p) of a padded batch with its bool mask (B, T), and two one-directional units
    of seqlib.gated (called as unit(x) -> (outputs (B, T, m~), last state)), the sentence
    vector [h_f^<T_i>; h_r^<1>] of (7.14): the forward unit's state after reading sentence
    i's T_i words in order, then the reverse unit's state after reading them from the last
    word back to the first. Neither may see the padding."""
    require_callable(attempt, "bidirectional_ends(forward_unit, reverse_unit, x, mask) -> "
                     "(B, 2 m~)")
    p, m = 3, 4
    for forward_unit, reverse_unit, name in _units(p, m):
        for T in (7, 10):  # the same sentences, padded to two lengths
            generator = torch.Generator().manual_seed(1)
            x, mask, lengths = _padded_batch(p, T, generator)
            last = torch.arange(len(lengths)), lengths - 1
            with torch.no_grad():
                H_f = forward_unit(x)[0]  # (B, T, m~)
                H_r = reverse_unit(reverse_padded(x, lengths))[0]  # (B, T, m~)
            h_f, h_r = H_f[last], H_r[last]  # h_f^<T_i>, h_r^<1>: (B, m~) each
            what = f"{name} units, a batch padded to T = {T}"
            got = run_attempt(attempt, forward_unit, reverse_unit, x.clone(), mask.clone(),
                              what=what)
            expect_tensor(f"{what}: the result", got, (len(lengths), 2 * m), dims="(B, 2 m~)",
                          why="[h_f^<T_i>; h_r^<1>] for each sentence")
            got = got.detach().double()
            if close(got, torch.cat([h_f, h_r], dim=-1), **TOL):
                continue
            name_mistake(what, got, [(torch.cat([h_r, h_f], dim=-1), "the two halves are "
                                      "swapped: the forward state comes first, "
                                      "[h_f^<T_i>; h_r^<1>]")], **TOL)
            got_f, got_r = got[:, :m], got[:, m:]
            if not close(got_f, h_f, **TOL):
                name_mistake(what, got_f, [(H_f[:, -1], "h_f was read at the last column, "
                                            "after the padding: read the forward outputs at "
                                            "each sentence's own last token, step T_i")], **TOL)
                expect_close(f"{what}: the forward half, h_f^<T_i>", got_f, h_f, atol=1e-8)
            with torch.no_grad():
                flipped = reverse_unit(x.flip(1))[0]  # the padding read first
            read_padding = ("the reverse unit read the padding before the words (x.flip(1) "
                            "reverses the padding too): reverse only the first T_i steps of "
                            "each row")
            name_mistake(what, got_r, [
                (flipped[:, -1], read_padding), (flipped[last], read_padding),
                (H_r[:, 0], "that is h_r^<T_i>, the reverse state after one word; h_r^<1> is "
                 "the reverse unit's output after it has read all T_i words")], **TOL)
            expect_close(f"{what}: the reverse half, h_r^<1>", got_r, h_r, atol=1e-8)
    passed("[h_f^<T_i>; h_r^<1>] of (7.14) for LSTM and GRU units, each direction reading "
           "only its sentence's words, the same for two paddings of the batch")
