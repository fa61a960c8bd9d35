"""The data sets of the pages beyond the chapter, read from the files that seqlib.data
fetches and checks: the sentence polarity data set (pages 14 and 22), the MNIST test digits
(page 15) and Melbourne's daily minimum temperatures (page 13). Sources and licences are
in seqlib.data.

Sentence polarity: Pang & Lee (2005), "Seeing stars", ACL (the copy distributed with Kim
(2014)'s code). MNIST: LeCun et al. (1998). Temperatures: Australian Bureau of Meteorology.
"""

import datetime
import gzip
import pathlib
import zlib

import torch

from seqlib.data import fetch


def movie_reviews(data_dir=None) -> list[tuple[str, int]]:
    """The sentence polarity data set: ``(sentence, label)`` pairs, label 1 for the 5,331
    positive snippets, then 0 for the 5,331 negative ones, in file order.

    The files are Latin-1 text, one lowercased, tokenised sentence a line. The data set has
    no official split (its usual protocol is 10-fold cross-validation).
    """
    pairs = []
    for label, name in ((1, "pos"), (0, "neg")):
        path = fetch(f"movie-review-polarity/rt-polarity.{name}", data_dir)
        lines = path.read_bytes().decode("latin-1").split("\n")
        pairs += [(line.strip(), label) for line in lines if line.strip()]
    return pairs


def _idx(path: pathlib.Path, dims: int) -> torch.Tensor:
    """An unsigned-byte IDX array (the MNIST format) with ``dims`` dimensions, as uint8."""
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(f"{path} is not a valid gzip file ({err}); delete it and retry") from err
    magic = int.from_bytes(raw[:4], "big")
    if magic != 0x0800 + dims:
        raise ValueError(
            f"{path}: IDX magic number {magic:#06x}, expected {0x0800 + dims:#06x} "
            f"(unsigned bytes, {dims} dimensions)"
        )
    shape = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    body = raw[4 + 4 * dims:]
    if len(body) != torch.Size(shape).numel():
        raise ValueError(f"{path}: {len(body)} data bytes for shape {shape}")
    return torch.frombuffer(bytearray(body), dtype=torch.uint8).reshape(shape)


def mnist_test(data_dir=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The 10,000 MNIST test digits: images ``(10000, 28, 28)`` uint8 (0 background, 255
    ink) and labels ``(10000,)`` int64 in 0..9."""
    images = _idx(fetch("mnist/t10k-images-idx3-ubyte.gz", data_dir), 3)
    labels = _idx(fetch("mnist/t10k-labels-idx1-ubyte.gz", data_dir), 1)
    if len(images) != len(labels):
        raise ValueError(f"MNIST: {len(images)} images but {len(labels)} labels")
    return images, labels.long()


def daily_min_temperatures(data_dir=None) -> tuple[list[datetime.date], torch.Tensor]:
    """Melbourne's daily minimum temperature (degrees Celsius), 1981-01-01 to 1990-12-31:
    the dates and a float64 tensor of the 3,650 values, in order."""
    path = fetch("temperatures/daily-min-temperatures.csv", data_dir)
    lines = path.read_text(encoding="utf-8").strip().splitlines()
    if lines[0].strip() != "Date,Temp":
        raise ValueError(f"{path}: header {lines[0]!r}, expected 'Date,Temp'")
    dates, values = [], []
    for number, line in enumerate(lines[1:], start=2):
        try:
            day, value = line.split(",")
            dates.append(datetime.date.fromisoformat(day.strip()))
            values.append(float(value))
        except ValueError as err:
            raise ValueError(f"{path}, line {number}: {line!r} is not 'YYYY-MM-DD,value'") from err
    return dates, torch.tensor(values, dtype=torch.float64)
