"""The settings of the book's experiments: the one switch between the book profile and the
full one, and the check of a run's settings.
"""

import copy
import os


def profile(book: dict, full: dict) -> dict:
    """A copy of `full` when the environment variable SEQLIB_FULL is "1", else of `book`
    (nested dicts copied too)."""
    return copy.deepcopy(full if os.environ.get("SEQLIB_FULL") == "1" else book)


def check_config(config, keys: tuple, defaults: dict | None = None,
                 strict: bool = False) -> dict:
    """The settings of a training run: `config` with `defaults` for the keys it leaves out,
    if it is a dict holding every key of `keys` (and, when `strict`, no other key than
    those of `keys` and `defaults`: a misspelt setting), else a ValueError naming them."""
    defaults = defaults or {}
    if not isinstance(config, dict) or any(key not in config for key in keys):
        raise ValueError(f"config must be a dict with the keys {keys}, got {config!r}")
    unknown = sorted(set(config) - set(keys) - set(defaults)) if strict else []
    if unknown:
        raise ValueError(f"config has the keys {unknown}, expected only {keys} and "
                         f"{tuple(defaults)}")
    return {**defaults, **config}
