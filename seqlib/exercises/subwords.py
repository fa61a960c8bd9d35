"""Checkers for the exercises of the page on subword tokens (byte-pair encoding)."""

from collections import Counter
from itertools import pairwise

from seqlib.exercises.toolkit import expect, passed, require_callable, run_attempt
from seqlib.experiments.bpe import BPE, learn_merges, merge_pair

# Small corpora that tell learners' mistakes apart: the course's example (ties at the first
# merge), runs of one letter (pairs that overlap) and words that share their endings.
CORPORA = [
    Counter({"low": 5, "lower": 2, "newest": 6, "widest": 3}),
    Counter({"aaa": 2, "aaaa": 1, "ba": 3}),
    Counter({"hugging": 4, "hugs": 3, "bugs": 5, "pun": 12, "bun": 2, "hug": 10}),
]
WORDS = ["lowest", "newer", "widow", "aaaaa", "abab", "hugging", "bugging", "unbug", "x"]


def check_bpe_encoder(encode_word) -> None:
    """`encode_word(merges, word)`: the symbols of `word` (a str, no end-of-word marker)
    after applying `merges` (a list of pairs, in the order learned) by rank."""
    require_callable(encode_word, "encode_word(merges, word) -> symbols", name="encode_word")
    for corpus in CORPORA:
        merges = learn_merges(corpus, 8, end_of_word=None)
        reference = BPE(merges, end_of_word=None)
        for word in [*corpus, *WORDS]:
            call = f"encode_word(merges, {word!r})"
            got = run_attempt(encode_word, list(merges), word, what=call)
            expected = reference.encode_word(word)
            expect(isinstance(got, list) and all(isinstance(s, str) for s in got),
                   f"{call} should return a list of str, got {got!r}")
            wrong = f"with merges {merges}, {call} returned {got}, expected {expected}"
            expect("".join(got) == word, f"{wrong}: the symbols do not spell the word: each "
                                         "merge joins two neighbours")
            expect(got == expected, f"{wrong}: apply the merge learned first among the pairs "
                                    "present, not the leftmost pair or the pair that comes "
                                    "first in the word")
    passed("encode_word applies the merges by rank, on 3 corpora and "
           f"{sum(len(c) for c in CORPORA) + 3 * len(WORDS)} words")


def check_bpe_learner(learn) -> None:
    """`learn(word_counts, n)`: the first n merges (pairs) of BPE on a Counter of words,
    without an end-of-word marker. The checker replays the merges: each must be a most
    frequent pair (each word weighted by its count) of the words as the merges before it
    left them. Ties may go either way (seqlib.experiments.bpe gives them to the pair seen first)."""
    require_callable(learn, "learn(word_counts, n) -> merges", name="learn")
    for corpus in CORPORA:
        for n in (1, 3, 6):
            got = run_attempt(learn, Counter(corpus), n, what=f"learn({dict(corpus)}, {n})")
            expect(isinstance(got, list), f"learn(...) should return a list of pairs, got "
                                          f"{type(got).__name__}")
            expected = len(learn_merges(corpus, n, end_of_word=None))
            expect(len(got) == expected, f"learn({dict(corpus)}, {n}) returned {len(got)} "
                                         f"merges, expected {expected}")
            symbols = {word: list(word) for word in corpus}
            for k, pair in enumerate(got):
                expect(isinstance(pair, tuple | list) and len(pair) == 2,
                       f"merge {k + 1} should be a pair of symbols, got {pair!r}")
                counts = Counter()
                for word, count in corpus.items():
                    for p in pairwise(symbols[word]):
                        counts[p] += count
                best, top = counts.most_common(1)[0]
                a, b = pair
                expect(counts[a, b] >= top,
                       f"learn({dict(corpus)}, {n}): merge {k + 1} is {(a, b)}, seen "
                       f"{counts[a, b]} times at that point, but {best} is seen {top} times "
                       "(every neighbouring pair of every word, times the word's count, in "
                       "the words as the earlier merges left them)")
                symbols = {word: merge_pair(s, (a, b)) for word, s in symbols.items()}
    passed("every merge of learn is a most frequent pair, on 3 corpora")
