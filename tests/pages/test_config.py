"""The settings of the book's experiments (seqlib.pages.config): the switch between the book and
full profiles, the one shape of every experiment's profiles, and the check of a run's
settings."""

import inspect

import pytest

from seqlib.experiments import (
    captioning,
    classify,
    forecasting,
    length,
    pretraining,
    sentiment,
    shakespeare,
    streams,
    trainability,
    translation,
    word2vec,
)
from seqlib.pages.config import PROFILE_NAMES, SETUP_KEYS, check_config, profile

# Every module with PROFILES, and the module whose `run` checks each setup's fit.
MODULES = [shakespeare, translation, captioning, forecasting, sentiment, length, trainability,
           pretraining]
RUNNER = {"shakespeare": streams, "sentiment": classify, "pretraining": classify}
SPECIAL = {("sentiment", "word2vec"): word2vec, ("pretraining", "bilm"): pretraining,
           ("pretraining", "masked-lm"): pretraining}
FIT_NAMES = {"steps", "batch_size", "lr", "warmup", "decay", "clip", "weight_decay", "beta2",
             "seed", "context", "evals", "label_smoothing", "record_every", "teacher_forcing",
             "window", "K", "threshold"}


def test_profile_reads_seqlib_full(monkeypatch):
    monkeypatch.delenv("SEQLIB_FULL", raising=False)
    assert profile(shakespeare.PROFILES, "recurrent") == \
        shakespeare.PROFILES["book"]["recurrent"]
    assert profile(shakespeare.PROFILES) == shakespeare.PROFILES["book"]
    monkeypatch.setenv("SEQLIB_FULL", "1")
    assert profile(shakespeare.PROFILES, "recurrent") == \
        shakespeare.PROFILES["full"]["recurrent"]
    monkeypatch.setenv("SEQLIB_FULL", "0")
    config = profile(shakespeare.PROFILES, "recurrent")
    config["fit"]["steps"] = 1  # a deep copy: the profile itself is unchanged
    assert shakespeare.PROFILES["book"]["recurrent"]["fit"]["steps"] == 2000


def test_profile_names_what_it_lacks():
    with pytest.raises(ValueError, match=r"setup must be one of \['recurrent', 'transformer'\], "
                       "got 'rnn'"):
        profile(shakespeare.PROFILES, "rnn")
    with pytest.raises(ValueError, match=r"profiles must be a dict with the keys \('book', "
                       r"'full'\), got \['book'\]"):
        profile({"book": {}}, "rnn")


def runner(module, setup):
    name = module.__name__.rsplit(".", 1)[-1]
    return SPECIAL.get((name, setup), RUNNER.get(name, module))


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_profile_has_one_shape(module):
    """Both profiles, the same setups; each setup a "fit" that its module's run accepts as
    it is (no misspelt key, every required one), and where it has one a "model" of the
    model's constructor arguments and "data"; "seeds" a tuple of ints."""
    profiles = module.PROFILES
    assert tuple(profiles) == PROFILE_NAMES
    assert set(profiles["book"]) == set(profiles["full"])
    for name in PROFILE_NAMES:
        for setup, config in profiles[name].items():
            assert "fit" in config and set(config) <= set(SETUP_KEYS), (name, setup)
            run = runner(module, setup)
            check_config(config["fit"], run.FIT_KEYS, run.FIT_DEFAULTS)
            assert set(config["fit"]) <= FIT_NAMES, (name, setup)  # the same names everywhere
            assert all(isinstance(v, dict) for k, v in config.items() if k != "seeds")
            assert all(isinstance(s, int) for s in config.get("seeds", ()))


def test_the_models_take_their_setups():
    """A setup's "model" holds arguments of the constructor that builds its model."""
    from seqlib.embeddings import SkipGram
    from seqlib.lm import RecurrentLM, TransformerLM
    from seqlib.seq2seq import AttentionSeq2Seq, Seq2Seq
    from seqlib.transformer import Transformer
    builders = {(translation, "seq2seq"): Seq2Seq, (translation, "scores"): Seq2Seq,
                (translation, "attention"): AttentionSeq2Seq,
                (translation, "transformer"): Transformer,
                (shakespeare, "recurrent"): RecurrentLM,
                (shakespeare, "transformer"): TransformerLM,
                (length, "lstm"): RecurrentLM, (length, "transformer"): TransformerLM,
                (trainability, "variants"): TransformerLM,
                (trainability, "dropout"): TransformerLM,
                (captioning, "captioner"): captioning.ShowAttendTell,
                (forecasting, "forecaster"): forecasting.Forecaster,
                (forecasting, "fed-back"): forecasting.Forecaster,
                (pretraining, "bilm"): pretraining.BiLM,
                (pretraining, "masked-lm"): pretraining.MaskedLM,
                (sentiment, "word2vec"): SkipGram, (sentiment, "bilstm"): classify.RecurrentEncoder,
                (sentiment, "transformer"): classify.TransformerEncoder}
    for (module, setup), builder in builders.items():
        for name in PROFILE_NAMES:
            arguments = inspect.signature(builder).parameters
            assert set(module.PROFILES[name][setup]["model"]) <= set(arguments), (builder, setup)


def test_check_config_names_what_is_missing_or_misspelt():
    assert check_config({"steps": 3}, ("steps",), {"lr": 1e-3}) == {"steps": 3, "lr": 1e-3}
    with pytest.raises(ValueError, match=r"config must be a dict with the keys \('steps',\)"):
        check_config({"step": 3}, ("steps",))
    with pytest.raises(ValueError, match=r"config has the keys \['stpes'\], expected only"):
        check_config({"steps": 3, "stpes": 4}, ("steps",))
