"""The argument checks every module shares: each raises a clear TypeError or ValueError
naming the argument, what it received and what was expected."""

import torch


def int_in_range(name: str, value, least: int, most: int | None = None, *,
                 expected: str | None = None) -> int:
    """Return `value` if it is an int (not a bool) from `least` to `most` (None: no bound),
    else raise a ValueError naming `name`, what was `expected` and the value given."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least \
            or (most is not None and value > most):
        if expected is None:
            expected = f"an int >= {least}" if most is None else f"an int from {least} to {most}"
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return value


def positive_int(name: str, value) -> int:
    """Return `value` if it is a positive int, else raise a ValueError naming `name`."""
    return int_in_range(name, value, 1, expected="a positive int")


def check_warmup(warmup, steps: int) -> int:
    """Return `warmup`, the steps of a warm-up, if it is an int in [0, steps)."""
    return int_in_range("warmup", warmup, 0, steps - 1, expected=f"an int in [0, steps={steps})")


def check_int(name: str, value, low: int | None = None) -> int:
    """Return `value` if it is an int (>= `low` when given), else a TypeError or ValueError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    return value if low is None else int_in_range(name, value, low, expected=f">= {low}")


def check_choice(name: str, value, allowed: tuple) -> None:
    """Raise unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


def check_ids(ids, *, name: str = "ids", dim: int | None = None,
              vocab_size: int | None = None, nonempty: bool = False) -> torch.Tensor:
    """Return `ids` if it is an integer tensor of token ids (of `dim` dimensions, not empty,
    in [0, vocab_size), when asked)."""
    if not isinstance(ids, torch.Tensor):
        layout = " (batch, time)" if dim == 2 else ""
        raise TypeError(f"{name} must be a torch.Tensor of token ids{layout}, got "
                        f"{type(ids).__name__}")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if dim is not None and ids.dim() != dim:
        raise ValueError(f"{name} must have {dim} dimension(s), got shape {tuple(ids.shape)}")
    if nonempty and ids.numel() == 0:
        raise ValueError(f"{name} is empty: shape {tuple(ids.shape)}")
    top = float("inf") if vocab_size is None else vocab_size
    if ids.numel() and (ids.min() < 0 or ids.max() >= top):
        bad = ids[(ids < 0) | (ids >= top)].unique().tolist()[:10]
        raise ValueError(f"{name} must lie in [0, {top}) (the vocabulary), got {bad}")
    return ids


def check_source(src, src_mask, vocab_size: int | None = None) -> torch.Tensor:
    """Check src (B, S) ids and src_mask (B, S), True at real tokens, padding at the end only,
    no empty sentence; return the lengths (B,)."""
    check_ids(src, name="src", dim=2, vocab_size=vocab_size)
    if not isinstance(src_mask, torch.Tensor) or src_mask.dtype != torch.bool:
        got = src_mask.dtype if isinstance(src_mask, torch.Tensor) else type(src_mask).__name__
        raise TypeError(f"src_mask must be a bool tensor (True at real tokens), got {got}")
    if src_mask.shape != src.shape:
        raise ValueError(f"src_mask has shape {tuple(src_mask.shape)}, expected "
                         f"{tuple(src.shape)} like src")
    B, S = src.shape
    if B == 0 or S == 0:
        raise ValueError(f"the source batch is empty: src has shape {(B, S)}")
    lengths = src_mask.sum(1)  # (B,)
    if (lengths == 0).any():
        raise ValueError(f"source sentence {(lengths == 0).nonzero()[0].item()} is empty "
                         "(no real token in src_mask): there is nothing to encode")
    if not torch.equal(src_mask, torch.arange(S, device=src.device) < lengths[:, None]):
        raise ValueError("src_mask must be True on a prefix of each row (padding at the end "
                         "only), as seqlib.text.pad_batch returns")
    return lengths


def check_tgt_in(tgt_in, src: torch.Tensor, vocab_size: int) -> None:
    """Raise unless `tgt_in` (B, T) holds target ids, a row per src row, T >= 1."""
    check_ids(tgt_in, name="tgt_in", dim=2, vocab_size=vocab_size)
    if tgt_in.shape[0] != src.shape[0] or tgt_in.shape[1] == 0:
        raise ValueError(f"tgt_in has shape {tuple(tgt_in.shape)}, expected "
                         f"({src.shape[0]}, T >= 1) for a source batch of {src.shape[0]}")


def check_sequence(x: torch.Tensor, input_size: int, name: str = "x",
                   dtype: torch.dtype | None = None) -> None:
    """Raise unless `x` is a float (batch, time, input_size) tensor, T >= 1, of `dtype`."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must hold floats (one-hot or embedded tokens), got dtype "
                        f"{x.dtype}; encode token ids with seqlib.text.one_hot or an "
                        "nn.Embedding first")
    if x.dim() != 3:
        raise ValueError(f"{name} must have 3 dimensions (batch, time, features), got shape "
                         f"{tuple(x.shape)}")
    if x.shape[-1] != input_size:
        raise ValueError(f"{name} has {x.shape[-1]} features per step, expected "
                         f"input_size={input_size}")
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} has an empty batch or sequence: shape {tuple(x.shape)}")
    check_dtype(name, x, dtype)


def check_state(h0: torch.Tensor, expected: tuple, name: str = "h0",
                x: torch.Tensor | None = None) -> None:
    """Raise unless `h0` has the `expected` shape (L D, B, m), saying so when `x` looks
    time-major (torch.nn's default layout)."""
    if not isinstance(h0, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(h0).__name__}")
    if tuple(h0.shape) == tuple(expected):
        return
    if x is not None and h0.dim() == 3 and h0.shape[1] == x.shape[1] != x.shape[0]:
        T, B, p = x.shape
        raise ValueError(f"x has shape {tuple(x.shape)} and {name} has shape {tuple(h0.shape)}, "
                         f"made for a batch of {B} = x.shape[1]: x looks time-major (time, "
                         f"batch, features), torch.nn's default, but seqlib's tensors are "
                         f"(batch, time, features) (batch_first): expected x of shape "
                         f"{(B, T, p)}, x.transpose(0, 1)")
    raise ValueError(f"{name} has shape {tuple(h0.shape)}, expected {tuple(expected)}")


def check_mask(mask: torch.Tensor, shape: tuple, name: str = "mask") -> None:
    """Raise unless `mask` is a bool tensor of the (batch, time) `shape`."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(f"{name} must be a bool tensor (True at real steps), got {got}")
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(mask.shape)}, expected {tuple(shape)}")


def check_tensor(name: str, x, features: int | None = None,
                 dtype: torch.dtype | None = None) -> None:
    """Raise unless `x` is a float (batch, time, features) tensor, of `features` and `dtype`."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must hold floats, got dtype {x.dtype}")
    if x.dim() != 3:
        raise ValueError(f"{name} must be (batch, time, features), got shape {tuple(x.shape)}")
    if features is not None and x.shape[-1] != features:
        raise ValueError(f"{name} has {x.shape[-1]} features, expected {features}")
    check_dtype(name, x, dtype)


def check_keys(name: str, x, features: int | None = None,
               dtype: torch.dtype | None = None) -> None:
    """check_tensor, and at least one time step: the sequence attention's keys come from."""
    check_tensor(name, x, features, dtype)
    if x.shape[1] == 0:
        raise ValueError(f"{name} has shape {tuple(x.shape)}, an empty sequence: there are no "
                         f"keys to attend to (the attention weights are undefined); expected "
                         f"(batch, time >= 1, features)")


def model_dtype(model: torch.nn.Module) -> torch.dtype | None:
    """The dtype of the model's parameters (None when it has none)."""
    first = next(model.parameters(), None)
    return None if first is None else first.dtype


def check_dtype(name: str, x: torch.Tensor, dtype: torch.dtype | None) -> None:
    """Raise unless `x` has the model's floating-point `dtype` (None: any)."""
    if dtype is not None and x.dtype != dtype:
        raise TypeError(f"{name} has dtype {x.dtype}, but the model's parameters are {dtype}: "
                        f"convert the input ({name}.to({dtype})) or the model "
                        f"(model.to({x.dtype}))")


def check_decoding_state(state, keys: tuple, name: str = "state") -> None:
    """Raise unless `state` is the dict `start` (or a later `step`) returned, with `keys`."""
    if not isinstance(state, dict) or any(key not in state for key in keys):
        got = f"a dict with the keys {sorted(state)}" if isinstance(state, dict) \
            else type(state).__name__
        raise TypeError(f"{name} must be the dict that start(src, src_mask) returns, with the "
                        f"keys {sorted(keys)}, got {got}: call start before step")
