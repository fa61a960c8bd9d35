"""The checker of the translation transformer's coding exercise accepts the book's solution
and rejects typical wrong attempts with a message that says what is wrong."""

import pytest
import torch
import torch.nn.functional as F

from seqlib.exercises import ExerciseError, check_sequence_log_prob


def log_probs(model, src, src_mask, tgt, start_id, shift=True):
    """log p(y^<t> | ...) at every position, (B, T)."""
    tgt_in = torch.cat([torch.full_like(tgt[:, :1], start_id), tgt[:, :-1]], dim=1)
    logits = model(src, src_mask, tgt_in if shift else tgt)
    return F.log_softmax(logits, dim=-1).gather(2, tgt[..., None])[..., 0]


def solution(model, src, src_mask, tgt, start_id):
    with torch.no_grad():
        return (log_probs(model, src, src_mask, tgt, start_id) * (tgt != 0)).sum(1)


def test_accepts_an_attempt_that_keeps_the_graph():
    def with_graph(model, src, src_mask, tgt, start_id):
        return (log_probs(model, src, src_mask, tgt, start_id) * (tgt != 0)).sum(1)

    check_sequence_log_prob(with_graph)


@pytest.mark.parametrize("attempt, match", [
    (lambda m, s, sm, t, st: log_probs(m, s, sm, t, st).sum(1), "padded positions"),
    (lambda m, s, sm, t, st: (log_probs(m, s, sm, t, st) * (t != 0)).sum(1) / (t != 0).sum(1),
     "mean log-probability per token"),
    (lambda m, s, sm, t, st: (log_probs(m, s, sm, t, st, shift=False) * (t != 0)).sum(1),
     "shifted right by one"),
    (lambda m, s, sm, t, st: (log_probs(m, s, sm, t, st) * (t != 0) * (t != 3)).sum(1),
     "<stop> is missing"),
    (lambda m, s, sm, t, st: solution(m, s, sm, t, st)[:, None], "expected \\(B,\\)"),
    (lambda m, s, sm, t, st: solution(m, s, sm, t, st).tolist(), "torch.Tensor"),
    (lambda m, s, sm, t, st: solution(m, s, sm, t, st) + 0.5, "differs"),
])
def test_rejects_wrong_attempts(attempt, match):
    with pytest.raises(ExerciseError, match=match):
        check_sequence_log_prob(attempt)


def test_rejects_summed_logits():
    def logits_summed(model, src, src_mask, tgt, start_id):
        tgt_in = torch.cat([torch.full_like(tgt[:, :1], start_id), tgt[:, :-1]], dim=1)
        logits = model(src, src_mask, tgt_in)
        return (logits.gather(2, tgt[..., None])[..., 0] * (tgt != 0)).sum(1)

    with pytest.raises(ExerciseError, match="log_softmax"):
        check_sequence_log_prob(logits_summed)
