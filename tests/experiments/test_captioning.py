"""Digit strips (seqlib.experiments.digits) and the captioners of seqlib.experiments.captioning."""

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seqlib.decoding import beam_search, greedy
from seqlib.experiments import captioning as cp
from seqlib.experiments import digits as dg
from seqlib.experiments import runs
from seqlib.pages.seeds import seed_everything


def fake_digits(n=60):
    """n random 28 x 28 "digits", each a filled box of its label's brightness, labels 0-9."""
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 10, (n,), generator=g)
    images = torch.zeros(n, 28, 28, dtype=torch.uint8)
    images[:, 4:24, 6:22] = (labels * 20 + 55).to(torch.uint8)[:, None, None]
    return images, labels


IMAGES, LABELS = fake_digits()
V = len(dg.vocab())


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run on one thread, as the chapters do: several threads on such small
    tensors are slower, and far slower on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def strips(count=6, seed=0, pool=None):
    pool = torch.arange(len(IMAGES)) if pool is None else pool
    return dg.compose(IMAGES, LABELS, pool, count, torch.Generator().manual_seed(seed))


def test_vocab_and_captions():
    vocab = dg.vocab()
    assert [vocab[w] for w in dg.WORDS] == list(range(4, 14))
    assert dg.caption([7, 2, 9]) == "seven two nine"
    s = strips(3)
    for digits, target in zip(s.digits, s.targets(), strict=True):
        assert target == [vocab.start_id] + [4 + d for d in digits] + [vocab.stop_id]


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(3, 5), st.integers(3, 5))
def test_strips_hold_their_digits_within_the_canvas(seed, a, b):
    low, high = min(a, b), max(a, b)
    s = dg.compose(IMAGES, LABELS, torch.arange(60), 4, torch.Generator().manual_seed(seed),
                   digits=(low, high))
    assert s.images.shape == (4, dg.HEIGHT, dg.WIDTH) and s.images.dtype == torch.uint8
    for image, digits, sources, corners in zip(s.images, s.digits, s.sources, s.corners,
                                               strict=True):
        assert low <= len(digits) <= high
        assert digits == LABELS[sources].tolist()  # the caption names the digits used
        xs = [x for x, _ in corners]
        for (x, y), j in zip(corners, sources, strict=True):
            assert 0 <= x <= dg.WIDTH - 28 and 0 <= y <= dg.HEIGHT - 28
            # every digit's ink is on the canvas (overlaps keep the brighter pixel)
            assert (image[y:y + 28, x:x + 28] >= IMAGES[j]).all()
        gaps = [b - a - 28 for a, b in itertools.pairwise(xs)]
        assert all(dg.GAPS[0] <= gap <= dg.GAPS[1] for gap in gaps)  # left to right
        mask = torch.zeros_like(image, dtype=torch.bool)
        for x, y in corners:
            mask[y:y + 28, x:x + 28] = True
        assert (image[~mask] == 0).all()  # nothing outside the digits


def test_splits_are_disjoint_and_strips_use_their_own_digits():
    splits = dg.split_digits()
    assert {k: len(v) for k, v in splits.items()} == dg.SPLITS
    every = torch.cat(list(splits.values()))
    assert len(every.unique()) == len(every) == 10_000  # disjoint, and all of them
    small = dg.split_digits(60, {"train": 40, "val": 10, "test": 10})
    used = {name: {j for row in strips(30, 1, pool).sources for j in row}
            for name, pool in small.items()}
    for name, pool in small.items():
        assert used[name] <= set(pool.tolist())
    assert not (used["train"] & used["val"]) and not (used["train"] & used["test"])
    assert not (used["val"] & used["test"])


def test_bad_input_errors():
    g = torch.Generator()
    with pytest.raises(ValueError, match=r"digits\[0\], the fewest digits, must be an int "
                                         r"from 3 to 5, got 2"):
        dg.compose(IMAGES, LABELS, torch.arange(60), 2, g, digits=(2, 5))
    with pytest.raises(ValueError, match=r"digits\[1\], the most digits, must be an int from "
                                         r"3 to 5, got 6"):
        dg.compose(IMAGES, LABELS, torch.arange(60), 2, g, digits=(3, 6))
    with pytest.raises(ValueError, match=r"digits must be a pair \(fewest, most\), got 4"):
        dg.compose(IMAGES, LABELS, torch.arange(60), 2, g, digits=4)
    with pytest.raises(TypeError, match="images must be a uint8"):
        dg.compose(IMAGES.float(), LABELS, torch.arange(60), 2, g)
    with pytest.raises(ValueError, match=r"images must have shape \(N, 28, 28\)"):
        dg.compose(IMAGES[:, :20], LABELS, torch.arange(60), 2, g)
    with pytest.raises(ValueError, match="count must be a positive int"):
        dg.compose(IMAGES, LABELS, torch.arange(60), 0, g)
    with pytest.raises(ValueError, match="pool must be"):
        dg.compose(IMAGES, LABELS, torch.tensor([60]), 2, g)
    with pytest.raises(ValueError, match="sizes must add up to at most n=100"):
        dg.split_digits(100, {"train": 90, "test": 20})
    with pytest.raises(ValueError, match=r"sizes\['test'\] must be a positive int, got 0"):
        dg.split_digits(100, {"train": 90, "test": 0})
    model = cp.ShowAttendTell()
    with pytest.raises(TypeError, match="images must be uint8"):
        model.encoder(strips(2).images.float())
    with pytest.raises(ValueError, match=r"images must have shape \(B, 32, 160\)"):
        model.encoder(torch.zeros(2, 28, 160, dtype=torch.uint8))
    with pytest.raises(ValueError, match="src must be uint8 pixels"):
        model.start(torch.zeros(2, 7, dtype=torch.long), torch.ones(2, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match="method must be"):
        cp.describe(model, strips(2).images, method="sample")


def test_encoder_grid_and_attention_weights():
    seed_everything(0)
    model = cp.ShowAttendTell()
    images = strips(5).images
    grid = model.encoder(images)
    h, w = model.encoder.grid
    assert (h, w) == (dg.HEIGHT // 8, dg.WIDTH // 8) and grid.shape == (5, h, w, 64)
    src, src_mask = cp.as_source(images)
    assert src.shape == (5, dg.HEIGHT * dg.WIDTH) and src_mask.all()
    assert torch.equal(cp.strips_of(src, src_mask), images)
    batch = cp.collate(strips(5))
    logits, alpha = model(batch["src"], batch["src_mask"], batch["tgt_in"],
                          return_attention=True)
    assert logits.shape == (*batch["tgt_in"].shape, V)
    assert alpha.shape == (*batch["tgt_in"].shape, h * w)  # one weight per grid location
    assert torch.allclose(alpha.sum(-1), torch.ones(alpha.shape[:2]))
    assert (alpha >= 0).all()


@pytest.mark.parametrize("cls", [cp.ShowAndTell, cp.ShowAttendTell])
def test_teacher_forcing_equals_stepwise_greedy_and_beam_one(cls):
    seed_everything(0)
    model = cls(embed_size=8, hidden_size=16, channels=(4, 8, 8)).eval()
    images = strips(6, seed=3).images
    src, src_mask = cp.as_source(images)
    vocab = dg.vocab()
    special = {"start_id": vocab.start_id, "stop_id": vocab.stop_id, "max_len": 7}
    out = greedy(model, src, src_mask, **special)
    for b, tokens in enumerate(out):  # teacher forcing on the greedy output gives it back
        tgt_in = torch.tensor([[vocab.start_id] + tokens])
        with torch.no_grad():
            logits = model(src[b:b + 1], src_mask[b:b + 1], tgt_in)  # (1, T, V)
        chosen = logits[0].argmax(-1).tolist()
        assert chosen[:len(tokens)] == tokens
        if len(tokens) < special["max_len"]:
            assert chosen[len(tokens)] == vocab.stop_id
    beam = beam_search(model, src, src_mask, beam_size=1, **special)
    assert [hyps[0][0] for hyps in beam] == out
    text = cp.describe(model, images)
    assert text == [vocab.to_text(vocab.decode(t)) for t in out]


def test_a_few_steps_of_training_lower_the_loss_and_scores():
    def run():
        return cp.run("tiny", lambda: cp.ShowAttendTell(embed_size=8, hidden_size=16,
                                                        channels=(4, 8, 8)),
                      (IMAGES, LABELS, torch.arange(60)), dict(steps=20, batch_size=8, lr=1e-2))

    history = runs.fit(run())
    assert runs.fit(run())["loss"] == history["loss"]  # seeded
    assert sum(history["loss"][-5:]) < sum(history["loss"][:5])
    s = strips(6)
    table = cp.scores(s.captions()[:5] + ["one"], s)
    assert table["all"]["count"] == 6 and table["all"]["exact"] == pytest.approx(5 / 6)
    assert sum(row["count"] for n, row in table.items() if n != "all") == 6
    assert cp.scores(s.captions(), s)["all"]["bleu"] == pytest.approx(100)
    three = dg.compose(IMAGES, LABELS, torch.arange(60), 4, torch.Generator(), digits=(3, 3))
    assert cp.scores(three.captions(), three)[3]["bleu"] is None  # no 4-grams: no BLEU-4
