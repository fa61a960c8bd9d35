"""Byte-pair encoding (Sennrich, Haddow & Birch 2016), learned from scratch: subword tokens
between characters and words (beyond the chapter, which works with whole words).

Learning starts from the characters of every word, with an end-of-word marker after the
last one, and repeats one step: count the adjacent pairs of symbols over all the words,
weighted by how often each word occurs, and merge the most frequent pair into one new
symbol everywhere. The merges, in the order learned, are the model. Encoding a new word
starts again from its characters and applies the merges by rank: while two adjacent
symbols form a learned pair, merge the pair learned first.

Ties. When several pairs share the highest count, the pair that appeared first wins: the
pairs of the words as given, read in order (a `Counter` keeps the order in which words were
first counted), each word left to right, then the pairs that merges create, in the order
they are created. Other implementations break ties differently (Hugging Face `tokenizers`
prefers the pair of smaller symbol ids), so two learners agree only until the first tie
they break differently. After it they may part for good: when the tied pairs overlap in a
word (n+e and e+w in "newest"), merging one first lowers the other's count. On the four
words of Sennrich et al.'s example the first 10 merges of the two share 5; given the same
merges, the two encoders split words alike (tests/experiments/test_bpe.py).
"""

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping

from seqlib.checks import int_in_range, positive_int

END_OF_WORD = "</w>"


def _check_words(words) -> Counter:
    """Word counts from a mapping word -> count or from an iterable of words."""
    if isinstance(words, str):
        raise TypeError("words must be an iterable of words or a mapping word -> count, "
                        "got a str (split the text into words first)")
    counts = Counter(dict(words)) if isinstance(words, Mapping) else Counter(words)
    for word, n in counts.items():
        if not isinstance(word, str) or not word or any(c.isspace() for c in word):
            raise ValueError(f"every word must be a non-empty str without spaces, got {word!r}")
        positive_int(f"the count of {word!r}", n)
    return counts


def _pairs(symbols: list[str]) -> Iterable[tuple[str, str]]:
    return zip(symbols, symbols[1:], strict=False)


def learn_merges(words, merges: int, end_of_word: str | None = END_OF_WORD,
                 counts: list | None = None) -> list[tuple]:
    """The first `merges` merges of byte-pair encoding on `words` (an iterable of words, or
    a mapping word -> count), most frequent pair first, ties to the pair seen first.

    `end_of_word` is appended to the last character of each word (as in "w</w>"), so that
    a symbol at the end of a word differs from the same letters inside one; None leaves
    words unmarked (as in the lecture's example low/lower/newest/widest). Learning stops
    early when no pair is left (every word a single symbol). A list passed as `counts`
    receives the count of each merged pair when it was merged.
    """
    int_in_range("merges", merges, 0)
    word_counts = _check_words(words)
    vocab = [_symbols(word, end_of_word) for word in word_counts]
    freq = list(word_counts.values())
    pair_count: Counter = Counter()
    where: dict[tuple, set[int]] = {}  # pair -> indices of the words that hold it
    first_seen: dict[tuple, int] = {}
    for i, symbols in enumerate(vocab):
        for pair in _pairs(symbols):
            pair_count[pair] += freq[i]
            where.setdefault(pair, set()).add(i)
            first_seen.setdefault(pair, len(first_seen))
    heap = [(-n, first_seen[pair], pair) for pair, n in pair_count.items()]
    heapq.heapify(heap)
    learned = []
    while heap and len(learned) < merges:
        n, _, pair = heapq.heappop(heap)
        if -n != pair_count.get(pair, 0) or n == 0:
            continue  # an outdated entry: the pair's count changed since it was pushed
        learned.append(pair)
        if counts is not None:
            counts.append(-n)
        changed = set()
        for i in sorted(where.pop(pair, ())):
            old = vocab[i]
            for p in _pairs(old):
                pair_count[p] -= freq[i]
                changed.add(p)
            vocab[i] = new = merge_pair(old, pair)
            for p in _pairs(new):
                pair_count[p] += freq[i]
                where.setdefault(p, set()).add(i)
                first_seen.setdefault(p, len(first_seen))
                changed.add(p)
        del pair_count[pair]
        for p in changed - {pair}:
            if pair_count[p] > 0:
                heapq.heappush(heap, (-pair_count[p], first_seen[p], p))
            else:
                where.pop(p, None)
                del pair_count[p]
    return learned


def _symbols(word: str, end_of_word: str | None) -> list[str]:
    symbols = list(word)
    if end_of_word:
        symbols[-1] += end_of_word
    return symbols


def merge_pair(symbols: list[str], pair: tuple[str, str]) -> list[str]:
    """`symbols` with every occurrence of `pair`, left to right, made one symbol."""
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


class BPE:
    """A learned byte-pair encoding: `encode` splits text into subword tokens, `decode`
    joins them back."""

    def __init__(self, merges: list[tuple[str, str]], end_of_word: str | None = END_OF_WORD):
        self.merges = [tuple(pair) for pair in merges]
        self.end_of_word = end_of_word
        self.ranks = {pair: r for r, pair in enumerate(self.merges)}
        self._cache: dict[str, list[str]] = {}

    @classmethod
    def learn(cls, words, merges: int, end_of_word: str | None = END_OF_WORD) -> "BPE":
        return cls(learn_merges(words, merges, end_of_word), end_of_word)

    def encode_word(self, word: str) -> list[str]:
        """The subword tokens of one word: its characters, then the merges by rank."""
        if word not in self._cache:
            if not isinstance(word, str) or not word or any(c.isspace() for c in word):
                raise ValueError(f"word must be a non-empty str without spaces, got {word!r}")
            symbols = _symbols(word, self.end_of_word)
            while len(symbols) > 1:
                pair = min(_pairs(symbols), key=lambda p: self.ranks.get(p, len(self.ranks)))
                if pair not in self.ranks:
                    break
                symbols = merge_pair(symbols, pair)
            self._cache[word] = symbols
        return list(self._cache[word])

    def encode(self, text: str) -> list[str]:
        """Subword tokens of a text, split into words at whitespace."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return [token for word in text.split() for token in self.encode_word(word)]

    def decode(self, tokens: Iterable[str]) -> str:
        """The text of `tokens`, words separated by one space; needs the end-of-word marker."""
        if not self.end_of_word:
            raise ValueError("decode needs an end-of-word marker to find the word boundaries; "
                             "this encoding was learned with end_of_word=None")
        return "".join(tokens).replace(self.end_of_word, " ").strip()

    def symbols(self) -> list[str]:
        """The merged symbols, in the order learned (the base characters come on top)."""
        return [a + b for a, b in self.merges]

    def __repr__(self) -> str:
        return f"BPE({len(self.merges)} merges, end_of_word={self.end_of_word!r})"
