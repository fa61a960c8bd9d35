"""Checkers for the exercises of the page on sequence data and word embeddings (Section 7.1).

- `check_analogy`: a solver of word analogies "a is to b as c is to ?" by the cosine of the
  offset vector v_b - v_a + v_c, the query words left out.
"""

import operator
from collections.abc import Callable

import torch

from seqlib.embeddings import cosine_similarity
from seqlib.exercises.toolkit import (
    expect,
    name_mistake,
    passed,
    require_callable,
    run_attempt,
)


def _solve(vectors: torch.Tensor, words: list, a: str, b: str, c: str, *, offset=(-1, 1, 1),
           score: str = "cosine", exclude: bool = True) -> str:
    """The analogy answer, or the answer of a typical mistake: another `offset` (the signs
    of v_a, v_b, v_c in the query), another `score` (dot product, Euclidean distance) or no
    exclusion of the query words."""
    index = {w: i for i, w in enumerate(words)}
    query = sum(s * vectors[index[w]] for s, w in zip(offset, (a, b, c), strict=True))
    if score == "cosine":
        scores = cosine_similarity(vectors, query)
    elif score == "dot":
        scores = vectors @ query
    else:  # "euclidean": the nearest vector, as minus the distance
        scores = -(vectors - query).norm(dim=-1)
    scores = scores.clone()
    if exclude:
        scores[[index[a], index[b], index[c]]] = -float("inf")
    return words[int(scores.argmax())]


NO_EXCLUSION = ("leave the three query words a, b and c out of the candidates: the offset "
                "vector is often closest to b or c themselves")
MISTAKES = [  # (keyword arguments of _solve, what to say when an attempt answers as it does)
    (dict(exclude=False), NO_EXCLUSION),
    (dict(score="dot"), "it ranks the candidates by the dot product with the query, which "
                        "favours long vectors; rank them by the cosine (divide by both norms)"),
    (dict(score="euclidean"), "it ranks the candidates by Euclidean distance to the query; "
                              "rank them by the cosine, which ignores the lengths of the "
                              "vectors"),
    (dict(offset=(1, -1, 1)), "the query looks like v_a - v_b + v_c; 'a is to b as c is to d' "
                              "means d - c = b - a, so the query is v_b - v_a + v_c"),
    (dict(offset=(1, 1, -1)), "the query looks like v_a + v_b - v_c; 'a is to b as c is to d' "
                              "means d - c = b - a, so the query is v_b - v_a + v_c"),
]


def _cases() -> list:
    """(vectors, words, [(a, b, c), ...]) test cases, each built so that the typical
    mistakes give other answers than the right one."""
    # The book's hand-made vectors: royalty, masculinity, femininity, age.
    royal = ["king", "queen", "man", "woman", "prince", "princess"]
    features = torch.tensor([[0.95, 0.90, 0.05, 0.70], [0.95, 0.05, 0.90, 0.70],
                             [0.05, 0.90, 0.05, 0.60], [0.05, 0.05, 0.90, 0.60],
                             [0.85, 0.90, 0.05, 0.20], [0.85, 0.05, 0.90, 0.20]])
    cases = [(features, royal, [("man", "king", "woman"), ("king", "prince", "queen")])]
    # a and c nearly equal, so the query is close to b itself; and a long vector "the"
    # that wins on the dot product and on nothing else.
    words = ["paris", "france", "rome", "italy", "berlin", "the", "germany"]
    vectors = torch.tensor([[1.0, 0.1, 0.0, 0.0], [1.0, 0.1, 1.0, 0.0],
                            [0.9, 0.3, 0.0, 0.0], [0.75, 0.3, 1.0, 0.2],
                            [0.0, 1.0, 0.0, 0.0], [6.0, 1.0, 3.0, -6.0],
                            [0.0, 1.0, 1.0, 0.0]])
    cases.append((vectors, words, [("paris", "france", "rome"), ("france", "paris", "italy")]))
    # A long vector along the query (the answer by cosine and by dot product) and a short one
    # less well aligned but nearer to the query (the answer by Euclidean distance).
    words = ["day", "sun", "night", "moon", "lamp"]
    vectors = torch.tensor([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0],
                            [10.0, 0.5, 9.0], [0.9, 0.3, 0.6]])
    cases.append((vectors, words, [("day", "sun", "night")]))
    # Random vectors: many analogies, the right answer by the reference.
    g = torch.Generator().manual_seed(2024)
    words = [f"w{i}" for i in range(40)]
    vectors = torch.randn(40, 6, generator=g, dtype=torch.float64)
    triples = [tuple(words[int(i)] for i in torch.randperm(40, generator=g)[:3])
               for _ in range(25)]
    cases.append((vectors, words, triples))
    return cases


def check_analogy(attempt: Callable) -> None:
    """Check `attempt(vectors, words, a, b, c) -> str`: for the rows of `vectors` (V, d),
    the vectors of the V words of the list `words`, the word d that solves "a is to b as c
    is to d", the one whose vector has the largest cosine with v_b - v_a + v_c among all
    words other than a, b and c."""
    require_callable(attempt, "analogy(vectors, words, a, b, c) -> word")
    count = 0
    for vectors, words, triples in _cases():
        for a, b, c in triples:
            before = vectors.clone()
            got = run_attempt(attempt, vectors, list(words), a, b, c,
                              what=f"analogy(vectors, words, {a!r}, {b!r}, {c!r})")
            expect(torch.equal(vectors, before),
                   "your function changed `vectors` in place; work on a copy (or on new "
                   "tensors such as vectors / norms)")
            expect(isinstance(got, str),
                   f"analogy should return a word (a str), got {type(got).__name__} {got!r}")
            expect(got in words, f"analogy returned {got!r}, which is not one of the words")
            right = _solve(vectors, words, a, b, c)
            index = {w: i for i, w in enumerate(words)}
            query = vectors[index[b]] - vectors[index[a]] + vectors[index[c]]
            cos_got = cosine_similarity(vectors[index[got]], query).item()
            cos_right = cosine_similarity(vectors[index[right]], query).item()
            what = (f"{a} : {b} = {c} : ? returned {got!r} (cosine {cos_got:.3f} with "
                    f"v_b - v_a + v_c), expected {right!r} (cosine {cos_right:.3f})")
            if got != right:  # a mistake may give the right word in some cases
                name_mistake(what, got, ((_solve(vectors, words, a, b, c, **kwargs), say)
                                         for kwargs, say in MISTAKES), same=operator.eq)
                expect(got not in (a, b, c), f"{what}: {NO_EXCLUSION}")
            expect(got == right, what)
            count += 1
    passed(f"analogy solves all {count} analogies of the test cases, query words left out")


__all__ = ["check_analogy"]
