"""Tests of seqlib.text: tokenisers, vocabularies, padding and one-hot inputs."""

import os
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from seqlib.text import (
    EMPTY,
    SPECIALS,
    START,
    STOP,
    UNK,
    Vocab,
    char_tokenize,
    char_vocab,
    one_hot,
    pad_batch,
    reverse_padded,
    word_tokenize,
    word_vocab,
)

# A toy lexicon over the three languages of the book, punctuation included.
LEXICON = ["a", "man", "the", "dog", "homme", "l'", "d'", "qu'", "un", "élève", "straße",
           "müller", "t-shirt", "3", "3.5", ".", ",", "!", "?", "«", "»", "'s", "aujourd'hui"]
sentences_over_lexicon = st.lists(st.sampled_from(LEXICON), min_size=1, max_size=12)


# ---------------------------------------------------------------- tokenisers


def test_char_tokenize_keeps_every_character():
    assert char_tokenize("Hi, you!\n") == ["H", "i", ",", " ", "y", "o", "u", "!", "\n"]


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("A man, a dog.", ["a", "man", ",", "a", "dog", "."]),
        ("L'homme d'affaires qu'il voit", ["l'", "homme", "d'", "affaires", "qu'", "il", "voit"]),
        ("Jusqu’à aujourd'hui!", ["jusqu'", "à", "aujourd'hui", "!"]),
        ("The man's T-shirt", ["the", "man", "'s", "t-shirt"]),
        ("Müller und die Straße", ["müller", "und", "die", "straße"]),
        ("Élève: «Très bien»", ["élève", ":", "«", "très", "bien", "»"]),
        ("3 dogs, 3.5 men at 10:30", ["3", "dogs", ",", "3.5", "men", "at", "10:30"]),
        ("  ", []),
    ],
)
def test_word_tokenize_examples(text, tokens):
    assert word_tokenize(text) == tokens


def test_word_tokenize_composes_accents():
    decomposed = "e\u0301le\u0300ve"  # e + combining acute, e + combining grave
    assert word_tokenize(decomposed) == ["élève"]


@given(st.text(max_size=60))
def test_word_tokenize_is_stable_under_rejoining(text):
    tokens = word_tokenize(text)
    assert word_tokenize(" ".join(tokens)) == tokens
    assert all(token and not token.isspace() and token == token.lower() for token in tokens)


@pytest.mark.parametrize("tokenize", [char_tokenize, word_tokenize])
def test_tokenizers_reject_non_str(tokenize):
    with pytest.raises(TypeError, match="text must be a str"):
        tokenize(["a", "list"])


# ---------------------------------------------------------------- Vocab.build


def test_specials_come_first_with_fixed_ids():
    vocab = Vocab.build([["b", "a"]])
    assert vocab.itos[:4] == list(SPECIALS) == [EMPTY, UNK, START, STOP]
    assert (vocab.pad_id, vocab.unk_id, vocab.start_id, vocab.stop_id) == (0, 1, 2, 3)
    assert [vocab[t] for t in SPECIALS] == [0, 1, 2, 3]


def test_order_by_decreasing_count_then_sorted():
    vocab = Vocab.build([["c", "b", "a", "b"], ["d", "c", "b"]])
    assert vocab.itos[4:] == ["b", "c", "a", "d"]  # b: 3, c: 2, then a and d (1 each) sorted
    assert vocab.stoi == {t: i for i, t in enumerate(vocab.itos)}


@given(st.lists(st.lists(st.sampled_from("abcdefg"), max_size=8), max_size=8), st.randoms())
def test_order_does_not_depend_on_input_order(sequences, random):
    shuffled = [random.sample(s, len(s)) for s in random.sample(sequences, len(sequences))]
    assert Vocab.build(sequences).itos == Vocab.build(shuffled).itos


def test_min_freq_and_max_size():
    sequences = [["a"] * 5 + ["b"] * 3 + ["c"] * 2 + ["d"]]
    assert Vocab.build(sequences, min_freq=2).itos[4:] == ["a", "b", "c"]
    assert Vocab.build(sequences, min_freq=3).itos[4:] == ["a", "b"]
    assert Vocab.build(sequences, max_size=6).itos[4:] == ["a", "b"]
    assert len(Vocab.build(sequences, max_size=4)) == 4  # specials only
    assert len(Vocab.build(sequences, max_size=100)) == 8


def test_counts_of_kept_tokens_and_of_unk():
    vocab = Vocab.build([["a", "a", "b"], ["a", "c"]], min_freq=2)
    assert vocab.counts == {"a": 3, UNK: 2}  # b and c were left out, and encode to <unk>
    assert sum(vocab.counts.values()) == 5
    assert Vocab.build([["a"]]).counts == {"a": 1}


def test_specials_in_the_data_are_not_repeated():
    vocab = Vocab.build([[START, "a", STOP]])
    assert vocab.itos == [*SPECIALS, "a"]
    assert vocab.counts == {"a": 1}
    assert Vocab.build([["a", UNK, "b"]], max_size=5).counts == {"a": 1, UNK: 2}


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"level": "sentence"}, ValueError, "level must be one of"),
        ({"min_freq": 0}, ValueError, "min_freq must be >= 1, got 0"),
        ({"min_freq": 1.5}, TypeError, "min_freq must be an int"),
        ({"max_size": 3}, ValueError, "max_size must be >= 4, got 3"),
    ],
)
def test_build_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        Vocab.build([["a"]], **kwargs)


def test_build_rejects_str_where_token_lists_are_expected():
    with pytest.raises(TypeError, match="iterable of token lists"):
        Vocab.build("a man")
    with pytest.raises(TypeError, match=r"sequences\[0\] must be a list of tokens.*word_tokenize"):
        Vocab.build(["a man"])
    with pytest.raises(TypeError, match=r"sequences\[0\] must hold str tokens, got int"):
        Vocab.build([[1, 2]])


def test_init_checks_specials_and_duplicates():
    with pytest.raises(ValueError, match="must start with"):
        Vocab(["a", "b"])
    with pytest.raises(ValueError, match=r"duplicates \['a'\]"):
        Vocab([*SPECIALS, "a", "a"])


# ---------------------------------------------------------------- encode / decode


@given(st.text(min_size=1, max_size=80), st.data())
def test_char_round_trip(corpus, data):
    vocab = char_vocab(corpus)
    text = data.draw(st.text(alphabet=st.sampled_from(sorted(set(corpus))), max_size=80))
    ids = vocab.encode(char_tokenize(text))
    assert vocab.unk_id not in ids
    assert vocab.to_text(vocab.decode(ids)) == text
    assert vocab.encode(text) == ids  # a str is a list of characters


@given(st.lists(sentences_over_lexicon, min_size=1, max_size=5), st.data())
def test_word_round_trip(corpus, data):
    vocab = word_vocab(" ".join(s) for s in corpus)
    words = sorted(set(vocab.itos[4:]))
    sentence = " ".join(data.draw(st.lists(st.sampled_from(words), max_size=10)))
    tokens = word_tokenize(sentence)
    assert vocab.decode(vocab.encode(tokens)) == tokens
    assert vocab.decode(vocab.encode(tokens, add_start=True, add_stop=True)) == tokens
    assert word_tokenize(vocab.to_text(tokens)) == tokens


@given(sentences_over_lexicon)
def test_unknown_tokens_map_to_unk(tokens):
    vocab = Vocab.build([["a", "man"]])
    ids = vocab.encode(tokens)
    assert ids == [vocab.stoi.get(t, 1) for t in tokens]
    expected = [t if t in vocab else UNK for t in tokens]
    assert vocab.decode(ids, strip_specials=False) == expected
    assert vocab.decode(ids) == expected  # <unk> stands for a real token: it is kept


def test_lookup_contains_and_unknowns():
    vocab = word_vocab(["A man and a dog."])
    assert len(vocab) == 4 + 5
    assert "man" in vocab and "cat" not in vocab and 3 not in vocab
    assert vocab["cat"] == vocab.unk_id
    assert vocab.encode(["a", "cat"]) == [vocab["a"], 1]
    with pytest.raises(TypeError, match="token must be a str"):
        vocab[4]


def test_encode_adds_start_and_stop():
    vocab = Vocab.build([["x", "y"]])
    assert vocab.encode(["y", "x"], add_start=True, add_stop=True) == [2, 5, 4, 3]


def test_decode_strips_specials_and_stops_at_stop():
    vocab = Vocab.build([["x", "y"]])
    ids = [2, 4, 1, 5, 3, 4, 0, 0]
    assert vocab.decode(ids) == ["x", UNK, "y"]
    assert vocab.decode(torch.tensor(ids)) == ["x", UNK, "y"]
    assert vocab.decode(ids, strip_specials=False) == [
        START, "x", UNK, "y", STOP, "x", EMPTY, EMPTY]


def test_decode_rejects_bad_ids():
    vocab = Vocab.build([["x"]])
    with pytest.raises(ValueError, match="id 5 is outside the vocabulary of size 5"):
        vocab.decode([4, 5])
    with pytest.raises(ValueError, match="id -1 is outside"):
        vocab.decode(torch.tensor([-1]))
    with pytest.raises(ValueError, match=r"1-D tensor, got shape \(1, 2\)"):
        vocab.decode(torch.tensor([[4, 4]]))
    with pytest.raises(TypeError, match="integers, got dtype torch.float32"):
        vocab.decode(torch.tensor([4.0]))
    with pytest.raises(TypeError, match=r"ids\[0\] must be an int, got float 4.0"):
        vocab.decode([4.0])
    with pytest.raises(TypeError, match="got str"):
        vocab.decode("x")


def test_word_level_rejects_str_and_non_str_tokens():
    vocab = word_vocab(["a man"])
    with pytest.raises(TypeError, match="got the str 'a man'"):
        vocab.encode("a man")
    with pytest.raises(TypeError, match="must hold str tokens, got int"):
        vocab.encode([1, 2])
    with pytest.raises(TypeError, match="got the str"):
        vocab.to_text("a man")


def test_to_text_joins_by_level():
    assert char_vocab("ab").to_text(["a", "b", " "]) == "ab "
    assert word_vocab(["a b"]).to_text(["a", "b", "."]) == "a b ."
    assert repr(char_vocab("ab")) == "Vocab(level='char', size=6)"


def test_word_vocab_rejects_a_single_sentence():
    with pytest.raises(TypeError, match="got a single str"):
        word_vocab("a man and a dog")


# ---------------------------------------------------------------- pad_batch, one_hot


@given(st.lists(st.lists(st.integers(4, 50), min_size=1, max_size=10), min_size=1, max_size=6),
       st.integers(0, 3))
def test_pad_batch_shapes_mask_and_padding(sequences, pad_id):
    ids, mask = pad_batch(sequences, pad_id=pad_id)
    lengths = [len(s) for s in sequences]
    assert ids.shape == mask.shape == (len(sequences), max(lengths))
    assert ids.dtype == torch.long and mask.dtype == torch.bool
    assert mask.sum(dim=1).tolist() == lengths
    assert (ids[~mask] == pad_id).all()
    for row, seq, n in zip(ids, sequences, lengths, strict=True):
        assert row[:n].tolist() == seq


def test_pad_batch_accepts_tensors():
    ids, mask = pad_batch([torch.tensor([5, 6, 7]), torch.tensor([8])])
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert mask.tolist() == [[True, True, True], [True, False, False]]


def test_pad_batch_rejects_bad_input():
    with pytest.raises(ValueError, match="at least one sequence"):
        pad_batch([])
    with pytest.raises(ValueError, match=r"sequences\[1\] must be a non-empty"):
        pad_batch([[4], []])
    with pytest.raises(TypeError, match=r"sequences\[0\] must hold integer ids"):
        pad_batch([[4.5]])
    with pytest.raises(TypeError, match="list of id sequences"):
        pad_batch(torch.tensor([[4, 5]]))


def test_one_hot():
    x = one_hot(torch.tensor([[0, 2], [1, 1]]), 3)
    assert x.shape == (2, 2, 3) and x.dtype == torch.float32
    assert x.tolist() == [[[1, 0, 0], [0, 0, 1]], [[0, 1, 0], [0, 1, 0]]]
    assert torch.equal(x.argmax(-1), torch.tensor([[0, 2], [1, 1]]))


@pytest.mark.parametrize(
    ("ids", "num_classes", "error", "match"),
    [
        (torch.tensor([0, 3, 7]), 3, ValueError,
         r"ids must lie in \[0, 3\) \(the vocabulary\), got \[3, 7\]"),
        (torch.tensor([-1]), 3, ValueError, r"got \[-1\]"),
        (torch.tensor([0.0]), 3, TypeError, "integer token ids, got dtype torch.float32"),
        (torch.tensor([True]), 3, TypeError, "got dtype torch.bool"),
        ([0, 1], 3, TypeError, "ids must be a torch.Tensor of token ids, got list"),
        (torch.tensor([0]), 0, ValueError, "num_classes must be >= 1"),
    ],
)
def test_one_hot_rejects_bad_input(ids, num_classes, error, match):
    with pytest.raises(error, match=match):
        one_hot(ids, num_classes)


# ---------------------------------------------------------------- real data

DATA_DIR = os.environ.get("SEQLIB_DATA_DIR")


@pytest.mark.skipif(not DATA_DIR, reason="SEQLIB_DATA_DIR is not set: no offline data")
def test_tiny_shakespeare_has_65_characters():
    path = Path(DATA_DIR) / "tinyshakespeare" / "input.txt"
    text = path.read_text(encoding="utf-8")
    vocab = char_vocab(text)
    assert len(vocab) == 65 + len(SPECIALS)
    assert vocab.counts["\n"] > 0 and vocab.unk_id not in vocab.encode(text[:1000])
    assert vocab.to_text(vocab.decode(vocab.encode(text[:1000]))) == text[:1000]


def test_reverse_padded_reverses_ids_and_features_and_keeps_the_padding_last():
    src, src_mask = pad_batch([[4, 5, 6], [7], [8, 9]])
    reversed_src = reverse_padded(src, src_mask.sum(1))
    assert reversed_src.tolist() == [[6, 5, 4], [7, 0, 0], [9, 8, 0]]
    assert torch.equal(reverse_padded(reversed_src, src_mask.sum(1)), src)  # its own inverse
    x = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])[..., None].expand(2, 4, 3)  # (B, T, 3)
    out = reverse_padded(x, torch.tensor([3, 2]))
    assert out[..., 0].tolist() == [[3, 2, 1, 0], [5, 4, 0, 0]] and out.shape == x.shape
