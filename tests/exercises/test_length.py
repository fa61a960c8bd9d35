"""The checker of the length-generalisation page's coding exercise."""

import pytest
import torch

from seqlib.exercises import ExerciseError, check_stateful_reverse


def carried(model, x, symbols):
    B, n = x.shape
    sep = torch.full((B, 1), symbols)
    logits, state = model(torch.cat([x, sep], dim=1))  # (B, n + 1, V)
    answer = [logits[:, -1].argmax(-1)]
    for _ in range(n - 1):
        logits, state = model(answer[-1][:, None], state)  # (B, 1, V)
        answer.append(logits[:, -1].argmax(-1))
    return torch.stack(answer, dim=1)  # (B, n)


def test_the_checker_says_what_is_wrong():
    def with_separator(model, x, symbols):
        sep = torch.full((x.shape[0], 1), symbols)
        return torch.cat([sep, carried(model, x, symbols)], dim=1)

    def stateless(model, x, symbols):
        B, n = x.shape
        ids = torch.cat([x, torch.full((B, 1), symbols)], dim=1)
        for _ in range(n):
            logits, _ = model(ids)
            ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return ids[:, n + 1:]

    def state_dropped(model, x, symbols):
        B, n = x.shape
        logits, _ = model(torch.cat([x, torch.full((B, 1), symbols)], dim=1))
        answer = [logits[:, -1].argmax(-1)]
        for _ in range(n - 1):
            logits, _ = model(answer[-1][:, None])  # the state is lost
            answer.append(logits[:, -1].argmax(-1))
        return torch.stack(answer, dim=1)

    with pytest.raises(ExerciseError, match="reading the prefix again"):
        check_stateful_reverse(stateless)
    with pytest.raises(ExerciseError, match="differs from the greedy one"):
        check_stateful_reverse(state_dropped)
    with pytest.raises(ExerciseError, match=r"has shape \(6, 2\), expected \(6, 1\)"):
        check_stateful_reverse(with_separator)
    with pytest.raises(ExerciseError, match=r"reverse\(model, x of shape \(6, 1\)\) should be a "
                                            r"torch.Tensor, got list"):
        check_stateful_reverse(lambda model, x, symbols: x.tolist())
