"""The input pipeline: the time to assemble one training batch, as the training code does.

The full profile's runs (seqlib.experiments.distributed) draw one batch per step. This
measures what drawing it costs, on one CPU thread, for their two kinds of batches:

1. translation (translation-de-en and attention-de-en: 128 pairs of Multi30k German-English,
   words seen at least twice), two ways:
   - "from lists": sentences.batch_indices draws the pairs, and translation.collate pads
     their id lists into tensors (pad_batch) at every step (translation.batches);
   - "from tensors": translation.draws, which pads every pair once into tensors on the
     device (its one-time cost is reported apart) and at every step picks the batch's rows
     and cuts the columns to its longest sentence;
2. character-level (char-lm: 64 streams of 256 characters of tiny Shakespeare):
   streams.contiguous_batches, the rows' positions and one gather per step.

Timing: one repetition draws --batches consecutive batches after the first (an epoch of
de-en pairs is 227 batches, so a repetition also pays for an epoch's shuffle and sorting;
the first batch pays for what is done once, timed apart), timed by the CPU time of the
process (time.process_time), which the other programs of a busy machine do not inflate,
and by the wall clock; --repeats repetitions, and the median per batch is kept.
With --device cuda, the tensors live on the GPU, the batches of lists are moved there at
every step (as the runs used to), and the queue is drained before the clock is read.

Writes benchmarks/results/batches-<device>.md and .json and prints the same table.
"""

import itertools
import statistics
import time
from collections.abc import Iterator

import torch

from benchmarks.bench_attention import RESULTS, common_parser, machine, report, set_up
from seqlib.data import multi30k, tiny_shakespeare
from seqlib.experiments import distributed, streams
from seqlib.experiments import translation as tr
from seqlib.text import char_vocab

TRANSLATION, CHARACTERS = "translation-de-en", "char-lm"


def translation_examples(limit: int | None) -> list:
    """The training pairs of the translation runs as ids (the first `limit`, if given)."""
    data = distributed.configure(TRANSLATION)["data"]
    train = multi30k("train", data["src"], data["tgt"])[:limit]
    return tr.prepare({"train": train}, data["min_freq"]).ids["train"]


def character_ids() -> torch.Tensor:
    """The training stream of the character-level run: the first 90% of tiny Shakespeare."""
    text = tiny_shakespeare()
    return streams.split_corpus(torch.tensor(char_vocab(text).encode(text)), 0.9)[0]


def moved(batches: Iterator, device: torch.device) -> Iterator:
    """Each batch (a dict or a tuple of tensors) moved to `device`."""
    for batch in batches:
        yield ({k: v.to(device) for k, v in batch.items()} if isinstance(batch, dict)
               else tuple(t.to(device) for t in batch))


def per_batch(make, count: int, repeats: int, device: torch.device) -> dict:
    """The median CPU and wall time, in ms, of drawing one of `count` consecutive batches
    from the iterator make() returns (made afresh for every repetition, and its first
    batch, which pays what is done once, drawn before the clock starts)."""
    cpu, wall = [], []
    for _ in range(repeats):
        batches = make()
        next(batches)
        begin_cpu, begin = time.process_time(), time.perf_counter()
        for _ in itertools.islice(batches, count):
            pass
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        cpu.append((time.process_time() - begin_cpu) / count)
        wall.append((time.perf_counter() - begin) / count)
    return {"cpu ms": 1e3 * statistics.median(cpu), "wall ms": 1e3 * statistics.median(wall)}


def once(build, device: torch.device) -> float:
    """The CPU time, in ms, of build() once."""
    begin = time.process_time()
    build()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return 1e3 * (time.process_time() - begin)


def main() -> None:
    parser = common_parser(__doc__, repeats=5, quick="2,000 pairs, 20 batches, 2 repetitions",
                           sweep=("batches", (227,), "batches drawn per repetition"))
    args = parser.parse_args()
    if args.quick:
        args.batches, args.repeats = [20], 2
    limit = 2000 if args.quick else None
    out = args.out if args.out is not None or args.quick else RESULTS
    device = set_up(args.device)
    count = args.batches[0]
    examples, ids = translation_examples(limit), character_ids()
    fit = distributed.configure(TRANSLATION)["fit"]
    B = fit["batch_size"]
    lm = distributed.configure(CHARACTERS)["fit"]
    seed = torch.Generator().manual_seed
    cases = {
        "translation, from lists": lambda: moved(tr.batches(examples, B, seed(0)), device),
        "translation, from tensors": lambda: tr.draws(examples, B, device, seed(0)),
        "character-level": lambda: streams.contiguous_batches(
            ids.to(device), lm["batch_size"], lm["context"]),
    }
    rows = []
    for name, make in cases.items():
        row = {"batches": name, "rows x steps": (f"{B} pairs" if name.startswith("trans")
                                                 else f"{lm['batch_size']} x {lm['context']}")}
        row |= per_batch(make, count, args.repeats, device)
        row["once ms"] = once(lambda: next(tr.draws(examples, B, device, seed(0))), device) \
            if name.endswith("tensors") else 0.0
        rows.append(row)
        print(f"{name}: {row['cpu ms']:.3f} ms CPU per batch", flush=True)
    meta = machine(device, pairs=len(examples), characters=len(ids), batches=count,
                   repeats=args.repeats)
    text = (f"The median over {args.repeats} repetitions of the time per batch of {count} "
            "consecutive batches: CPU time of the process and wall clock, one thread. "
            "\"once, CPU ms\": padding every pair into tensors and moving them to the "
            "device, paid once per run (with the first batch).")
    columns = {"batches": ("batches", "s"), "size": ("rows x steps", "s"),
               "CPU ms per batch": ("cpu ms", ".3f"), "wall ms per batch": ("wall ms", ".3f"),
               "once, CPU ms": ("once ms", ".0f")}
    report("batches", "Assembling one training batch", meta,
           [("Per batch", text, rows, columns)], out)


if __name__ == "__main__":
    main()
