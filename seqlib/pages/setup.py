"""A page's set-up, one call before anything else: `setup()`."""

import os

from seqlib.pages import kernels

THREADS_VARIABLE = "SEQLIB_THREADS"  # another thread count: a run of the ledger of claims


def setup(seed: int = 0, threads: int = 1):
    """Set up a page: hold the CPU kernels to those the stored outputs were made with
    (`kernels.pin`, before torch is imported), draw figures at twice their pixels (retina),
    run PyTorch on `threads` threads (one: the same sums, in the same order, on every
    machine; SEQLIB_THREADS sets another count, as a run of the ledger of claims does to
    see the page under other roundings), seed everything with the book's seed `seed`
    (offset by SEQLIB_SEED) and choose the device (SEQLIB_DEVICE, else a GPU when there is
    one). Returns (the CPU generator the page draws its random data from, the device)."""
    kernels.pin()
    import torch  # after the pins

    from seqlib.pages.seeds import seed_everything
    from seqlib.utils import default_device

    shell = _kernel_shell()
    if shell is not None:  # a Jupyter kernel draws figures inline
        shell.run_line_magic("config", 'InlineBackend.figure_formats = ["retina"]')
    text = os.environ.get(THREADS_VARIABLE, "").strip()
    if text and not text.isdigit() or text == "0":
        raise ValueError(f"{THREADS_VARIABLE}={text!r} is not a number of threads; expected "
                         "a whole number such as 2 (or unset: one thread)")
    torch.set_num_threads(int(text) if text else threads)
    return seed_everything(seed), default_device()


def _kernel_shell():
    """The IPython shell of a Jupyter kernel running this code, or None (a script, a
    terminal)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return shell if shell is not None and hasattr(shell, "kernel") else None
