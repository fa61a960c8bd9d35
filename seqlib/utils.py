"""Reproducibility, bookkeeping and source listings: the helpers every chapter shares."""

import inspect
import os
import random

import numpy as np
import torch
from torch import nn

from seqlib.checks import check_int

DEVICE_VARIABLE = "SEQLIB_DEVICE"
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


def default_device() -> torch.device:
    """The device named by SEQLIB_DEVICE, else CUDA when available, else the CPU. On a GPU,
    TF32 is off, so float32 results keep full precision and the book's checks their tolerances."""
    name = os.environ.get(DEVICE_VARIABLE, "").strip()
    if not name:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ValueError(
            f"{DEVICE_VARIABLE}={name!r} is not a device name; expected 'cpu', 'cuda' or 'cuda:N'"
        ) from err
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"{DEVICE_VARIABLE}={name!r} asks for CUDA, but torch.cuda.is_available() is "
                "False; unset the variable or set it to 'cpu'"
            )
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    return device


def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalar parameters of `module` (only those with requires_grad if asked)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def show_source(obj):
    """Syntax-highlighted source of a seqlib object, so the book shows the code that runs."""
    from IPython.display import Code  # only where a page shows it

    return Code(inspect.getsource(obj), language="python")
