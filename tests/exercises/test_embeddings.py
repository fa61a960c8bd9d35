"""The checker of the embeddings page's coding exercise accepts the book's solution and
rejects typical wrong attempts with a message that says what is wrong."""

import pytest
import torch.nn.functional as F

from seqlib.exercises import ExerciseError, check_analogy


def analogy(vectors, words, a, b, c):
    """The book's solution: the word, other than a, b and c, whose vector has the largest
    cosine with v_b - v_a + v_c."""
    index = {w: i for i, w in enumerate(words)}
    query = vectors[index[b]] - vectors[index[a]] + vectors[index[c]]
    cos = F.cosine_similarity(vectors, query[None], dim=-1)  # (V,)
    cos[[index[a], index[b], index[c]]] = -float("inf")
    return words[int(cos.argmax())]


def with_options(*, offset=(-1, 1, 1), score="cosine", exclude=True):
    """A wrong attempt: another query, another score or no exclusion."""
    def attempt(vectors, words, a, b, c):
        index = {w: i for i, w in enumerate(words)}
        query = sum(s * vectors[index[w]] for s, w in zip(offset, (a, b, c), strict=True))
        if score == "cosine":
            scores = F.cosine_similarity(vectors, query[None], dim=-1)
        elif score == "dot":
            scores = vectors @ query
        else:
            scores = -(vectors - query).norm(dim=-1)
        if exclude:
            scores[[index[a], index[b], index[c]]] = -float("inf")
        return words[int(scores.argmax())]
    return attempt


@pytest.mark.parametrize("attempt, message", [
    (with_options(exclude=False), "leave the three query words"),
    (with_options(score="dot"), "dot product"),
    (with_options(score="euclidean"), "Euclidean distance"),
    (with_options(offset=(1, -1, 1)), r"v_a - v_b \+ v_c"),
    (with_options(offset=(1, 1, -1)), r"v_a \+ v_b - v_c"),
])
def test_typical_mistakes_are_named(attempt, message):
    with pytest.raises(ExerciseError, match=message):
        check_analogy(attempt)


def test_wrong_return_values_are_reported():
    def index_instead_of_word(vectors, words, a, b, c):
        return words.index(analogy(vectors, words, a, b, c))

    with pytest.raises(ExerciseError, match="should return a word"):
        check_analogy(index_instead_of_word)

    def always_first(vectors, words, a, b, c):
        return words[0]

    with pytest.raises(ExerciseError, match="expected 'queen'"):
        check_analogy(always_first)


def test_changing_the_vectors_in_place_is_reported():
    def normalise_in_place(vectors, words, a, b, c):
        vectors /= vectors.norm(dim=-1, keepdim=True)
        return analogy(vectors, words, a, b, c)

    with pytest.raises(ExerciseError, match="in place"):
        check_analogy(normalise_in_place)
