"""Checkers for the exercises of the translation transformer's page (Section 7.5, (7.34)):
the log-probability of a whole translation, from one teacher-forced pass."""

import torch
import torch.nn.functional as F

from seqlib.exercises.toolkit import (
    close,
    expect_close,
    expect_tensor,
    name_mistake,
    passed,
    require_callable,
    run_attempt,
    seeded,
)
from seqlib.text import pad_batch
from seqlib.transformer import Transformer

START, STOP = 2, 3  # the ids of <start> and <stop> (seqlib.text.SPECIALS)
SLIPS = dict(atol=1e-4, rtol=0)  # how close to a typical slip's values to name it


def _model_and_batch():
    """A small seeded Transformer in evaluation mode and a padded batch: src, src_mask (B, S)
    and tgt (B, T), each row of tgt real tokens ending with <stop>, then <empty> (0)."""
    with seeded(0):
        model = Transformer(11, 13, p=16, heads=2, n1=32, num_layers=1).eval()
    gen = torch.Generator().manual_seed(0)
    sources = [torch.randint(4, 11, (n,), generator=gen).tolist() for n in (5, 3, 4)]
    targets = [torch.randint(4, 13, (n,), generator=gen).tolist() + [STOP] for n in (4, 2, 6)]
    src, src_mask = pad_batch(sources)
    tgt, _ = pad_batch(targets)
    return model, src, src_mask, tgt


def _step_by_step(model, src, src_mask, tgt) -> torch.Tensor:
    """sum_t log p(y^<t> | y^<1>, ..., y^<t-1>, x) by (7.34), one decoder call per token."""
    real = tgt != 0  # (B, T)
    total = torch.zeros(len(tgt), dtype=torch.float64)
    with torch.no_grad():
        state = model.start(src, src_mask)
        token = torch.full((len(tgt),), START)
        for t in range(tgt.shape[1]):
            logits, state = model.step(token, state)  # (B, V): the distribution of y^<t>
            log_p = F.log_softmax(logits.double(), dim=-1)
            total += log_p.gather(1, tgt[:, t:t + 1])[:, 0] * real[:, t]
            token = tgt[:, t]
    return total


def _slips(model, src, src_mask, tgt) -> list:
    """(value, message) for typical wrong versions."""
    real = tgt != 0
    tgt_in = torch.cat([torch.full_like(tgt[:, :1], START), tgt[:, :-1]], dim=1)  # (B, T)
    with torch.no_grad():
        logits = model(src, src_mask, tgt_in).double()  # (B, T, V)
        unshifted = model(src, src_mask, tgt).double()
    log_p = F.log_softmax(logits, -1).gather(2, tgt[..., None])[..., 0]  # (B, T)
    raw = logits.gather(2, tgt[..., None])[..., 0]
    seen = F.log_softmax(unshifted, -1).gather(2, tgt[..., None])[..., 0]
    before_stop = real & (tgt != STOP)
    return [
        (log_p.sum(1), "you added the log-probabilities at the padded positions too: sum "
                       "over the real tokens of tgt only (tgt != 0)"),
        ((log_p * real).sum(1) / real.sum(1),
         "this is the mean log-probability per token; the log-probability of the sentence "
         "is the sum over its tokens"),
        ((seen * real).sum(1),
         "the decoder read tgt itself: it must read <start> y^<1> ... y^<T-1>, tgt shifted "
         "right by one, so that position t predicts y^<t> without seeing it"),
        ((raw * real).sum(1), "you added the logits: take log_softmax over the vocabulary "
                              "first"),
        ((log_p * before_stop).sum(1),
         "<stop> is missing: the probability of a translation includes that of ending it"),
    ]


def check_sequence_log_prob(sequence_log_prob) -> None:
    """Check `sequence_log_prob(model, src, src_mask, tgt, start_id) -> (B,)`, the
    log-probability log P(y | x) = sum_t log p(y^<t> | y^<1>, ..., y^<t-1>, x) of each row
    of tgt (B, T) (real tokens ending with <stop>, then <empty> padding, id 0) under a
    seqlib Transformer, from one teacher-forced pass; compared with (7.34) step by step."""
    require_callable(sequence_log_prob, "sequence_log_prob(model, src, src_mask, tgt, "
                     "start_id) -> (B,)", name="sequence_log_prob")
    model, src, src_mask, tgt = _model_and_batch()
    expected = _step_by_step(model, src, src_mask, tgt)
    got = run_attempt(sequence_log_prob, model, src.clone(), src_mask.clone(), tgt.clone(),
                      START, what="sequence_log_prob on 3 padded sentences",
                      grad=True)  # with autograd, as on the page
    expect_tensor("sequence_log_prob's result", got, (len(tgt),), dims="(B,)",
                  why="one log-probability per sentence")
    got = got.detach().double()
    if not close(got, expected, **SLIPS):
        name_mistake("the log-probabilities", got, _slips(model, src, src_mask, tgt), **SLIPS)
    expect_close("the log-probabilities", got, expected, atol=1e-4, rtol=1e-5)
    passed("sequence_log_prob equals the sum of log p(y^<t> | y^<1..t-1>, x) of (7.34) "
           "decoded step by step, for 3 padded sentences of different lengths")


__all__ = ["check_sequence_log_prob"]
