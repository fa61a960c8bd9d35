"""The checker of the transformer language model's coding exercise accepts the book's
solution and rejects typical wrong attempts with a message that says what is wrong."""

import pytest
import torch

from seqlib.exercises import ExerciseError, check_min_p_filter


def solution(logits, p_min):
    probs = torch.softmax(logits, dim=-1)
    keep = probs >= p_min * probs.amax(dim=-1, keepdim=True)
    return logits.masked_fill(~keep, -float("inf"))


def test_accepts_log_probabilities_instead_of_logits():
    check_min_p_filter(lambda logits, p_min: torch.log_softmax(solution(logits, p_min), -1))


def in_place(logits, p_min):
    probs = torch.softmax(logits, dim=-1)
    return logits.masked_fill_(probs < p_min * probs.amax(dim=-1, keepdim=True), -float("inf"))


@pytest.mark.parametrize("attempt, match", [
    (lambda x, p: x.masked_fill(torch.softmax(x, -1) < p, -float("inf")),
     "p_min times the probability of the most probable"),
    (lambda x, p: x.masked_fill(x < p * x.amax(-1, keepdim=True), -float("inf")),
     "compare probabilities"),
    (lambda x, p: x.masked_fill(torch.softmax(x, -1) <= p * torch.softmax(x, -1).amax(
        -1, keepdim=True), -float("inf")), "most probable token always survives"),
    (lambda x, p: x.masked_fill(torch.softmax(x, -1) >= p * torch.softmax(x, -1).amax(
        -1, keepdim=True), -float("inf")), "removed the tokens that should be kept"),
    (lambda x, p: torch.where(torch.isneginf(solution(x, p)), -float("inf"), 2 * x),
     "differs"),
    (lambda x, p: solution(x, p).flatten(), "shape"),
    (lambda x, p: solution(x, p).tolist(), "torch.Tensor"),
    (in_place, "in place"),
])
def test_rejects_wrong_attempts(attempt, match):
    with pytest.raises(ExerciseError, match=match):
        check_min_p_filter(attempt)


def test_names_a_wrong_count_when_it_cannot_tell_the_slip():
    def top_two(logits, p_min):
        index = logits.topk(2, dim=-1).indices
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, index, True)
        return logits.masked_fill(~keep, -float("inf"))

    with pytest.raises(ExerciseError, match="not the right ones"):
        check_min_p_filter(top_two)
