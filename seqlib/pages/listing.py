"""Source listings: a page shows the code that runs, never a copy of it."""

import inspect


def show_source(obj):
    """Syntax-highlighted source of a seqlib object, so the book shows the code that runs."""
    from IPython.display import Code  # only where a page shows it

    return Code(inspect.getsource(obj), language="python")
