"""Digit strips for image captioning (Fig. 7.1 (d), beyond the chapter): MNIST digits side
by side, captioned with their words.

A strip holds 3 to 5 MNIST digits (LeCun et al., 1998) of 28 x 28 pixels, pasted left to
right on a black canvas of fixed size HEIGHT x WIDTH = 32 x 160, so that strips of any
length batch without padding: 5 digits with the widest gaps take 5 x 28 + 4 x 4 = 156
columns, and shorter strips leave more of the canvas black. Each strip draws, from an
explicit torch.Generator, its number of digits, the digits (images), the gap before each
digit after the first (-4 to 4 pixels: the black borders of MNIST digits may overlap, and
overlapping pixels keep the brighter value), the vertical offset of each digit (0 to 4
rows) and the horizontal offset of the whole group (anywhere on the canvas). Its caption is
the digits' words, "seven two nine", and the decoder's target adds <stop>.

The 10,000 digit images are first split into disjoint sets (`split_digits`); strips of a
split are composed from its digits only, so no digit image of the test strips was seen in
training. Images are (batch, HEIGHT, WIDTH) uint8 tensors, 0 black, 255 ink.
"""

from dataclasses import dataclass

import torch

from seqlib.checks import int_in_range, positive_int
from seqlib.pages.seeds import generator
from seqlib.text import SPECIALS, Vocab

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
DIGIT = 28  # MNIST digits are DIGIT x DIGIT pixels
HEIGHT, WIDTH = 32, 160  # the canvas: 4 rows of vertical play, room for 5 digits
MIN_DIGITS, MAX_DIGITS = 3, 5
GAPS = (-4, 4)  # smallest and largest gap between neighbouring digits, in pixels
SPLITS = {"train": 8000, "val": 1000, "test": 1000}


def vocab() -> Vocab:
    """The captions' vocabulary: the four special tokens, then "zero" ... "nine", so that
    digit d has id 4 + d."""
    return Vocab(list(SPECIALS) + list(WORDS))


def caption(digits) -> str:
    """The words of a list of digits: [7, 2, 9] -> "seven two nine"."""
    return " ".join(WORDS[d] for d in digits)


def _check_digit_images(images, labels) -> None:
    if not isinstance(images, torch.Tensor) or images.dtype != torch.uint8:
        got = images.dtype if isinstance(images, torch.Tensor) else type(images).__name__
        raise TypeError(f"images must be a uint8 tensor of MNIST digits, got {got}")
    if images.dim() != 3 or tuple(images.shape[1:]) != (DIGIT, DIGIT):
        raise ValueError(f"images must have shape (N, {DIGIT}, {DIGIT}), got "
                         f"{tuple(images.shape)}")
    if not isinstance(labels, torch.Tensor) or labels.shape != images.shape[:1]:
        got = tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ValueError(f"labels must be a tensor of shape ({len(images)},), got {got}")


def split_digits(n: int = 10_000, sizes: dict | None = None, seed: int = 0) -> dict:
    """Disjoint index sets of the n digit images, {split: indices}, of the given sizes
    (default SPLITS: 8,000 / 1,000 / 1,000), cut from one seeded permutation. (The MNIST
    test set is ordered: its first and second halves come from different groups of
    writers, so contiguous blocks of indices would give splits of different difficulty.)"""
    sizes = dict(SPLITS if sizes is None else sizes)
    for name, size in sizes.items():
        positive_int(f"sizes[{name!r}]", size)
    if sum(sizes.values()) > n:
        raise ValueError(f"sizes must add up to at most n={n}, got {sizes}")
    order = torch.randperm(n, generator=generator(seed))
    splits, at = {}, 0
    for name, size in sizes.items():
        splits[name] = order[at:at + size].sort().values
        at += size
    return splits


@dataclass
class Strips:
    """Composed strips: images (N, HEIGHT, WIDTH) uint8; for each strip its digits, the
    indices of the digit images used, and the (x, y) top-left corner of each digit."""

    images: torch.Tensor
    digits: list
    sources: list
    corners: list

    def __len__(self) -> int:
        return len(self.images)

    def captions(self) -> list[str]:
        """The strips' captions, "seven two nine" (without <stop>)."""
        return [caption(d) for d in self.digits]

    def targets(self) -> list[list[int]]:
        """The decoder's targets: <start> words <stop>, as ids of `vocab()`."""
        return [vocab().encode(caption(d).split(), add_start=True, add_stop=True)
                for d in self.digits]


def compose(images: torch.Tensor, labels: torch.Tensor, pool, count: int,
            generator: torch.Generator, *, digits: tuple = (MIN_DIGITS, MAX_DIGITS)) -> Strips:
    """`count` strips of digits drawn (with replacement) from the images whose indices are in
    `pool`, every random choice from `generator`. `digits` = (fewest, most) digits per
    strip, between MIN_DIGITS and MAX_DIGITS."""
    _check_digit_images(images, labels)
    if not isinstance(digits, tuple) or len(digits) != 2:
        raise ValueError(f"digits must be a pair (fewest, most), got {digits!r}")
    low = int_in_range("digits[0], the fewest digits,", digits[0], MIN_DIGITS, MAX_DIGITS)
    high = int_in_range("digits[1], the most digits,", digits[1], low, MAX_DIGITS)
    positive_int("count", count)
    pool = torch.as_tensor(pool, dtype=torch.long)
    if pool.dim() != 1 or len(pool) == 0 or pool.min() < 0 or pool.max() >= len(images):
        raise ValueError(f"pool must be a non-empty 1-D set of indices into the {len(images)} "
                         "images")
    canvas = torch.zeros(count, HEIGHT, WIDTH, dtype=torch.uint8)
    all_digits, sources, corners = [], [], []
    for i in range(count):
        n = int(torch.randint(low, high + 1, (), generator=generator))
        index = pool[torch.randint(len(pool), (n,), generator=generator)]  # (n,)
        gaps = torch.randint(GAPS[0], GAPS[1] + 1, (n,), generator=generator)
        gaps[0] = 0  # no gap before the first digit
        ys = torch.randint(0, HEIGHT - DIGIT + 1, (n,), generator=generator)
        xs = torch.cumsum(gaps + DIGIT, 0) - DIGIT  # left edges, the first at 0
        width = int(xs[-1]) + DIGIT
        xs = xs + int(torch.randint(0, WIDTH - width + 1, (), generator=generator))
        for j in range(n):
            x, y = int(xs[j]), int(ys[j])
            box = (i, slice(y, y + DIGIT), slice(x, x + DIGIT))
            canvas[box] = torch.maximum(canvas[box], images[index[j]])  # overlaps keep ink
        all_digits.append(labels[index].tolist())
        sources.append(index.tolist())
        corners.append(list(zip(xs.tolist(), ys.tolist(), strict=True)))
    return Strips(canvas, all_digits, sources, corners)


def check_strips(images) -> torch.Tensor:
    """Return `images` if it is a (B, HEIGHT, WIDTH) uint8 batch of strips, else raise."""
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
    if images.dtype != torch.uint8:
        raise TypeError(f"images must be uint8 pixels (0 black, 255 ink), got dtype "
                        f"{images.dtype}")
    if images.dim() != 3 or tuple(images.shape[1:]) != (HEIGHT, WIDTH) or len(images) == 0:
        raise ValueError(f"images must have shape (B, {HEIGHT}, {WIDTH}) with B >= 1, got "
                         f"{tuple(images.shape)}")
    return images
