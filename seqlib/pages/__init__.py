"""The tooling of the book's pages, outside the chapter library and outside every model's key
in the model cache: `claims` (the one way a page states what a trained model does, and the
ledger of runs it writes to).
"""
