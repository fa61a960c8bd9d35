"""Train a full-profile model of the book on one or several GPUs (or CPU processes) with
PyTorch's own engine: `torchrun` starts one process per device, DistributedDataParallel
(DDP) averages their gradients (NCCL on GPUs, gloo on CPUs), and seqlib.train runs the
steps.

    python -m seqlib.experiments.distributed translation-de-en         # one GPU or the CPU
    torchrun --standalone --nproc_per_node=8 -m seqlib.experiments.distributed char-lm  # 8 GPUs
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 \\
        --rdzv-id=de-en -m seqlib.experiments.distributed translation-de-en  # on 2 machines

The experiments (`EXPERIMENTS`, beyond the chapter's text) are full profiles of the
chapters of Sections 7.4 and 7.5: the transformer of Fig. 7.16 from German to English
(`translation-de-en`) and from English to French (`translation-en-fr`), the encoder-decoder
with attention of Fig. 7.10 from German to English (`attention-de-en`), and the
decoder-only transformer on tiny Shakespeare (`char-lm`). Each is the run the chapters
train in their full profile, the runs.Run of translation.run or streams.run: its model,
batches, loss, optimizer, schedule, steps and clipping. Its configuration is the setup of
the chapters' PROFILES["full"] (seqlib.pages.config), its "data" completed with what the
command line chooses (the languages, and `limit` and `eval_limit`, the pairs kept for a
quick check), its "fit" with the run's defaults; `--set key=value` changes the entry `key`
of its "data", "model" or "fit" (`--set steps=100`); `--tf32` trains with TF32 matrix
products on GPUs that have them.

- Every process draws the same global batch, from the run's generator as in one-process
  training, and keeps its share of the rows (a deterministic sharding): the run sees the
  batches of one process, whatever the number of processes, and each share's loss is
  weighted so that DDP's average of the gradients is the gradient of the whole batch.
  The batches are assembled on the device: the model is moved there before its run is
  made, so the translation pairs are padded once into tensors there (translation.draws)
  and the language model's text is moved there once; a step only indexes them.
- Only rank 0 prints, shows a progress bar and reads and writes the folder `--out`. It
  writes a checkpoint every `--checkpoint-every` steps, atomically (`save_atomic` of
  seqlib.experiments.runs); a run started again with the same `--out` continues from the
  last one, on any number of processes. The randomness of dropout at step s comes from a
  generator seeded with (seed, s, rank), so a resumed run is the run that was not
  interrupted.
- At the end, rank 0 evaluates the model (validation loss; BLEU on test_2016_flickr for
  translation) and writes model.pt and results.json; `load` rebuilds the trained model.
"""

import argparse
import ast
import copy
import json
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from seqlib.data import multi30k, tiny_shakespeare
from seqlib.experiments import runs, shakespeare, streams
from seqlib.experiments import translation as tr
from seqlib.experiments.runs import save_atomic
from seqlib.lm import TransformerLM
from seqlib.pages.config import check_config
from seqlib.pages.seeds import book_seed, generator
from seqlib.seq2seq import AttentionSeq2Seq, teacher_forced_loss
from seqlib.text import char_vocab
from seqlib.training import train
from seqlib.transformer import Transformer
from seqlib.utils import default_device


def translation(config: dict, device="cpu") -> tuple[runs.Run, tr.TranslationData]:
    """The run of the transformer of Fig. 7.16 on Multi30k (translation.run), and its data;
    the configuration's "data" holds the languages, min_freq, and `limit` and `eval_limit`,
    which when not None keep only the first training pairs and the first pairs of each
    evaluation split (quick checks). The model is built on the CPU and moved to `device`,
    where the run's batches are assembled."""
    return _translation(config, "transformer", lambda data: Transformer(
        len(data.src_vocab), len(data.tgt_vocab), **config["model"]), device)


def attention_translation(config: dict, device="cpu") -> tuple[runs.Run, tr.TranslationData]:
    """The run of the encoder-decoder with attention of Fig. 7.10 and (7.22) on Multi30k
    (translation.run, chapter 08's full profile), and its data, as `translation`."""
    return _translation(config, "attention", lambda data: AttentionSeq2Seq(
        len(data.src_vocab), len(data.tgt_vocab), **config["model"]), device)


def _translation(config: dict, kind: str, build: Callable, device) -> tuple:
    """The translation run of the model build(data), named as the chapters name it, on
    `device`: its batches are taken there from the pairs padded once (translation.draws)."""
    data = config["data"]
    pairs = {split: multi30k(split, data["src"], data["tgt"])
             for split in ("train", "val", "test_2016_flickr")}
    pairs["train"] = pairs["train"][:data["limit"]]
    for split in ("val", "test_2016_flickr"):
        pairs[split] = pairs[split][:data["eval_limit"]]
    prepared = tr.prepare(pairs, data["min_freq"])
    return tr.run(f"{data['src']}-{data['tgt']}-{kind}", lambda: build(prepared).to(device),
                  prepared, config["fit"]), prepared


def char_lm(config: dict, device="cpu") -> tuple[runs.Run, tuple]:
    """The run of the decoder-only transformer of chapter 7.5 on tiny Shakespeare
    (streams.run), and its data (vocab, train_ids, val_ids); the model is built on the CPU
    and moved to `device`, and so is the training text, once."""
    model, fit = config["model"], config["fit"]
    if fit["context"] > model["max_len"]:
        raise ValueError(f"context={fit['context']} exceeds max_len={model['max_len']}: "
                         "a chunk must fit the transformer's positions")
    text = tiny_shakespeare()
    vocab = char_vocab(text)
    train_ids, val_ids = streams.split_corpus(torch.tensor(vocab.encode(text)), 0.9)
    built = runs.built(lambda: TransformerLM(len(vocab), **model).to(device), fit["seed"])
    return (streams.run("shakespeare-transformer", built, train_ids, fit),
            (vocab, train_ids, val_ids))


def at_step(items: Iterator) -> Callable[[int], object]:
    """step -> the item of that index of `items`, asked for in increasing order (the items
    before the first step asked for, that of a resumed run, are drawn and dropped)."""
    position = 0

    def item(step: int):
        nonlocal position
        if step < position:
            raise ValueError(f"steps must increase: step {step} asked after {position - 1}")
        for _ in range(step - position):
            next(items)
        position = step + 1
        return next(items)

    return item


def share(batch, rank: int, world: int, device: torch.device) -> tuple:
    """This process's rows of a global batch (rows rank, rank + world, ...), on `device`,
    and their weight: their part of the loss's denominator times `world`. The loss is a
    mean over the target tokens of a translation batch (a dict; padding, id 0, left out),
    over every position of a language model's chunks (x, y)."""
    rows = len(batch["tgt_out"] if isinstance(batch, dict) else batch[0])
    if rows < world:
        raise ValueError(f"a global batch of {rows} rows cannot be shared by {world} "
                         "processes: raise batch_size or use fewer processes")
    mine = slice(rank, None, world)
    if isinstance(batch, dict):
        part = {k: v[mine].to(device) for k, v in batch.items()}
        if world == 1:  # the whole batch, weight 1: no count, which would wait for the GPU
            return part, 1.0
        tokens = (batch["tgt_out"] != 0).sum(1).tolist()  # target tokens of each row
        return part, sum(tokens[mine]) * world / sum(tokens)
    return tuple(t[mine].to(device) for t in batch), len(range(rows)[mine]) * world / rows


@torch.no_grad()
def translation_val_loss(model: nn.Module, data: tr.TranslationData) -> float:
    """Validation loss, nats per target token, teacher forced (the model left in eval mode)."""
    model.eval()
    device = next(model.parameters()).device
    total, tokens, val = 0.0, 0, data.ids["val"]
    for i in range(0, len(val), 100):
        batch = {k: v.to(device) for k, v in tr.collate(val[i:i + 100]).items()}
        n = (batch["tgt_out"] != data.tgt_vocab.pad_id).sum().item()
        total, tokens = total + teacher_forced_loss(model, batch).item() * n, tokens + n
    return total / tokens


def val_loss(model: nn.Module, data, config: dict) -> float:
    """The validation loss: per target token for translation (`translation_val_loss`), per
    character for the language model (data = (vocab, train_ids, val_ids))."""
    if isinstance(data, tr.TranslationData):
        return translation_val_loss(model, data)
    return streams.evaluate(model, data[2], 32, config["fit"]["context"])


@torch.no_grad()
def evaluate(model: nn.Module, data, config: dict) -> dict:
    """The validation loss (`val_loss`), and for translation the BLEU of greedy and 4-beam
    translations of test_2016_flickr."""
    results = {"val_loss": val_loss(model, data, config)}
    if isinstance(data, tr.TranslationData):
        src, ref = zip(*data.pairs["test_2016_flickr"], strict=True)
        results |= {"bleu_greedy": tr.bleu(tr.translate(model, data, list(src)), list(ref)),
                    "bleu_beam4": tr.bleu(tr.translate(model, data, list(src), method="beam",
                                                       beam_size=4), list(ref))}
    return results


def _configuration(setup: dict, fit_check: tuple, **data) -> dict:
    """The configuration of a run of the command line: the setup of a full profile, its
    "data" completed with `data`, its "fit" with the run's defaults
    (fit_check = (FIT_KEYS, FIT_DEFAULTS) of the run's module)."""
    return {"data": {**data, **setup.get("data", {})}, "model": dict(setup["model"]),
            "fit": check_config(setup["fit"], *fit_check)}


def _translation_configuration(setup: str, src: str, tgt: str) -> dict:
    return _configuration(tr.PROFILES["full"][setup], (tr.FIT_KEYS, tr.FIT_DEFAULTS), src=src,
                          tgt=tgt, limit=None, eval_limit=None)


# name -> (function making its run and data from a configuration, its full configuration)
EXPERIMENTS = {
    "translation-de-en": (translation, _translation_configuration("transformer", "de", "en")),
    "translation-en-fr": (translation, _translation_configuration("transformer", "en", "fr")),
    "attention-de-en": (attention_translation,
                        _translation_configuration("attention", "de", "en")),
    "char-lm": (char_lm, _configuration(shakespeare.PROFILES["full"]["transformer"],
                                        (streams.FIT_KEYS, streams.FIT_DEFAULTS))),
}


def configure(experiment: str, assignments=()) -> dict:
    """The experiment's configuration ({"data", "model", "fit"}) with each "key=value" of
    `assignments` applied to the entry `key` of whichever part holds it (the value read as
    a Python literal, else as a string)."""
    if experiment not in EXPERIMENTS:
        raise ValueError(f"experiment must be one of {sorted(EXPERIMENTS)}, got {experiment!r}")
    config = copy.deepcopy(EXPERIMENTS[experiment][1])
    for assignment in assignments:
        key, sep, text = assignment.partition("=")
        parts = [part for part in config.values() if key in part]
        if not sep or not parts:
            known = sorted(k for part in config.values() for k in part)
            raise ValueError(f"--set takes key=value with a key among {known}, got "
                             f"{assignment!r}")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        default = parts[0][key]
        if default is not None and not (type(value) is type(default) or (
                type(default) is float and type(value) is int)):
            raise ValueError(f"--set {key}=VALUE must be of type {type(default).__name__} "
                             f"like its default {default!r}, got {value!r}")
        parts[0][key] = value
    return config


def start_processes() -> tuple[int, int, torch.device]:
    """(rank, number of processes, device): torchrun's process group (NCCL on GPUs, each
    process on the GPU of its LOCAL_RANK; gloo on CPUs), or one process on
    seqlib.default_device() without torchrun."""
    device = default_device()
    if "RANK" not in os.environ:  # not started by torchrun
        return 0, 1, device
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl")
    else:
        dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size(), device


def weighted_loss(loss_fn: Callable, world: int) -> Callable:
    """A loss_fn for seqlib.train of batches (share, weight): the share's loss times its
    weight. Its value is that of the whole batch's loss (the processes' average), so every
    process records, and checks, the same number; its gradient is the share's, which DDP
    averages over the processes."""
    def loss(model, batch):
        share, weight = batch
        value = loss_fn(model, share) * weight
        if world > 1:
            total = value.detach().clone()
            dist.all_reduce(total)  # the sum over the processes
            value = value + (total / world - value).detach()
        return value

    return loss


def last_checkpoint(out: Path, identity: dict, rank: int, world: int) -> dict | None:
    """The checkpoint in `out` (None if there is none), read by rank 0 and sent to every
    process; a checkpoint of another run (experiment, configuration, dtype) is an error."""
    saved = None
    if rank == 0 and (out / "checkpoint.pt").exists():
        saved = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=True)
        other = {k: saved.get(k) for k in identity}
        if other != identity:
            raise ValueError(f"{out / 'checkpoint.pt'} is a checkpoint of another run, "
                             f"{other}; choose another --out, or delete it to start again")
    if world > 1:
        box = [saved]
        dist.broadcast_object_list(box)  # from rank 0 to every process
        saved = box[0]
    return saved


def main(argv=None) -> dict:
    """The command line: train (or resume) an experiment, evaluate it, write its results.
    Returns the results on rank 0 ({} on the other ranks)."""
    parser = argparse.ArgumentParser(prog="python -m seqlib.experiments.distributed",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=sorted(EXPERIMENTS))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="change one entry of the configuration (repeatable)")
    parser.add_argument("--out", type=Path, help="folder of the checkpoint, the model and "
                        "the results (default: runs/EXPERIMENT)")
    parser.add_argument("--checkpoint-every", type=int, default=200, metavar="STEPS",
                        help="steps between checkpoints (default: 200)")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                        help="of the parameters (default: float32; float64 for exact checks)")
    parser.add_argument("--tf32", action="store_true", help="on a GPU that has them, matrix "
                        "products in TF32 (10 bits of mantissa instead of float32's 23): "
                        "faster training; the chapters' checked cells never use it")
    parser.add_argument("--eval-every", type=int, default=0, metavar="STEPS",
                        help="also measure the validation loss every STEPS steps (results: "
                        "the curve and its best point, as nanoGPT reports; default: never)")
    parser.add_argument("--max-seconds", type=float, metavar="S", help="stop training after "
                        "the step that passes S seconds of training (the schedule stays that "
                        "of the configured steps; the results give the steps done)")
    parser.add_argument("--no-evaluate", action="store_true", help="skip the evaluation")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.checkpoint_every < 1:
        parser.error(f"--checkpoint-every must be a positive int, got {args.checkpoint_every}")
    if args.eval_every < 0:
        parser.error(f"--eval-every must be 0 (never) or positive, got {args.eval_every}")
    try:
        config = configure(args.experiment, args.set)
    except ValueError as err:
        parser.error(str(err))
    out, steps = args.out or Path("runs") / args.experiment, config["fit"]["steps"]
    identity = {"experiment": args.experiment, "config": config, "dtype": args.dtype,
                "tf32": args.tf32}
    rank, world, device = start_processes()
    if args.tf32 and device.type == "cuda":  # default_device() set "highest"
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("high")
    log = print if rank == 0 else (lambda *a, **k: None)
    try:
        run, data = EXPERIMENTS[args.experiment][0](config, device)
        model = run.model.to(device, getattr(torch, args.dtype))
        optimizer = run.optimizer(model)
        saved, start, history = last_checkpoint(out, identity, rank, world), 0, None
        curve = []  # (step, validation loss) every --eval-every steps
        if saved is not None:
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            start, history, curve = saved["step"], saved["history"], saved.get("val_curve", [])
        log(f"{args.experiment}: {sum(p.numel() for p in model.parameters()):,} parameters, "
            f"{world} process{'es' if world > 1 else ''} on {device.type}, "
            + (f"resumed at step {start} of {steps}" if start else f"{steps} steps"))
        draws = run.batches(generator(run.seed))  # the global batches, as in one process
        draws = draws if callable(draws) else at_step(iter(draws))

        def batch(step):
            # Dropout draws from the global generator: seeded by (seed, step, rank), so
            # that a resumed run draws what the uninterrupted one drew.
            torch.manual_seed(hash((book_seed(run.seed), step, rank)) % 2**63)
            return share(draws(step), rank, world, device)

        def on_step(step, history):
            if rank == 0 and args.eval_every and (step + 1) % args.eval_every == 0:
                curve.append((step + 1, val_loss(model, data, config)))
                model.train()
            stop = args.max_seconds is not None and history["seconds"][-1] >= args.max_seconds
            if world > 1 and args.max_seconds is not None:  # rank 0's clock decides for all
                flag = torch.tensor([float(stop)], device=device)
                dist.broadcast(flag, 0)
                stop = bool(flag.item())
            if rank == 0 and ((step + 1) % args.checkpoint_every == 0 or step + 1 == steps
                              or stop):
                out.mkdir(parents=True, exist_ok=True)
                save_atomic({**identity, "step": step + 1, "model": model.state_dict(),
                             "optimizer": optimizer.state_dict(), "history": history,
                             "val_curve": curve},
                            out / "checkpoint.pt")
            return stop

        if start < steps:
            ddp = model if world == 1 else DistributedDataParallel(
                model, device_ids=[device] if device.type == "cuda" else None)
            history = train(ddp, weighted_loss(run.loss, world), batch, steps=steps,
                            optimizer=optimizer, clip=run.clip,
                            schedule=None if run.schedule is None else run.rate,
                            start=start, history=history, on_step=on_step,
                            progress=rank == 0 and not args.no_progress, desc=args.experiment)
        if rank != 0:
            return {}
        last = history["loss"][-100:]
        results = {**identity, "processes": world, "device": device.type,
                   "parameters": sum(p.numel() for p in model.parameters()),
                   "steps_done": len(history["loss"]), "train_seconds": history["seconds"][-1],
                   "train_loss_last_100_steps": sum(last) / len(last)}
        if curve:
            best_step, best = min(curve, key=lambda point: point[1])
            results |= {"val_curve": curve, "val_loss_best": best,
                        "val_loss_best_step": best_step}
        if not args.no_evaluate:
            results |= evaluate(model, data, config)
            results["val_bits"] = results["val_loss"] / math.log(2)
        save_atomic({**identity, "model": model.state_dict()}, out / "model.pt")
        (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        log(json.dumps({k: v for k, v in results.items() if k != "config"}, indent=1))
        return results
    finally:
        if world > 1:
            dist.destroy_process_group()


def load(out, device=None) -> tuple[runs.Run, object]:
    """The run that `main` trained into the folder `out` and its data, rebuilt from the
    saved configuration, with the trained weights in run.model (on `device`, by default
    seqlib.default_device()) in evaluation mode."""
    saved = torch.load(Path(out) / "model.pt", map_location="cpu", weights_only=True)
    device = default_device() if device is None else torch.device(device)
    run, data = EXPERIMENTS[saved["experiment"]][0](saved["config"], device)
    run.model.to(device, getattr(torch, saved["dtype"])).load_state_dict(saved["model"])
    run.model.eval()
    return run, data


if __name__ == "__main__":
    main()
