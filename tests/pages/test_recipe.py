"""The recipe of a run, read off its record (seqlib.pages.recipe)."""

from functools import partial

import pytest
import torch
from torch import nn

from seqlib.experiments import runs
from seqlib.pages.recipe import recipe
from seqlib.training import adamw, warmup_cosine


def loss(model, batch):
    return model(batch).pow(2).mean()


def make(fit, schedule=None):
    model = nn.Linear(3, 2)  # 8 parameters
    return runs.Run("recipe-test", model, loss, lambda generator: [torch.zeros(4, 3)] * 5,
                    partial(adamw, lr=0.01, weight_decay=0.1), fit, schedule)


def test_the_recipe_names_what_the_record_holds():
    run = make({"steps": 1200, "warmup": 100, "clip": 1.0, "batch_size": 12, "context": 256},
               warmup_cosine)
    assert recipe(run).splitlines() == [
        "Linear, 8 parameters, 1,200 steps of batch 12 x 256",
        "loss test_recipe.loss",
        "training.adamw(lr=0.01, weight_decay=0.1), gradients clipped at norm 1",
        "rate: training.warmup_cosine with 100 steps of warm-up"]


def test_a_run_without_schedule_batch_or_clipping_says_so():
    lines = recipe(make({"steps": 5})).splitlines()
    assert lines[0] == "Linear, 8 parameters, 5 steps"
    assert lines[2:] == ["training.adamw(lr=0.01, weight_decay=0.1), no clipping",
                         "rate: constant"]


def test_only_a_run_has_a_recipe():
    with pytest.raises(TypeError, match="must be a seqlib.experiments.runs.Run, got dict"):
        recipe({"steps": 5})
