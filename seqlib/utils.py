"""The device and the count of parameters: the helpers every chapter shares."""

import os

import torch
from torch import nn

DEVICE_VARIABLE = "SEQLIB_DEVICE"


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
