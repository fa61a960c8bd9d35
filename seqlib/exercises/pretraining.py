"""The checker of the pretraining page's coding exercise."""

from seqlib.exercises.toolkit import (
    expect,
    expect_close,
    expect_tensor,
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
        got = run_attempt(attempt, ids, mask, output_size, what=what,
                          returns=("forward targets", "backward targets"))
        for name, g, e in zip(("forward", "backward"), got, lm_targets(ids, mask, output_size),
                              strict=True):
            expect_tensor(f"{what}: the {name} targets", g, e.shape, dims="(B, T)")
            wrong = (g.long() != e).nonzero().tolist()
            if wrong:  # name the first wrong target, where its expected value explains it
                b, t = wrong[0]
                right = int(e[b, t])
                at = (f"{what}: the {name} target of sentence {b}, position {t} is "
                      f"{int(g[b, t])}, expected {right}")
                expect(right != IGNORE, f"{at}: no word there: use -100")
                expect(right != 1, f"{at}: a rare word: <unk>, id 1")
            expect_close(f"{what}: the {name} targets", g.long(), e, atol=0, rtol=0)
    passed("forward and backward targets, padding, sentence ends and rare words")
