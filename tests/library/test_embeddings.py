"""word2vec (skip-gram and CBOW with negative sampling) and the embedding utilities."""

import math

import pytest
import torch
import torch.nn.functional as F

from seqlib.embeddings import (
    CBOW,
    SkipGram,
    Word2Vec,
    cbow_examples,
    cosine_similarity,
    nearest_neighbours,
    negative_sampling_loss,
    skipgram_pairs,
)
from seqlib.experiments.word2vec import noise_distribution, sample_negatives, subsample


def log_sigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x))


# --- training examples ------------------------------------------------------------------


@pytest.mark.parametrize("length, window", [(5, 1), (5, 2), (7, 3), (3, 5)])
def test_skipgram_pairs_are_all_pairs_within_the_window(length, window):
    ids = torch.arange(10, 10 + length)
    centres, contexts = skipgram_pairs(ids, window)
    expected = sorted((10 + i, 10 + j) for i in range(length) for j in range(length)
                      if 0 < abs(i - j) <= window)
    assert centres.shape == contexts.shape == (len(expected),)
    assert sorted(zip(centres.tolist(), contexts.tolist(), strict=True)) == expected


def test_cbow_examples_hold_the_window_on_each_side():
    ids = torch.tensor([5, 6, 7, 8, 9, 10])
    contexts, targets = cbow_examples(ids, window=2)
    assert contexts.shape == (2, 4) and targets.shape == (2,)
    assert targets.tolist() == [7, 8]
    assert contexts.tolist() == [[5, 6, 8, 9], [6, 7, 9, 10]]


@pytest.mark.parametrize("make", [skipgram_pairs, cbow_examples])
def test_examples_reject_bad_input(make):
    ids = torch.arange(20)
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        make(ids, 0)
    with pytest.raises(TypeError, match="window must be an int"):
        make(ids, 1.5)
    with pytest.raises(TypeError, match="ids must hold integer token ids"):
        make(ids.float(), 2)
    with pytest.raises(ValueError, match=r"ids must have 1 dimension\(s\), got shape \(4, 5\)"):
        make(ids.view(4, 5), 2)
    with pytest.raises(ValueError, match="ids must hold at least"):
        make(ids[:1], 1)


# --- noise distribution and subsampling -------------------------------------------------


def test_noise_distribution_is_unigram_to_the_three_quarters():
    counts = torch.tensor([0, 1, 16, 81])
    p = noise_distribution(counts)
    expected = torch.tensor([0.0, 1.0, 8.0, 27.0]) / 36.0
    torch.testing.assert_close(p, expected)
    torch.testing.assert_close(noise_distribution(counts, power=1.0), counts / 98.0)
    assert p[0] == 0  # a word never seen is never drawn


def test_noise_distribution_rejects_bad_counts():
    with pytest.raises(ValueError, match="counts must be a 1-D tensor of non-negative"):
        noise_distribution(torch.tensor([1, -1, 3]))
    with pytest.raises(ValueError, match="positive sum"):
        noise_distribution(torch.zeros(4))
    with pytest.raises(ValueError, match="power must be a number >= 0"):
        noise_distribution(torch.ones(4), power=-1)


def test_sample_negatives_follows_the_noise_distribution():
    noise = torch.tensor([0.0, 0.2, 0.8])
    draws = sample_negatives(noise, (4000, 5), generator=torch.Generator().manual_seed(0))
    assert draws.shape == (4000, 5)
    freq = torch.bincount(draws.flatten(), minlength=3) / draws.numel()
    assert freq[0] == 0
    assert abs(freq[2].item() - 0.8) < 0.01  # 20,000 draws: standard error 0.003
    with pytest.raises(ValueError, match=r"noise must be a 1-D tensor of probabilities, got "
                                         r"shape \(2, 2\)"):
        sample_negatives(torch.ones(2, 2), (3,))
    with pytest.raises(TypeError, match="noise must be a 1-D tensor"):
        sample_negatives([0.5, 0.5], (3,))


def test_subsample_thins_frequent_words_only():
    counts = torch.tensor([9000, 100, 10])  # frequencies 0.989, 0.011, 0.0011
    ids = torch.cat([torch.full((9000,), 0), torch.full((100,), 1), torch.full((10,), 2)])
    kept = subsample(ids, counts, threshold=1e-2, generator=torch.Generator().manual_seed(0))
    n = torch.bincount(kept, minlength=3)
    keep_0 = math.sqrt(1e-2 / (9000 / 9110))  # about 0.10
    assert abs(n[0].item() / 9000 - keep_0) < 0.02
    assert n[1].item() > 90  # keep probability 0.95
    assert n[2].item() == 10  # rarer than the threshold: always kept


# --- the loss ------------------------------------------------------------------------------


def test_negative_sampling_loss_matches_a_hand_computation():
    h = torch.tensor([[1.0, 2.0], [0.5, -1.0]])
    u_target = torch.tensor([[0.5, 0.25], [-1.0, 0.0]])
    u_noise = torch.tensor([[[1.0, -1.0], [0.0, 0.5]], [[2.0, 1.0], [-0.5, 0.5]]])
    # example 1: u_o.h = 1, noise scores -1 and 1; example 2: -0.5, noise 0 and -0.75
    by_hand = [
        -(log_sigmoid(1.0) + log_sigmoid(1.0) + log_sigmoid(-1.0)),
        -(log_sigmoid(-0.5) + log_sigmoid(0.0) + log_sigmoid(0.75)),
    ]
    loss = negative_sampling_loss(h, u_target, u_noise)
    assert loss.item() == pytest.approx(sum(by_hand) / 2, rel=1e-6)


def test_negative_sampling_loss_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"expected h \(N, d\)"):
        negative_sampling_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 4, 2))


def test_skipgram_forward_uses_input_vectors_of_centres_and_output_vectors_of_targets():
    model = SkipGram(vocab_size=4, dim=2)
    with torch.no_grad():
        model.in_embed.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, 2.0], [0.5, -1.0], [3, 3]]))
        model.out_embed.weight.copy_(torch.tensor([[1.0, -1.0], [0.5, 0.25], [0.0, 0.5], [2, 1]]))
    # centre 1 with context 1 (u = (0.5, 0.25)) and noise words 0, 2
    loss = model(torch.tensor([1]), torch.tensor([1]), torch.tensor([[0, 2]]))
    by_hand = -(log_sigmoid(1.0) + log_sigmoid(1.0) + log_sigmoid(-1.0))
    assert loss.item() == pytest.approx(by_hand, rel=1e-6)


def test_cbow_averages_the_context_vectors():
    gen = torch.Generator().manual_seed(0)
    model = CBOW(vocab_size=10, dim=3)
    with torch.no_grad():
        model.in_embed.weight.copy_(torch.randn(10, 3, generator=gen))
        model.out_embed.weight.copy_(torch.randn(10, 3, generator=gen))
    contexts = torch.tensor([[1, 2, 4, 5], [0, 0, 9, 3]])
    v = model.in_embed.weight
    h = model.hidden(contexts)
    torch.testing.assert_close(h[0], (v[1] + v[2] + v[4] + v[5]) / 4)
    torch.testing.assert_close(h[1], (2 * v[0] + v[9] + v[3]) / 4)
    targets, negatives = torch.tensor([3, 7]), torch.tensor([[1, 2, 3], [4, 5, 6]])
    u = model.out_embed.weight
    expected = negative_sampling_loss(h, u[targets], u[negatives])
    torch.testing.assert_close(model(contexts, targets, negatives), expected)


def test_models_start_from_small_input_and_zero_output_vectors():
    model = SkipGram(50, 8)
    assert model.vectors.shape == (50, 8) and not model.vectors.requires_grad
    assert model.in_embed.weight.abs().max() <= 0.5 / 8
    assert (model.out_embed.weight == 0).all()
    # zero output vectors: every score is 0, so the loss is (K + 1) log 2
    loss = model(torch.tensor([1, 2]), torch.tensor([3, 4]), torch.zeros(2, 5, dtype=torch.long))
    assert loss.item() == pytest.approx(6 * math.log(2), rel=1e-6)


def test_models_reject_bad_batches():
    model = CBOW(10, 4)
    ok_neg = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=r"contexts must have 2 dimension\(s\), got shape \(2,\)"):
        model(torch.tensor([1, 2]), torch.tensor([1, 2]), ok_neg)
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 10\)"):
        model(torch.ones(2, 4, dtype=torch.long), torch.tensor([1, 10]), ok_neg)
    with pytest.raises(ValueError, match="same batch size, got 2, 3 and 2"):
        model(torch.ones(2, 4, dtype=torch.long), torch.tensor([1, 2, 3]), ok_neg)
    with pytest.raises(ValueError, match="dim must be >= 1"):
        SkipGram(10, 0)
    with pytest.raises(NotImplementedError):  # the base class leaves h to the subclasses
        Word2Vec(10, 4)(torch.tensor([1]), torch.tensor([1]), ok_neg[:1])


# --- training brings co-occurring words together -----------------------------------------


@pytest.mark.parametrize("Model", [SkipGram, CBOW])
def test_training_brings_co_occurring_words_closer(Model):
    """Two topics that never share a sentence: words 4-7 and words 8-11."""
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    topic = torch.randint(0, 2, (400,), generator=gen)  # one topic per 8-word sentence
    words = 4 + 4 * topic[:, None] + torch.randint(0, 4, (400, 8), generator=gen)
    ids = words.flatten()  # sentences glued together: a little cross-topic noise
    if Model is SkipGram:
        inputs, targets = skipgram_pairs(ids, window=2)
    else:
        inputs, targets = cbow_examples(ids, window=2)
    noise = noise_distribution(torch.bincount(ids, minlength=12))
    model = Model(12, 8)

    def mean_cos(vectors):
        cos = cosine_similarity(vectors[4:12, None], vectors[None, 4:12])  # (8, 8)
        same = torch.block_diag(torch.ones(4, 4), torch.ones(4, 4)).bool()
        same &= ~torch.eye(8, dtype=torch.bool)
        different = ~torch.block_diag(torch.ones(4, 4), torch.ones(4, 4)).bool()
        return cos[same].mean().item(), cos[different].mean().item()

    same_before, _ = mean_cos(model.vectors)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(150):
        batch = torch.randint(0, len(targets), (256,), generator=gen)
        negatives = sample_negatives(noise, (256, 5), generator=gen)
        loss = model(inputs[batch], targets[batch], negatives)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    same_after, different_after = mean_cos(model.vectors)
    assert same_after > same_before + 0.3
    assert same_after > 0.5 > different_after
    assert nearest_neighbours(model.vectors, [str(i) for i in range(12)], "5", k=3,
                              exclude=[str(i) for i in range(4)])[0][0] in {"4", "6", "7"}


# --- similarity and neighbours ----------------------------------------------------------


def test_cosine_similarity_matches_torch_and_broadcasts():
    gen = torch.Generator().manual_seed(1)
    a, b = torch.randn(5, 1, 3, generator=gen), torch.randn(1, 4, 3, generator=gen)
    cos = cosine_similarity(a, b)
    assert cos.shape == (5, 4)
    torch.testing.assert_close(cos, F.cosine_similarity(a, b, dim=-1))
    assert cosine_similarity(torch.tensor([1.0, 0]), torch.tensor([0.0, 2])).item() == 0
    with pytest.raises(ValueError, match="same last dimension"):
        cosine_similarity(torch.ones(3), torch.ones(4))
    with pytest.raises(TypeError, match="a and b must be tensors"):
        cosine_similarity([1.0, 0.0], torch.ones(2))


WORDS = ["<empty>", "<unk>", "<start>", "<stop>", "king", "queen", "man", "woman"]
VECTORS = torch.tensor([[0.0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 0, 0],
                        [1.0, 1, 0], [1, 0, 1], [0.1, 1, 0], [0.1, 0, 1]])


def test_nearest_neighbours_of_a_word_and_of_a_vector():
    first = nearest_neighbours(VECTORS, WORDS, "king", k=3)
    assert [w for w, _ in first] == ["man", "queen", "woman"]  # specials excluded by default
    assert first[0][1] == pytest.approx(1.1 / (math.sqrt(2) * math.sqrt(1.01)), rel=1e-6)
    analogy = VECTORS[4] - VECTORS[6] + VECTORS[7]  # king - man + woman
    assert nearest_neighbours(VECTORS, WORDS, analogy, k=1, exclude=["king", "woman"]) \
        == [("queen", pytest.approx(1.0, abs=1e-6))]
    with_unk = nearest_neighbours(VECTORS, WORDS, "king", k=1, exclude=[])
    assert with_unk[0][0] == "<unk>"  # (1, 1, 1) is closer to (1, 1, 0) than man is


def test_nearest_neighbours_rejects_bad_input():
    with pytest.raises(ValueError, match="query word 'prince' is not in the vocabulary"):
        nearest_neighbours(VECTORS, WORDS, "prince")
    with pytest.raises(ValueError, match=r"query must be a word or a vector of shape \(3,\)"):
        nearest_neighbours(VECTORS, WORDS, torch.ones(4))
    with pytest.raises(ValueError, match="V = len\\(vocab\\) = 7"):
        nearest_neighbours(VECTORS, WORDS[:7], "king")
    with pytest.raises(ValueError, match="k must be at most the 3 words not excluded, got 4"):
        nearest_neighbours(VECTORS, WORDS, "king", k=4)
