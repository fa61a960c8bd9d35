"""The CPU kernels the book's trained numbers were computed with.

A trained model's digits depend on the order in which its sums are added, and on x86-64
each library picks that order from the widest vector instructions the processor has:
PyTorch's own kernels (ATen), MKL's matrix products and oneDNN's convolutions. Held to
AVX2, every x86-64 processor since 2013 adds in the same order, so it computes the stored
outputs digit for digit. The variables are read when torch starts: the Makefile exports
them, and each page's set-up cell calls `pin()` before it imports torch. This module does
not import torch.
"""

import os
import pathlib
import platform
import re
import sys
import warnings

PINS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
X86_64 = {"x86_64", "amd64"}


def pin() -> dict:
    """On x86-64, hold ATen, MKL and oneDNN to AVX2 (each variable not set already: an
    explicit setting wins). Elsewhere nothing is set: an ARM processor computes the exact
    outputs and every claim, not the trained digits. Returns `settings()`."""
    if platform.machine().lower() in X86_64:
        if "torch" in sys.modules and any(os.environ.get(k) != v for k, v in PINS.items()):
            warnings.warn("seqlib.pages.kernels.pin() ran after torch was imported, so the kernels "
                          "may not be held to AVX2: restart the kernel and run the set-up "
                          "cell first", stacklevel=2)
        for name, value in PINS.items():
            os.environ.setdefault(name, value)
    return settings()


def settings() -> dict:
    """The processor's architecture and the kernel variables in force ('' where unset)."""
    return {"machine": platform.machine().lower(),
            **{name: os.environ.get(name, "") for name in PINS}}


def processor() -> str:
    """The processor, as the records of runs name it: its model name, family and model
    numbers, and whether it has AVX-512 (which the pins hold back). Outputs made on one
    processor may round differently on another of the same architecture."""
    cpuinfo = pathlib.Path("/proc/cpuinfo")
    text = cpuinfo.read_text() if cpuinfo.exists() else ""

    def field(name: str) -> str:
        found = re.search(rf"^{name}\s*:\s*(.*)$", text, re.M)
        return found.group(1).strip() if found else ""

    name = field("model name") or platform.processor() or platform.machine()
    details = [f"family {field('cpu family')}, model {field('model')}"] \
        if field("cpu family") else []
    if " avx512f " in f" {field('flags')} ":
        details.append("AVX-512")
    return name + (f" ({', '.join(details)})" if details else "")
