"""The settings of the book's experiments: the one switch between the book profile and the
full one, and the check of a run's settings.

Every experiment module holds its settings in one shape, `PROFILES`:

    PROFILES = {"book": {SETUP: {"model": {...}, "fit": {...}}, ...}, "full": {...}}

a SETUP for each kind of run the module makes, the same setups in both profiles. "model"
holds the arguments of the model's constructor (so that `Model(vocab_size, **model)` builds
it; absent where a run goes on training a trained model), "fit" the settings of the run,
which the module's `run(name, model, data, fit)` checks (`check_config`), and, where they
apply, "data" the settings of what the run trains on and "seeds" the seeds a page repeats
the run with.
"""

import copy
import os

PROFILE_NAMES = ("book", "full")
SETUP_KEYS = ("model", "fit", "data", "seeds")  # "fit" in every setup, the others optional


def profile(profiles: dict, setup: str | None = None) -> dict:
    """The setup `setup` of `profiles` (a module's PROFILES) in the active profile, "full"
    when the environment variable SEQLIB_FULL is "1", else "book"; without `setup`, all the
    setups of the active profile. A copy: changing it leaves PROFILES as it was."""
    if not isinstance(profiles, dict) or set(profiles) != set(PROFILE_NAMES):
        got = sorted(profiles) if isinstance(profiles, dict) else type(profiles).__name__
        raise ValueError(f"profiles must be a dict with the keys {PROFILE_NAMES}, got {got}")
    active = profiles["full" if os.environ.get("SEQLIB_FULL") == "1" else "book"]
    if setup is None:
        return copy.deepcopy(active)
    if setup not in active:
        raise ValueError(f"setup must be one of {sorted(active)}, got {setup!r}")
    return copy.deepcopy(active[setup])


def check_config(config, keys: tuple, defaults: dict | None = None) -> dict:
    """The settings of a training run: `config` with `defaults` for the keys it leaves out,
    if it is a dict holding every key of `keys` and no other key than those of `keys` and
    `defaults` (a misspelt setting), else a ValueError naming them."""
    defaults = defaults or {}
    if not isinstance(config, dict) or any(key not in config for key in keys):
        raise ValueError(f"config must be a dict with the keys {keys}, got {config!r}")
    unknown = sorted(set(config) - set(keys) - set(defaults))
    if unknown:
        raise ValueError(f"config has the keys {unknown}, expected only {keys} and "
                         f"{tuple(defaults)}")
    return {**defaults, **config}
