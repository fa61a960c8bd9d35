"""The distributed entry point, seqlib.experiments.distributed: two processes under torchrun
(gloo, CPU) train as one process does on the same global batches; a run killed mid-way resumes
to the same result; one process trains exactly as the chapters' own runs; bad arguments."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from seqlib.data import DATA_VARIABLE, multi30k
from seqlib.experiments import distributed, runs, shakespeare, streams
from seqlib.experiments import translation as tr
from seqlib.lm import TransformerLM
from seqlib.seq2seq import AttentionSeq2Seq
from seqlib.transformer import Transformer

pytestmark = pytest.mark.skipif(
    not os.environ.get(DATA_VARIABLE),
    reason="set SEQLIB_DATA_DIR to a folder holding the data sets to train on them")

BIN = Path(sys.executable).parent
# Tiny configurations of the full-profile experiments: a few seconds on a CPU.
TINY = {
    "char-lm": ["p=16", "heads=2", "n1=32", "num_layers=1", "max_len=16", "context=16",
                "batch_size=6", "steps=12", "warmup=3", "dropout=0.0"],
    "translation-de-en": ["p=16", "heads=2", "n1=32", "num_layers=1", "limit=500",
                          "batch_size=10", "steps=12", "warmup=3", "dropout=0.0"],
}


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread (a busy machine makes threads wait)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def arguments(experiment, out, *more, dtype="float64", evaluate=False):
    sets = [arg for item in TINY[experiment] for arg in ("--set", item)]
    return [experiment, *sets, "--out", str(out), "--dtype", dtype, "--no-progress",
            *([] if evaluate else ["--no-evaluate"]), *more]


# The wall-clock cap of one torchrun command. A tiny run takes seconds on an idle machine and
# took up to 211 s with both cores loaded (load about 20): the cap leaves room for that, so a
# busy machine slows the test down without failing it.
TORCHRUN_SECONDS = 1200


def torchrun(*args, check=True):
    """torchrun on the CPU: two processes (of one thread each), gloo. A run that outlasts
    TORCHRUN_SECONDS fails with what it had printed."""
    command = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node=2", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=TORCHRUN_SECONDS)
    except subprocess.TimeoutExpired as late:
        raise AssertionError(f"{command} ran past {TORCHRUN_SECONDS} s:\n{late.stdout}\n"
                             f"{late.stderr}") from late
    if check and done.returncode != 0:
        raise AssertionError(f"{command} failed:\n{done.stdout}\n{done.stderr}")
    return done


def weights(out):
    return torch.load(Path(out) / "model.pt", weights_only=True)["model"]


def history(out):
    return torch.load(Path(out) / "checkpoint.pt", weights_only=True)["history"]


@pytest.fixture(scope="module", params=list(TINY))
def two_processes(request, tmp_path_factory):
    """A tiny run of each experiment on two processes: (experiment, its folder, its output)."""
    experiment = request.param
    out = tmp_path_factory.mktemp(experiment)
    done = torchrun("-m", "seqlib.experiments.distributed", *arguments(experiment, out))
    return experiment, out, done.stdout


def test_two_processes_train_as_one_on_the_same_global_batches(two_processes, tmp_path):
    experiment, out, stdout = two_processes
    assert stdout.count("parameters, 2 processes on cpu") == 1  # rank 0 alone prints
    distributed.main(arguments(experiment, tmp_path))  # one process, no torchrun
    one, two = weights(tmp_path), weights(out)
    assert one.keys() == two.keys()
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=0, atol=1e-6, msg=name)
    # The loss recorded by each process is the whole batch's, as one process records it.
    for key in ("loss", "grad_norm"):
        assert history(out)[key] == pytest.approx(history(tmp_path)[key], rel=1e-9, abs=0)
    assert json.loads((out / "results.json").read_text())["processes"] == 2


# Run by torchrun in place of `-m seqlib.experiments.distributed`: rank 0 is killed (SIGKILL) while
# it writes the checkpoint of step 8, leaving half a file behind; torchrun then stops the
# other process.
KILLED = """
import os, signal, sys
from seqlib.experiments import distributed

save_atomic = distributed.save_atomic

def killed_while_saving(obj, path):
    if obj.get("step") == 8:
        path.with_name(f".{path.name}.{os.getpid()}.tmp").write_bytes(b"half a checkpoint")
        os.kill(os.getpid(), signal.SIGKILL)
    save_atomic(obj, path)

distributed.save_atomic = killed_while_saving
distributed.main(sys.argv[1:])
"""


@pytest.mark.parametrize("two_processes", ["char-lm"], indirect=True)
def test_a_run_killed_mid_way_resumes_to_the_same_result(two_processes, tmp_path):
    experiment, reference, _ = two_processes
    script, out = tmp_path / "killed.py", tmp_path / "run"
    script.write_text(KILLED)
    args = arguments(experiment, out, "--checkpoint-every", "4")  # 12 steps
    killed = torchrun(str(script), *args, check=False)
    assert killed.returncode != 0 and not (out / "model.pt").exists()
    saved = torch.load(out / "checkpoint.pt", weights_only=True)
    assert saved["step"] == 4 and len(saved["history"]["loss"]) == 4  # the last whole one
    assert list(out.glob(".checkpoint.pt.*.tmp"))  # the interrupted write, never read
    resumed = torchrun("-m", "seqlib.experiments.distributed", *args)  # the same command again
    assert "resumed at step 4 of 12" in resumed.stdout
    for name, value in weights(reference).items():
        assert torch.equal(weights(out)[name], value), name
    assert history(out) == history(reference) | {"seconds": history(out)["seconds"]}


# In one process (no torchrun), the entry point is the chapters' training.

def tiny_config(experiment, **changes):
    return distributed.configure(experiment, TINY[experiment]
                                 + [f"{k}={v}" for k, v in changes.items()])


def test_one_process_trains_as_the_language_model_run(tmp_path):
    results = distributed.main(arguments("char-lm", tmp_path, dtype="float32", evaluate=True))
    assert results["processes"] == 1 and results["val_loss"] > 0
    config = tiny_config("char-lm")
    run, (vocab, train_ids, val_ids) = distributed.char_lm(config)  # its run, untrained
    model = runs.built(lambda: TransformerLM(len(vocab), **config["model"]), seed=0)
    chapters = streams.run("shakespeare-transformer", model, train_ids,
                           config["fit"])  # the run a chapter makes
    assert run.key == chapters.key  # the same record
    history = runs.fit(chapters)
    trained, _ = distributed.load(tmp_path, device="cpu")
    for name, value in model.state_dict().items():
        assert torch.equal(trained.model.state_dict()[name], value), name
    assert torch.load(tmp_path / "checkpoint.pt")["history"]["loss"] == history["loss"]
    assert results["val_loss"] == streams.evaluate(model, val_ids, 32,
                                                   config["fit"]["context"])


def translation_run(name, config, build):
    """The chapters' translation run (translation.run) of the entry point's configuration,
    and its data."""
    data = config["data"]
    limits = {"train": data["limit"], "val": data["eval_limit"],
              "test_2016_flickr": data["eval_limit"]}
    prepared = tr.prepare({split: multi30k(split, data["src"], data["tgt"])[:n]
                           for split, n in limits.items()}, data["min_freq"])
    return tr.run(name, lambda: build(prepared), prepared, config["fit"]), prepared


def test_one_process_trains_as_the_translation_run(tmp_path):
    distributed.main(arguments("translation-de-en", tmp_path, dtype="float32"))
    config = tiny_config("translation-de-en")
    run, data = translation_run("de-en-transformer", config, lambda data: Transformer(
        len(data.src_vocab), len(data.tgt_vocab), **config["model"]))
    assert distributed.translation(config)[0].key == run.key  # the record a chapter makes
    runs.fit(run)
    for name, value in run.model.state_dict().items():
        assert torch.equal(weights(tmp_path)[name], value), name


def test_the_attention_model_trains_as_its_translation_run(tmp_path):
    tiny = ["embed_size=8", "hidden_size=12", "encoder_size=6", "attention_size=10",
            "limit=300", "eval_limit=30", "batch_size=10", "steps=6"]
    results = distributed.main(["attention-de-en", *(a for t in tiny for a in ("--set", t)),
                                "--out", str(tmp_path), "--no-progress"])
    config = distributed.configure("attention-de-en", tiny)
    assert config["model"]["unit"] == "gru" and config["model"]["score"] == "additive"
    run, data = translation_run("de-en-attention", config, lambda data: AttentionSeq2Seq(
        len(data.src_vocab), len(data.tgt_vocab), **config["model"]))
    assert len(data.pairs["test_2016_flickr"]) == 30
    runs.fit(run)
    for name, value in run.model.state_dict().items():
        assert torch.equal(weights(tmp_path)[name], value), name
    assert results["parameters"] == sum(p.numel() for p in run.model.parameters())
    assert results["val_loss"] > 0 and 0 <= results["bleu_greedy"] <= 100


def test_the_full_configurations_are_the_chapters():
    """Each experiment is the setup of its chapters' full profile, its fit completed with
    the run's defaults and its data with the languages and no limits."""
    full = tr.PROFILES["full"]
    for name, setup, languages in [("translation-de-en", "transformer", ("de", "en")),
                                   ("translation-en-fr", "transformer", ("en", "fr")),
                                   ("attention-de-en", "attention", ("de", "en"))]:
        config = distributed.configure(name)
        assert config["model"] == full[setup]["model"]
        assert config["fit"] == tr.FIT_DEFAULTS | full[setup]["fit"]
        assert config["data"] == dict(src=languages[0], tgt=languages[1], limit=None,
                                      eval_limit=None, **full[setup]["data"])
    char_lm = shakespeare.PROFILES["full"]["transformer"]
    assert distributed.configure("char-lm") == {
        "data": {}, "model": char_lm["model"],
        "fit": streams.FIT_DEFAULTS | char_lm["fit"]}


def test_an_interrupted_run_with_dropout_resumes_exactly(tmp_path, monkeypatch):
    args = arguments("char-lm", tmp_path / "whole", "--set", "dropout=0.2")
    distributed.main(args)
    save_atomic = distributed.save_atomic

    def interrupted(obj, path):
        save_atomic(obj, path)
        if obj.get("step") == 6:
            raise KeyboardInterrupt

    monkeypatch.setattr(distributed, "save_atomic", interrupted)
    args = arguments("char-lm", tmp_path / "cut", "--set", "dropout=0.2",
                     "--checkpoint-every", "3")
    with pytest.raises(KeyboardInterrupt):
        distributed.main(args)
    monkeypatch.undo()
    distributed.main(args)  # resumes at step 6: the same batches, rates and dropout masks
    for name, value in weights(tmp_path / "whole").items():
        assert torch.equal(weights(tmp_path / "cut")[name], value), name
    again = distributed.main(args)  # nothing left to train: evaluates the saved model again
    assert again["train_seconds"] == history(tmp_path / "cut")["seconds"][-1]


def test_validation_during_training_changes_nothing_and_a_time_limit_stops_it(tmp_path):
    plain = distributed.main(arguments("char-lm", tmp_path / "plain", "--set", "dropout=0.2",
                               evaluate=True))
    watched = distributed.main(arguments("char-lm", tmp_path / "watched", "--set", "dropout=0.2",
                                 "--eval-every", "4", evaluate=True))
    for name, value in weights(tmp_path / "plain").items():
        assert torch.equal(weights(tmp_path / "watched")[name], value), name
    assert [step for step, _ in watched["val_curve"]] == [4, 8, 12]
    assert watched["val_curve"][-1][1] == pytest.approx(plain["val_loss"], rel=1e-12)
    assert watched["val_loss_best"] == min(loss for _, loss in watched["val_curve"])
    assert "val_curve" not in plain
    stopped = distributed.main(arguments("char-lm", tmp_path / "stopped", "--set", "dropout=0.2",
                                 "--max-seconds", "0"))
    assert stopped["steps_done"] == 1 and history(tmp_path / "stopped")["loss"] == \
        history(tmp_path / "plain")["loss"][:1]  # the first step, then the limit


def test_a_checkpoint_of_another_run_is_not_resumed(tmp_path):
    distributed.main(arguments("char-lm", tmp_path))
    with pytest.raises(ValueError, match="checkpoint of another run"):
        distributed.main(arguments("char-lm", tmp_path, "--set", "lr=0.5"))
    with pytest.raises(ValueError, match="checkpoint of another run"):  # TF32 is another run
        distributed.main(arguments("char-lm", tmp_path, "--tf32"))


def test_configure_and_its_errors():
    assert distributed.configure("translation-de-en")["model"]["p"] == 256
    config = distributed.configure("char-lm", ["steps=7", "lr=1", "positional=learned"])
    assert (config["fit"]["steps"], config["fit"]["lr"], config["model"]["positional"]) == \
        (7, 1, "learned")
    assert distributed.configure("char-lm", ["seed=3"])["fit"]["seed"] == 3  # a default too
    with pytest.raises(ValueError, match="experiment must be one of"):
        distributed.configure("gpt-5")
    with pytest.raises(ValueError, match="key among"):
        distributed.configure("char-lm", ["stepz=7"])
    with pytest.raises(ValueError, match="key among"):
        distributed.configure("char-lm", ["steps"])
    with pytest.raises(ValueError, match="must be of type int"):
        distributed.configure("char-lm", ["steps=7.5"])
    for bad in (["--set", "stepz=7"], ["--checkpoint-every", "0"]):  # the command line
        with pytest.raises(SystemExit):
            distributed.main(["char-lm", *bad])
    with pytest.raises(ValueError, match="exceeds max_len"):
        distributed.char_lm(distributed.configure("char-lm", ["context=512"]))


def test_at_step_and_sharing():
    item = distributed.at_step(iter(range(100)))
    assert [item(3), item(4), item(10)] == [3, 4, 10]  # skips what a resumed run needs not
    with pytest.raises(ValueError, match="steps must increase"):
        item(5)
    x, y = torch.arange(6 * 16).view(6, 16), torch.zeros(6, 16)
    (mine, _), weight = distributed.share((x, y), 1, 4, torch.device("cpu"))
    assert torch.equal(mine, x[[1, 5]]) and weight == 2 * 4 / 6  # rows 1 and 5, of 4 processes
    assert distributed.share((x, y), 0, 1, torch.device("cpu"))[1] == 1.0  # one: all, weight 1
    with pytest.raises(ValueError, match="cannot be shared by 8 processes"):
        distributed.share((x, y), 0, 8, torch.device("cpu"))
    tgt_out = torch.tensor([[5, 6, 2, 0], [5, 2, 0, 0], [5, 6, 7, 2]])  # 3, 2 and 4 targets
    batch = {"src": torch.ones(3, 2), "tgt_out": tgt_out}
    share, weight = distributed.share(batch, 0, 2, torch.device("cpu"))  # rows 0 and 2
    assert torch.equal(share["tgt_out"], tgt_out[[0, 2]]) and weight == (3 + 4) * 2 / 9
