"""The one way a page states a claim about a trained model (or about a seeded random draw):
`claim(name, margin, says, **measured)`.

`margin` is how far the claim held, in the claim's own units, positive when it holds: for
"the stack beats both models", its accuracy minus the better of the two; for "within 0.01",
0.01 minus the difference; for a claim about several things at once, the smallest of their
margins. A claim that does not hold raises an AssertionError that names it, says what it
expected and gives the measured values and the margin.

Whether a claim holds for the method, not only for the stored run, is a question for the
ledger of runs (book/claims.csv, `make claims`): where the environment variable
SEQLIB_CLAIMS names a file, every claim appends a line of JSON to it, {"claim", "margin",
"says", "measured"}, and a failing one writes its message to stderr instead of raising, so
that a run records every claim of a page, those after a failing one included (the ledger's
runner reports the failures).
"""

import json
import math
import numbers
import os
import sys

LOG_VARIABLE = "SEQLIB_CLAIMS"


def _number(name: str, value) -> float:
    """`value` as a float, if it is a real number (a 0-d tensor or NumPy scalar too)."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    return float(value)


def _shown(value) -> str:
    """A measured value as the error message gives it: numbers to 4 significant digits."""
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_shown(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _plain(value):
    """`value` as JSON can hold it: numbers, strings, lists and dicts of them."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value if isinstance(value, (bool, int, float, str, type(None))) else repr(value)


def claim(name: str, margin, says: str, **measured) -> None:
    """State that `says` holds, `margin` being how far it held (positive: it holds); the
    keyword arguments are the measured values behind it, for the message and the ledger.
    Raises an AssertionError naming the claim when the margin is not positive (or not a
    number), unless a ledger's run logs it (SEQLIB_CLAIMS); returns nothing, so that a cell
    ending with a claim shows no output."""
    if not isinstance(name, str) or not name.strip():
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    if not isinstance(says, str) or not says.strip():
        raise TypeError(f"says must be a non-empty str (what the claim expects), got {says!r}")
    margin = _number("margin", margin)
    path = os.environ.get(LOG_VARIABLE, "").strip()
    if path:
        line = {"claim": name, "margin": margin, "says": says, "measured": _plain(measured)}
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(line) + "\n")
    if not margin > 0:  # NaN fails too
        values = "; ".join(f"{k} = {_shown(v)}" for k, v in measured.items()) or "none given"
        message = (f"claim {name!r} does not hold: expected {says}; measured {values}; "
                   f"margin {margin:.4g} (it holds when positive)")
        if path:
            print(message, file=sys.stderr)
        else:
            raise AssertionError(message)


__all__ = ["claim"]
