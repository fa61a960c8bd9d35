"""Checkers for the exercises of the page on subword tokens (byte-pair encoding)."""

from collections import Counter

from seqlib.bpe import BPE, learn_merges
from seqlib.exercises import ExerciseError, expect, passed

# Small corpora that tell learners' mistakes apart: the course's example (ties at the first
# merge), runs of one letter (pairs that overlap) and words that share their endings.
CORPORA = [
    Counter({"low": 5, "lower": 2, "newest": 6, "widest": 3}),
    Counter({"aaa": 2, "aaaa": 1, "ba": 3}),
    Counter({"hugging": 4, "hugs": 3, "bugs": 5, "pun": 12, "bun": 2, "hug": 10}),
]
WORDS = ["lowest", "newer", "widow", "aaaaa", "abab", "hugging", "bugging", "unbug", "x"]


def _check_callable(name: str, attempt) -> None:
    if not callable(attempt):
        raise TypeError(f"{name} must be a function, got {type(attempt).__name__}")


def check_bpe_encoder(encode_word) -> None:
    """`encode_word(merges, word)`: the symbols of `word` (a str, no end-of-word marker)
    after applying `merges` (a list of pairs, in the order learned) by rank."""
    _check_callable("encode_word", encode_word)
    for corpus in CORPORA:
        merges = learn_merges(corpus, 8, end_of_word=None)
        reference = BPE(merges, end_of_word=None)
        for word in [*corpus, *WORDS]:
            got, expected = encode_word(list(merges), word), reference.encode_word(word)
            expect(isinstance(got, list) and all(isinstance(s, str) for s in got),
                   f"encode_word(merges, {word!r}) should return a list of str, got {got!r}")
            if got == expected:
                continue
            hint = ("the symbols do not spell the word: each merge joins two neighbours"
                    if "".join(got) != word else
                    "apply the merge learned first among the pairs present, not the leftmost "
                    "pair or the pair that comes first in the word")
            raise ExerciseError(f"with merges {merges}, encode_word(merges, {word!r}) returned "
                                f"{got}, expected {expected}: {hint}")
    passed("encode_word applies the merges by rank, on 3 corpora and "
           f"{sum(len(c) for c in CORPORA) + 3 * len(WORDS)} words")


def check_bpe_learner(learn) -> None:
    """`learn(word_counts, n)`: the first n merges (pairs) of BPE on a Counter of words,
    without an end-of-word marker, ties going to the pair counted first."""
    _check_callable("learn", learn)
    for corpus in CORPORA:
        for n in (1, 3, 6):
            got, expected = learn(Counter(corpus), n), learn_merges(corpus, n, end_of_word=None)
            expect(isinstance(got, list), f"learn(...) should return a list of pairs, got "
                                          f"{type(got).__name__}")
            got = [tuple(pair) for pair in got]
            if got == expected:
                continue
            common = min(len(got), len(expected))
            k = next((i for i in range(common) if got[i] != expected[i]), common)
            if k == common:
                raise ExerciseError(f"learn({dict(corpus)}, {n}) returned {len(got)} merges, "
                                    f"expected {n}")
            counts = []
            learn_merges(corpus, k + 1, end_of_word=None, counts=counts)
            raise ExerciseError(
                f"learn({dict(corpus)}, {n}): merge {k + 1} is {got[k]}, expected "
                f"{expected[k]} (seen {counts[k]} times, weighted by the word counts); "
                "count every neighbouring pair of every word times the word's count, and on a "
                "tie keep the pair counted first")
    passed("learn gives the merges of seqlib.bpe.learn_merges on 3 corpora, ties included")
