"""Vocabularies and tokenisation: text in, integer ids out, and back.

Tokens are characters (tiny Shakespeare) or words (Multi30k); four special tokens come
first, with fixed ids:

- ``<empty>`` (id 0) pads short sequences in a batch; losses and attention ignore it;
- ``<unk>`` (id 1) stands for any token left out of the vocabulary;
- ``<start>`` (id 2) and ``<stop>`` (id 3) open and close a sequence for the decoder.
"""

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

import torch

from seqlib.checks import check_ids, check_int

EMPTY, UNK, START, STOP = "<empty>", "<unk>", "<start>", "<stop>"
SPECIALS = (EMPTY, UNK, START, STOP)
LEVELS = ("char", "word")

# One match per token, alternatives tried in order.
_WORD_TOKEN = re.compile(
    r"""
      aujourd'hui                                 # the one French word with an apostrophe
    | (?:[cdjlmnst]|qu|jusqu|lorsqu|puisqu|quelqu|presqu)'   # French elision: l' d' qu'
    | '(?:s|re|ve|ll|d|m|t)(?!\w)                 # English clitic: 's 're 't
    | \d+(?:[.,:]\d+)+                            # number: 3.5 1,000 10:30
    | \w+(?:-\w+)*                                # word or compound: t-shirt
    | \S                                          # punctuation, one per token
    """,
    re.VERBOSE,
)


def char_tokenize(text: str) -> list[str]:
    """Split text into characters: every character, spaces and newlines included, is a token."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return list(text)


def word_tokenize(text: str) -> list[str]:
    """Split a sentence into lower-case words, numbers and punctuation marks: French elisions
    keep their apostrophe (``"l'homme" -> ["l'", "homme"]``), English clitics are split off
    (``"man's" -> ["man", "'s"]``), compounds and numbers stay whole; NFC Unicode letters."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text.lower()).replace("\u2019", "'")  # ’ -> '
    return _WORD_TOKEN.findall(text)


def _check_tokens(tokens, level: str, name: str = "tokens") -> list[str]:
    """Return tokens as a list of str; a str is accepted only at character level."""
    if isinstance(tokens, str) and level == "word":
        raise TypeError(f"{name} must be a list of tokens, got the str {tokens[:30]!r}; "
                        "split it first with word_tokenize")
    if not isinstance(tokens, Iterable):
        raise TypeError(f"{name} must be a list of str tokens, got {type(tokens).__name__}")
    tokens = list(tokens)
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"{name} must hold str tokens, got {type(token).__name__} {token!r}")
    return tokens


class Vocab:
    """Token <-> id map with the special tokens first (ids 0-3)."""

    def __init__(self, itos: Sequence[str], *, level: str = "word", counts=None):
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        itos = _check_tokens(itos, "word", "itos")
        if tuple(itos[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"itos must start with {SPECIALS}, got {tuple(itos[:4])}")
        if len(set(itos)) != len(itos):
            duplicates = sorted(t for t, c in Counter(itos).items() if c > 1)
            raise ValueError(f"itos must not repeat a token, got duplicates {duplicates[:10]}")
        self.itos: list[str] = itos
        self.stoi: dict[str, int] = {token: i for i, token in enumerate(itos)}
        self.level = level
        self.counts: Counter = Counter(counts or {})

    @classmethod
    def build(cls, sequences, *, level="word", min_freq=1, max_size=None) -> "Vocab":
        """Vocabulary of ``sequences`` (token lists): the specials, then tokens by decreasing
        count, ties sorted; below ``min_freq`` or beyond ``max_size`` (specials included) left
        out. ``counts`` holds each kept token's frequency, ``counts[UNK]`` the total left out.
        """
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        if isinstance(sequences, str) or not isinstance(sequences, Iterable):
            raise TypeError("sequences must be an iterable of token lists, got "
                            f"{type(sequences).__name__}")
        check_int("min_freq", min_freq, 1)
        if max_size is not None:
            check_int("max_size", max_size, len(SPECIALS))  # room for the specials
        seen = Counter()
        for i, tokens in enumerate(sequences):
            seen.update(_check_tokens(tokens, level, f"sequences[{i}]"))
        ranked = sorted((t for t in seen if t not in SPECIALS), key=lambda t: (-seen[t], t))
        kept = [t for t in ranked if seen[t] >= min_freq]
        if max_size is not None:
            kept = kept[: max_size - len(SPECIALS)]
        counts = Counter({t: seen[t] for t in kept})
        left_out = seen[UNK] + sum(seen[t] for t in ranked[len(kept):])  # ranked starts with kept
        if left_out:
            counts[UNK] = left_out
        return cls(list(SPECIALS) + kept, level=level, counts=counts)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token) -> bool:
        return token in self.stoi

    def __getitem__(self, token: str) -> int:
        """Id of ``token``; tokens outside the vocabulary get ``unk_id``."""
        if not isinstance(token, str):
            raise TypeError(f"token must be a str, got {type(token).__name__} {token!r}")
        return self.stoi.get(token, self.unk_id)

    def __repr__(self) -> str:
        return f"Vocab(level={self.level!r}, size={len(self)})"

    @property
    def pad_id(self) -> int:
        """Id of ``<empty>``, the padding token."""
        return 0

    @property
    def unk_id(self) -> int:
        """Id of ``<unk>``, which every unknown token gets."""
        return 1

    @property
    def start_id(self) -> int:
        """Id of ``<start>``, which opens a sequence."""
        return 2

    @property
    def stop_id(self) -> int:
        """Id of ``<stop>``, which closes a sequence."""
        return 3

    def encode(self, tokens, *, add_start=False, add_stop=False) -> list[int]:
        """Ids of ``tokens``, unknown tokens as ``<unk>``, optionally framed by <start>/<stop>;
        at character level a str is a valid list of tokens (its characters)."""
        ids = [self[token] for token in _check_tokens(tokens, self.level)]
        return [self.start_id] * add_start + ids + [self.stop_id] * add_stop

    def decode(self, ids, *, strip_specials=True) -> list[str]:
        """Tokens of ``ids``; ``strip_specials`` stops at ``<stop>``, drops <empty> and <start>."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(f"ids must be a 1-D tensor, got shape {tuple(ids.shape)}")
            if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
                raise TypeError(f"ids must hold integers, got dtype {ids.dtype}")
            ids = ids.tolist()
        if isinstance(ids, str) or not isinstance(ids, Iterable):
            raise TypeError(f"ids must be a list or 1-D tensor of ints, got {type(ids).__name__}")
        tokens = []
        for k, i in enumerate(ids):
            check_int(f"ids[{k}]", i)
            if not 0 <= i < len(self):
                raise ValueError(f"id {i} is outside the vocabulary of size {len(self)} "
                                 f"(valid ids: 0 to {len(self) - 1})")
            if strip_specials and i == self.stop_id:
                break
            if not (strip_specials and i in (self.pad_id, self.start_id)):
                tokens.append(self.itos[i])
        return tokens

    def to_text(self, tokens) -> str:
        """Join tokens back into text: no separator for characters, a space for words."""
        return ("" if self.level == "char" else " ").join(_check_tokens(tokens, self.level))


def char_vocab(text: str, min_freq: int = 1) -> Vocab:
    """Character-level vocabulary of ``text``."""
    return Vocab.build([char_tokenize(text)], level="char", min_freq=min_freq)


def word_vocab(sentences: Iterable[str], min_freq: int = 1, max_size: int | None = None) -> Vocab:
    """Word-level vocabulary of ``sentences`` (strs), each split with :func:`word_tokenize`."""
    if isinstance(sentences, str):
        raise TypeError("sentences must be an iterable of str sentences, got a single str; "
                        "wrap it in a list")
    return Vocab.build((word_tokenize(s) for s in sentences), level="word",
                       min_freq=min_freq, max_size=max_size)


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int = 0):
    """Pad id sequences to the longest: (B, T) ids and a (B, T) mask, True at real tokens."""
    if isinstance(sequences, (str, torch.Tensor)) or not isinstance(sequences, Sequence):
        raise TypeError("sequences must be a list of id sequences, got "
                        f"{type(sequences).__name__}")
    if len(sequences) == 0:
        raise ValueError("sequences must hold at least one sequence, got an empty list")
    check_int("pad_id", pad_id)
    rows = []
    for b, seq in enumerate(sequences):
        row = torch.as_tensor(seq)
        if row.dim() != 1 or len(row) == 0:
            raise ValueError(f"sequences[{b}] must be a non-empty 1-D sequence of ids, "
                             f"got shape {tuple(row.shape)}")
        if row.is_floating_point() or row.is_complex() or row.dtype == torch.bool:
            raise TypeError(f"sequences[{b}] must hold integer ids, got dtype {row.dtype}")
        rows.append(row.long())
    lengths = torch.tensor([len(r) for r in rows])  # (B,)
    ids = torch.full((len(rows), int(lengths.max())), pad_id, dtype=torch.long)  # (B, T)
    for b, row in enumerate(rows):
        ids[b, : len(row)] = row
    mask = torch.arange(ids.shape[1]) < lengths[:, None]  # (B, T)
    return ids, mask


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse the first lengths[b] steps of each row of x (B, T, ...), ids or features;
    the padding stays last: [a, b, c, <empty>] -> [c, b, a, <empty>]. Its own inverse.
    A reverse unit of (7.14) that reads it starts at each sentence's last token, not at the
    padding; an encoder that reads its source reversed (Sutskever et al., 2014) too."""
    T = x.shape[1]
    t = torch.arange(T, device=x.device)
    source = lengths[:, None] - 1 - t  # (B, T): step t reads step len - 1 - t ...
    source = torch.where(source >= 0, source, t)  # ... and the padding stays where it is
    index = source.view(*source.shape, *[1] * (x.dim() - 2)).expand_as(x)
    return x.gather(1, index)


def one_hot(ids: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Float one-hot encoding, shape (..., num_classes): the inputs x_t of a character model."""
    check_int("num_classes", num_classes, 1)
    check_ids(ids, vocab_size=num_classes)
    return torch.nn.functional.one_hot(ids.long(), num_classes).float()
