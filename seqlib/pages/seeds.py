"""The book's one seeding rule: every seed a page or an experiment draws is offset by
SEQLIB_SEED (0 by default: the stored outputs), so that another offset trains every model
from other random numbers (initial weights, data order, splits, dropout, sampling) and a page
shows what holds for the method rather than for one run.
"""

import os
import random

import numpy as np
import torch

from seqlib.checks import check_int

SEED_VARIABLE = "SEQLIB_SEED"


def seed_offset() -> int:
    """SEQLIB_SEED (unset: 0), added to every seed the book draws: with another N, every
    model starts and trains from other random numbers, and a page shows what holds for the
    method rather than for one run."""
    text = os.environ.get(SEED_VARIABLE, "").strip() or "0"
    if not text.isdigit():
        raise ValueError(f"{SEED_VARIABLE}={text!r} is not a seed offset; expected a whole "
                         "number such as 0 (the stored outputs), 1 or 2")
    return int(text)


def book_seed(seed: int) -> int:
    """The seed the book draws for `seed`: seed + SEQLIB_SEED (`seed_offset`)."""
    return check_int("seed", seed) + seed_offset()


def generator(seed: int) -> torch.Generator:
    """A CPU generator seeded with book_seed(seed): random data, the same on every device."""
    return torch.Generator().manual_seed(book_seed(seed))


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch with book_seed(seed), make PyTorch deterministic, and
    return `generator(seed)`: the book draws its random data from it, the same whatever
    device the models run on."""
    seed = book_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    # cuBLAS needs a fixed workspace to be deterministic; harmless on the CPU.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    return torch.Generator().manual_seed(seed)
