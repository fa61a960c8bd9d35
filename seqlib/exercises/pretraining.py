"""The checker of the pretraining page's coding exercise."""

import torch

from seqlib.exercises.toolkit import (
    ExerciseError,
    expect,
    passed,
    require_callable,
    run_attempt,
)
from seqlib.experiments.pretraining import IGNORE, lm_targets
from seqlib.text import pad_batch


def check_lm_targets(attempt) -> None:
    """`attempt(ids, mask, output_size)`: the targets (B, T) of the forward LM (the next
    word) and of the backward LM (the previous word), IGNORE (-100) where there is none,
    ids at or above output_size as <unk> (1), as seqlib.experiments.pretraining.lm_targets."""
    require_callable(attempt, "lm_targets(ids, mask, output_size) -> (forward, backward)")
    batches = [([[5, 6, 7]], 10, "one sentence"),
               ([[5, 12, 7, 8], [9], [11, 4]], 10, "three sentences of lengths 4, 1, 2, "
                "padded, with ids 11 and 12 beyond output_size=10"),
               ([[4, 5], [6, 7]], 6, "two sentences of one length")]
    for sentences, output_size, what in batches:
        ids, mask = pad_batch(sentences)
        got = run_attempt(attempt, ids, mask, output_size, what=what)
        expect(isinstance(got, tuple) and len(got) == 2,
               f"{what}: return a pair (forward targets, backward targets), got "
               f"{type(got).__name__}")
        for name, g, e in zip(("forward", "backward"), got, lm_targets(ids, mask, output_size),
                              strict=True):
            expect(isinstance(g, torch.Tensor) and tuple(g.shape) == tuple(e.shape),
                   f"{what}: the {name} targets should be a tensor of shape "
                   f"{tuple(e.shape)}, got {getattr(g, 'shape', type(g).__name__)}")
            if not torch.equal(g.long(), e):
                b, t = (g.long() != e).nonzero()[0].tolist()
                hint = (": no word there: use -100" if e[b, t] == IGNORE else
                        ": a rare word: <unk>, id 1" if e[b, t] == 1 else "")
                raise ExerciseError(f"{what}: the {name} target of sentence {b}, position "
                                    f"{t} is {int(g[b, t])}, expected {int(e[b, t])}{hint}")
    passed("forward and backward targets, padding, sentence ends and rare words")
