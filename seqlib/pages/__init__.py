"""The tooling of the book's pages, outside the chapter library and outside every model's key
in the model cache:

- `setup()`, a page's first call: the kernel pins (`kernels`), retina figures, one thread,
  the book's seed and the device;
- `seeds`: the seed offset SEQLIB_SEED, and `generator` and `seed_everything` with it;
- `claims`: `claim(name, margin, says)`, the one way a page states what a trained model
  does, and the ledger of runs it writes to;
- `listing`: `show_source`, the code that runs, shown;
- `recipe`: a run's recipe, read off its record;
- `config`: the switch between the book and full profiles, and the check of a run's settings;
- `decoding`: the worked examples of decoding (`TableDecoder`, `beam_trace`) and the check of
  (7.34) on a trained decoder (`check_decoder`).

The names below are imported on first use, so that `from seqlib.pages import setup` loads no
torch before the kernels are pinned.
"""

import importlib

EXPORTS = {
    "setup": "setup", "claim": "claims", "show_source": "listing", "recipe": "recipe",
    "generator": "seeds", "seed_everything": "seeds", "profile": "config",
    "TableDecoder": "decoding", "beam_trace": "decoding", "check_decoder": "decoding",
}

__all__ = sorted(EXPORTS)


def __getattr__(name: str):
    """seqlib.pages.X for X in EXPORTS, imported from its module on first use (PEP 562)."""
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
    globals()[name] = value
    return value
