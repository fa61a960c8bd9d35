"""The checkers of the subword page's exercises accept the book's answers and say what is
wrong with typical mistakes."""

import pytest

from seqlib.exercises import ExerciseError, check_bpe_encoder, check_bpe_learner
from seqlib.experiments.bpe import learn_merges


def leftmost_first(merges, word):
    """A typical mistake: merge the leftmost learned pair instead of the earliest learned."""
    symbols, learned = list(word), set(merges)
    while True:
        for i in range(len(symbols) - 1):
            if (symbols[i], symbols[i + 1]) in learned:
                symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
                break
        else:
            return symbols


def unweighted(word_counts, n):
    """A typical mistake: count each distinct word once, whatever its count."""
    return learn_merges(list(word_counts), n, end_of_word=None)


def test_the_checkers_say_what_is_wrong():
    with pytest.raises(ExerciseError, match="merge learned first among the pairs present"):
        check_bpe_encoder(leftmost_first)
    with pytest.raises(ExerciseError, match="do not spell the word"):
        check_bpe_encoder(lambda merges, word: list(word[:-1]) or ["?"])
    with pytest.raises(ExerciseError, match="should return a list of str"):
        check_bpe_encoder(lambda merges, word: word)
    with pytest.raises(ExerciseError, match=r"merge \d is .* seen \d+ times at that point, but"):
        check_bpe_learner(unweighted)
    with pytest.raises(ExerciseError, match="returned 0 merges, expected 1"):
        check_bpe_learner(lambda counts, n: [])
