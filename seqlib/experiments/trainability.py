"""What makes a deep transformer trainable (beyond Section 7.5): the gradient norm of each
block, and the run of a language model (streams.run) that also records them and the
validation loss as it goes (`run`; runs.trained_together trains several), with the setups of
page 21 in `PROFILES` (seqlib.pages.config): "variants", the six-block models compared
(the arguments of seqlib.lm.TransformerLM after the vocabulary size; each variant sets how
its blocks are normalised and joined, and its warm-up), and "dropout", the two-block models
trained with and without dropout on the first characters of the text ("data").

A block's gradient norm is the 2-norm of the gradients of all its parameters together,
||dL/dtheta_l||, for the blocks l = 1, ..., L of a seqlib.lm.TransformerLM, first
(next to the embeddings) to last (next to the output layer). `NoResidualBlock` is the
block of (7.31) without its residual connections, for the experiment only.
"""

from dataclasses import replace

import torch
from torch import nn

from seqlib.experiments import runs, streams
from seqlib.pages.config import check_config
from seqlib.transformer import TransformerBlock

MODEL = dict(p=64, heads=4, n1=256, max_len=64, positional="sinusoidal")
FIT = dict(context=64, warmup=50, beta2=0.99, weight_decay=0.1, record_every=50)
PROFILES = {
    "book": {"variants": {"model": MODEL | dict(num_layers=6),
                          "fit": FIT | dict(batch_size=8, steps=200, lr=1e-2)},
             "dropout": {"data": dict(train_chars=10_000),
                         "model": MODEL | dict(num_layers=2),
                         "fit": FIT | dict(batch_size=12, steps=600, lr=3e-3)}},
    "full": {"variants": {"model": MODEL | dict(num_layers=6),
                          "fit": FIT | dict(batch_size=8, steps=1000, lr=1e-2)},
             "dropout": {"data": dict(train_chars=None),  # the whole text
                         "model": MODEL | dict(num_layers=2),
                         "fit": FIT | dict(batch_size=12, steps=5000, lr=3e-3)}}}


class NoResidualBlock(TransformerBlock):
    """The block of (7.31) without its two residual connections (the terms a_in and u_[2]
    dropped): u_[2] = LayerNorm(MultiHead(a_in)), a_out = LayerNorm(FeedForward(u_[2])).
    Nothing of a block's input reaches its output but through its sublayers."""

    residual = False

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None,
                causal: bool = False, cache: dict | None = None) -> torch.Tensor:
        u2 = self.norm1(self.dropout1(self.attend(x, mask, causal, cache)))
        return self.norm2(self.dropout2(self.feed_forward(u2)))


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


class Recorder:
    """The `on_step` and `finish` of a recorded run: after every step, each block's gradient
    norm before clipping ("block_grad_norm"); every `every` steps and after the last, the
    validation loss on val_ids with no state carried, the transformer's view ("val_step",
    "val_loss")."""

    def __init__(self, model: nn.Module, val_ids: torch.Tensor, config: dict):
        streams.check_stream(val_ids, config["batch_size"], config["context"], name="val_ids")
        self.model, self.val_ids, self.config = model, val_ids, config
        self.recorded = {"val_step": [], "val_loss": [], "block_grad_norm": []}

    def __call__(self, step: int, history: dict) -> None:
        config, recorded = self.config, self.recorded
        clipped = min(1.0, 1.0 / (history["grad_norm"][-1] + 1e-6))  # clip_grad_norm_'s factor
        recorded["block_grad_norm"].append([n / clipped for n in block_grad_norms(self.model)])
        if (step + 1) % config["record_every"] == 0 or step + 1 == config["steps"]:
            recorded["val_step"].append(step + 1)
            recorded["val_loss"].append(streams.evaluate(self.model, self.val_ids,
                                                    config["batch_size"], config["context"],
                                                    carry_state=False))

    def finish(self, history: dict) -> dict:
        return history | self.recorded


# The settings of `run` (its fit): streams.run's, and how often the validation loss is measured.
FIT_KEYS = (*streams.FIT_KEYS, "record_every")
FIT_DEFAULTS = streams.FIT_DEFAULTS


def run(name: str, model: nn.Module, data: tuple, fit: dict) -> runs.Run:
    """streams.run (AdamW, warm-up and cosine decay, clipping) of `model` on data =
    (train_ids, val_ids) that also records what `Recorder` says on val_ids, fit["record_every"]
    setting how often the validation loss is measured."""
    train_ids, val_ids = data
    fit = check_config(fit, FIT_KEYS, FIT_DEFAULTS)
    recorder = Recorder(model, val_ids, fit)
    run = streams.run(name, model, train_ids,
                      {k: v for k, v in fit.items() if k != "record_every"},
                      module=__name__, on_step=recorder, finish=recorder.finish)
    return replace(run, fit=fit, data=(*run.data, val_ids))  # what it records depends on them
