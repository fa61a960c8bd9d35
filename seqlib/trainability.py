"""What makes a deep transformer trainable (beyond Section 7.5): the gradient norm of each
block, and a training run of seqlib.lm's `fit` that also records them and the validation
loss as it goes, cached and run in worker processes as seqlib.lm's `trained_together`.

A block's gradient norm is the 2-norm of the gradients of all its parameters together,
||dL/dtheta_l||, for the blocks l = 1, ..., L of a seqlib.transformer.TransformerLM, first
(next to the embeddings) to last (next to the output layer).
"""

import hashlib

import torch
from torch import nn

from seqlib.lm import _check_config, _check_stream, evaluate, fit
from seqlib.training import cache_path, cached, run_in_processes


def block_grad_norms(model: nn.Module) -> list[float]:
    """||dL/dtheta_l|| for each block l of `model.blocks`, from the gradients that the last
    backward pass left in .grad (a block without gradients counts 0)."""
    if not hasattr(model, "blocks"):
        raise TypeError(f"model must have `blocks` (a TransformerLM), got "
                        f"{type(model).__name__}")
    return [sum(float(p.grad.pow(2).sum()) for p in block.parameters() if p.grad is not None)
            ** 0.5 for block in model.blocks]


def init_grad_norms(model: nn.Module, ids: torch.Tensor) -> list[float]:
    """block_grad_norms after one backward pass of the mean cross-entropy of the next
    token on a batch of ids (B, T + 1), the model as it is (at initialisation, say); the
    gradients are cleared again."""
    x, y = ids[:, :-1], ids[:, 1:]  # (B, T) inputs and their next tokens
    model.zero_grad(set_to_none=True)
    logits, _ = model(x)  # (B, T, V)
    nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
    norms = block_grad_norms(model)
    model.zero_grad(set_to_none=True)
    return norms


def fit_recorded(model: nn.Module, train_ids: torch.Tensor, val_ids: torch.Tensor,
                 config: dict, *, desc: str = "train", progress: bool = True) -> dict:
    """seqlib.lm.fit (AdamW, lr_factor's warm-up and cosine decay, clipping at norm 1, its own
    random numbers) that also records, every config["record_every"] steps (and after the
    last), the validation loss on val_ids (no state carried: the transformer's view) in
    "val_step"/"val_loss", and after every step each block's gradient norm before clipping,
    "block_grad_norm"."""
    config = _check_config(config)
    every, steps = config["record_every"], config["steps"]
    _check_stream(val_ids, config["batch_size"], config["context"], name="val_ids")
    recorded = {"val_step": [], "val_loss": [], "block_grad_norm": []}

    def on_step(step, history):
        clipped = min(1.0, 1.0 / (history["grad_norm"][-1] + 1e-6))  # clip_grad_norm_'s factor
        recorded["block_grad_norm"].append([n / clipped for n in block_grad_norms(model)])
        if (step + 1) % every == 0 or step + 1 == steps:
            recorded["val_step"].append(step + 1)
            recorded["val_loss"].append(evaluate(model, val_ids, config["batch_size"],
                                                 config["context"], carry_state=False))

    history = fit(model, train_ids, config, desc=desc, progress=progress, on_step=on_step)
    return history | recorded


def _key(model, train_ids, val_ids, config) -> tuple:
    """What a run depends on besides the model and the code: configuration, data, device."""
    data = [(len(t), hashlib.sha256(t.cpu().numpy().tobytes()).hexdigest())
            for t in (train_ids, val_ids)]
    return sorted(config.items()), *data, next(model.parameters()).device.type


def recorded(name: str, model: nn.Module, train_ids: torch.Tensor, val_ids: torch.Tensor,
             config: dict) -> dict:
    """`fit_recorded` through seqlib.training.cached (no progress bar): an identical run
    (name, model, data, configuration, code) loads the saved weights and history."""
    return cached(name, model, lambda: fit_recorded(model, train_ids, val_ids, config,
                                                    desc=name, progress=False),
                  *_key(model, train_ids, val_ids, config))


def recorded_together(runs: dict) -> dict:
    """`recorded` for every run of {name: (model, train_ids, val_ids, config)}: on the CPU
    the runs the cache lacks train at the same time in worker processes, one per core
    (seqlib.training.run_in_processes), then all are loaded; on a GPU they train here, one
    after the other. Returns {name: history}."""
    missing = [(recorded, (name, *run)) for name, run in runs.items()
               if not cache_path(name, run[0], *_key(*run)).exists()]
    if all(next(run[0].parameters()).device.type == "cpu" for run in runs.values()):
        run_in_processes(missing)
    return {name: recorded(name, *run) for name, run in runs.items()}
