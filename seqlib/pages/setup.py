"""A page's set-up, one call before anything else: `setup()`."""

from seqlib.pages import kernels


def setup(seed: int = 0, threads: int = 1):
    """Set up a page: hold the CPU kernels to those the stored outputs were made with
    (`kernels.pin`, before torch is imported), draw figures at twice their pixels (retina),
    run PyTorch on `threads` threads (one: the same sums, in the same order, on every
    machine), seed everything with the book's seed `seed` (offset by SEQLIB_SEED) and
    choose the device (SEQLIB_DEVICE, else a GPU when there is one). Returns (the CPU
    generator the page draws its random data from, the device)."""
    kernels.pin()
    import torch  # after the pins

    from seqlib.pages.seeds import seed_everything
    from seqlib.utils import default_device

    shell = _kernel_shell()
    if shell is not None:  # a Jupyter kernel draws figures inline
        shell.run_line_magic("config", 'InlineBackend.figure_formats = ["retina"]')
    torch.set_num_threads(threads)
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
