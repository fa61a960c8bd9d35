"""Section 7.5 against PyTorch: forward + backward time and peak memory of attention.

Two comparisons, float32, one CPU thread on the CPU:

1. attention, softmax(Q K^T / sqrt(m) + Lambda) V of (7.24)-(7.27), Lambda the additive
   mask: seqlib's explicit path
   (scaled_dot_product(..., fast=False), which forms the T x T weights), its fast path
   (fast=True) and torch.nn.functional.scaled_dot_product_attention called directly; batch
   8, 8 heads, head size m = 64, T = 64 ... 2048, causal and not.
2. the transformer block (7.31) against torch.nn.TransformerEncoderLayer (p = 512, 8 heads,
   n1 = 2048, batch 8, T = 256, ReLU, dropout 0, post-norm): seqlib's block with torch's
   weights (TransformerBlock.from_torch, attention biases included, the same work) and the
   chapter's bias-free block.

Timing: the implementations take turns run by run (the order rotating), each run is one
forward and one backward (with a fixed output gradient) and the median is kept; the number
of runs is --repeats, fewer (at least 3) where the rounds would take more than --budget
seconds in all. Peak memory is the largest growth, during one forward + backward, of the bytes
held in tensors: on the CPU from the allocation events of torch.profiler (profile_memory),
on a GPU torch.cuda.max_memory_allocated minus the memory allocated before. Before each
part the benchmark waits (up to --max-wait seconds) until the 1-minute load average is at
most --max-load, and records the load.

Writes benchmarks/results/attention-<device>.md and .json and prints the same tables.
"""

import argparse
import contextlib
import datetime
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from seqlib.self_attention import scaled_dot_product
from seqlib.transformer import TransformerBlock

RESULTS = Path(__file__).parent / "results"
FIGURES = Path(__file__).resolve().parents[1] / "book" / "figures"
LENGTHS = (64, 128, 256, 512, 1024, 2048)
B, H, M = 8, 8, 64  # batch, heads, head size of the attention comparison
BLOCK = {"p": 512, "heads": 8, "n1": 2048, "batch": 8, "T": 256}
FAST_LIMIT, BLOCK_LIMIT = 1.05, 1.20  # the targets: fast/SDPA and block/torch time ratios


# ---- measurement helpers, shared with bench_scaling ------------------------------------

def positive(text: str) -> int:
    """argparse type: a positive integer."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def set_up(device_name: str) -> torch.device:
    """The device to measure on: one thread on the CPU, full float32 (no TF32) on a GPU."""
    device = torch.device(device_name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {device_name}: CUDA is not available here")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    elif device.type != "cpu":
        raise ValueError(f"--device must be cpu or cuda[:index], got {device_name!r}")
    torch.set_num_threads(1)
    return device


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(run: Callable[[], object], device: torch.device) -> float:
    """Seconds of one call of `run`, the GPU's queue drained before and after."""
    _sync(device)
    start = time.perf_counter()
    run()
    _sync(device)
    return time.perf_counter() - start


def median_times(cases: dict, device: torch.device, repeats: int, budget: float):
    """Median seconds of each case's run(); the cases take turns, their order rotating.

    One warm-up run each, whose results are returned to be checked; then `repeats` rounds,
    or as many as fit in `budget` seconds, at least 3. Returns
    ({name: median seconds}, rounds, {name: warm-up result})."""
    names, outputs, warm = list(cases), {}, 0.0
    for name in names:
        _sync(device)
        start = time.perf_counter()
        outputs[name] = cases[name]()
        _sync(device)
        warm += time.perf_counter() - start
    rounds = max(3, min(repeats, int(budget / max(warm, 1e-9))))
    times = {name: [] for name in names}
    for i in range(rounds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            times[name].append(timed(cases[name], device))
    return {name: statistics.median(t) for name, t in times.items()}, rounds, outputs


@contextlib.contextmanager
def _quiet_stderr():
    """Silence the profiler's start/stop lines, written by C++ straight to file 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_memory_mib(run: Callable[[], object], device: torch.device) -> float:
    """The largest growth of the memory held in tensors during one run(), in MiB."""
    if device.type == "cuda":
        _sync(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        run()
        _sync(device)
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    held = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):  # + allocated, - freed bytes
        held += event.nbytes()
        peak = max(peak, held)
    return peak / 2**20


def wait_for_quiet(max_load: float, max_wait: float) -> float:
    """Wait (up to max_wait seconds) until the 1-minute load average is at most max_load;
    returns the load then."""
    deadline = time.monotonic() + max_wait
    load = os.getloadavg()[0]
    if load > max_load:
        print(f"1-minute load {load:.2f} > {max_load}: waiting up to {max_wait:.0f} s",
              flush=True)
    while load > max_load and time.monotonic() < deadline:
        time.sleep(15)
        load = os.getloadavg()[0]
    return load


def machine(device: torch.device, **extra) -> dict:
    """Date, versions, processor, threads and device of a measurement."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info
                        if line.startswith("model name")), cpu)
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join([Path(sys.executable).name, "-m",
                                 f"benchmarks.{Path(sys.argv[0]).stem}", *sys.argv[1:]]),
            "torch": torch.__version__, "python": platform.python_version(), "cpu": cpu,
            "cores": os.cpu_count(), "threads": torch.get_num_threads(), "device": str(device),
            "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                            else "CPU"), **extra}


def markdown_table(rows: list[dict], columns: dict) -> str:
    """A markdown table of `rows` with columns {header: (key, format)}."""
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(format(row[key], fmt) for key, fmt in columns.values())
                     + " |")
    return "\n".join(lines)


def report(name: str, title: str, meta: dict, sections: list, out: Path | None) -> None:
    """Print the tables and write them, with `meta`, to out/<name>-<device>.md and .json.

    sections: (heading, text, rows, columns) per table."""
    head = [f"# {title}", "", *(f"- {key}: {value}" for key, value in meta.items()), ""]
    body = []
    for heading, text, rows, columns in sections:
        body += [f"## {heading}", "", text, "", markdown_table(rows, columns), ""]
    text = "\n".join(head + body)
    print(text)
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{name}-{torch.device(meta['device']).type}"
    stem.with_suffix(".md").write_text(text)
    stem.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "sections": {s[0]: s[2] for s in sections}}, indent=2) + "\n")
    print(f"written to {stem}.md and .json")


def forward_backward(forward: Callable, leaves: list[torch.Tensor], grad: torch.Tensor,
                     *inputs) -> Callable[[], torch.Tensor]:
    """A run(): forward(*inputs), backward with output gradient `grad`, then the leaves'
    gradients dropped (so every run allocates them afresh); returns the detached output."""
    def run() -> torch.Tensor:
        out = forward(*inputs)
        out.backward(grad)
        for leaf in leaves:
            leaf.grad = None
        return out.detach()
    return run


def check_equal(outputs: dict, atol: float = 1e-4) -> None:
    """Raise unless every implementation computed the same outputs."""
    (first, reference), *others = outputs.items()
    for name, out in others:
        if not torch.allclose(out, reference, rtol=1e-4, atol=atol):
            error = (out - reference).abs().max().item()
            raise AssertionError(f"{name} differs from {first} by up to {error:.2e}")


# ---- 1. attention --------------------------------------------------------------------

ATTENTION = ("seqlib explicit", "seqlib fast", "torch SDPA")


def attention_cases(T: int, causal: bool, device: torch.device) -> dict:
    """The three implementations of softmax(Q K^T / sqrt(m) + Lambda) V on the same q, k, v."""
    gen = torch.Generator().manual_seed(T)
    q, k, v, grad = (torch.randn(B, H, T, M, generator=gen).to(device) for _ in range(4))
    leaves = [x.requires_grad_() for x in (q, k, v)]
    forwards = {
        "seqlib explicit": lambda: scaled_dot_product(q, k, v, causal=causal, fast=False)[0],
        "seqlib fast": lambda: scaled_dot_product(q, k, v, causal=causal, fast=True)[0],
        "torch SDPA": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
    }
    return {name: forward_backward(f, leaves, grad) for name, f in forwards.items()}


def call_overhead_us(device: torch.device, causal: bool, calls: int = 2000) -> float:
    """Microseconds seqlib's fast path adds to each call of scaled_dot_product_attention
    (its argument checks): the best of 5 batches of `calls` forward calls on two-step
    tensors, where the attention itself costs next to nothing."""
    q, k, v = (torch.randn(1, 1, 2, M, device=device) for _ in range(3))

    def best(f) -> float:
        with torch.no_grad():
            return min(timed(lambda: [f() for _ in range(calls)], device)
                       for _ in range(5)) / calls

    ours = best(lambda: scaled_dot_product(q, k, v, causal=causal, fast=True))
    theirs = best(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    return 1e6 * (ours - theirs)


def bench_attention(args, device) -> tuple[list, dict]:
    """Part 1: a row per (T, causal) with the three implementations' times, memories and
    ratios to SDPA; and the 1-minute loads."""
    rows, loads = [], [wait_for_quiet(args.max_load, args.max_wait)]
    for T in args.lengths:
        for causal in (False, True):
            cases = attention_cases(T, causal, device)
            medians, rounds, outputs = median_times(cases, device, args.repeats, args.budget)
            check_equal(outputs)
            base = medians["torch SDPA"]
            row = {"T": T, "causal": "yes" if causal else "no", "runs": rounds}
            for name in ATTENTION:
                row[f"{name} ms"] = 1e3 * medians[name]
                row[f"{name} MiB"] = peak_memory_mib(cases[name], device)
            row["fast/SDPA"] = medians["seqlib fast"] / base
            row["explicit/SDPA"] = medians["seqlib explicit"] / base
            rows.append(row)
            loads.append(os.getloadavg()[0])
            print(f"T={T:5d} causal={causal!s:5} fast/SDPA {row['fast/SDPA']:.3f} "
                  f"explicit/SDPA {row['explicit/SDPA']:.2f} ({rounds} runs)", flush=True)
    return rows, {"load at start": round(loads[0], 2), "max load during": round(max(loads), 2)}


# ---- 2. transformer block ------------------------------------------------------------

def block_cases(device: torch.device, T: int) -> dict:
    """torch.nn.TransformerEncoderLayer, seqlib's block with its weights, the chapter's."""
    torch.manual_seed(0)
    p, heads, n1, batch = BLOCK["p"], BLOCK["heads"], BLOCK["n1"], BLOCK["batch"]
    layer = nn.TransformerEncoderLayer(p, heads, n1, dropout=0.0, batch_first=True)
    models = {"torch.nn.TransformerEncoderLayer": layer,
              "seqlib, from_torch (biases)": TransformerBlock.from_torch(layer),
              "seqlib, chapter (no attention biases)": TransformerBlock(p, heads, n1=n1)}
    gen = torch.Generator().manual_seed(1)
    x, grad = (torch.randn(batch, T, p, generator=gen).to(device) for _ in range(2))
    x.requires_grad_()
    return {name: forward_backward(model.to(device), [x, *model.parameters()], grad, x)
            for name, model in models.items()}


def bench_block(args, device) -> tuple[list, dict]:
    """Part 2: a row per block with its time, ratio to torch's layer and memory; and the
    1-minute loads."""
    load = wait_for_quiet(args.max_load, args.max_wait)
    cases = block_cases(device, args.block_length)
    medians, rounds, outputs = median_times(cases, device, args.repeats, args.budget)
    check_equal(dict(list(outputs.items())[:2]))  # the same weights, the same outputs
    base = medians["torch.nn.TransformerEncoderLayer"]
    rows = [{"implementation": name, "median ms": 1e3 * medians[name],
             "ratio to torch": medians[name] / base, "runs": rounds,
             "peak MiB": peak_memory_mib(cases[name], device)} for name in cases]
    return rows, {"load at start": round(load, 2),
                  "max load during": round(max(load, os.getloadavg()[0]), 2)}


def common_parser(doc: str, *, repeats: int, quick: str, sweep: tuple = ("lengths", LENGTHS,
                  "sequence lengths T"), budget: float = 30.0, least: int = 3,
                  figure: str | None = None) -> argparse.ArgumentParser:
    """The options every benchmark takes: device, the sizes it sweeps (`sweep`: the option's
    name, its default values and help; --lengths by default), repeats, time budget, load
    limit, quick smoke run, output folder and, when `figure` names its default file, the
    figure."""
    name, default, help_text = sweep
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda[:index]")
    parser.add_argument(f"--{name}", nargs="+", type=positive, default=list(default),
                        help=help_text)
    parser.add_argument("--repeats", type=positive, default=repeats,
                        help="runs per implementation (at most)")
    parser.add_argument("--budget", type=float, default=budget,
                        help="seconds the timed runs of one configuration should take at "
                             f"most: fewer rounds (at least {least}) where --repeats would "
                             "take longer")
    parser.add_argument("--max-load", type=float, default=1.0)
    parser.add_argument("--max-wait", type=float, default=1200.0)
    parser.add_argument("--quick", action="store_true",
                        help=f"a smoke run: {quick}, no waiting; writes nothing unless an "
                             "output is named")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the results (default benchmarks/results)")
    if figure is not None:
        parser.add_argument("--figure", type=Path, default=None,
                            help=f"the PNG figure (default book/figures/{figure})")
    return parser


def main() -> None:
    """Parse the options, run the parts asked for, print and write the results."""
    parser = common_parser(__doc__, repeats=101, quick="T = 64, 128, block T = 64, 3 runs")
    parser.add_argument("--parts", nargs="+", default=["attention", "block"],
                        choices=["attention", "block"])
    parser.add_argument("--block-length", type=positive, default=BLOCK["T"])
    args = parser.parse_args()
    if args.quick:
        args.lengths, args.block_length, args.repeats = [64, 128], 64, 3
        args.max_wait = 0.0
    out = args.out if args.out is not None or args.quick else RESULTS
    device = set_up(args.device)
    meta, sections = machine(device), []
    if "attention" in args.parts:
        rows, loads = bench_attention(args, device)
        meta["attention load (1 min)"] = loads
        worst = max(rows, key=lambda r: r["fast/SDPA"])
        verdict = "met" if worst["fast/SDPA"] <= FAST_LIMIT else "NOT met"
        columns = {"T": ("T", "d"), "causal": ("causal", "s"), "runs": ("runs", "d")}
        for name in ATTENTION:
            columns[f"{name} ms"] = (f"{name} ms", ".2f")
        columns |= {"fast / SDPA": ("fast/SDPA", ".3f"),
                    "explicit / SDPA": ("explicit/SDPA", ".2f")}
        for name in ATTENTION:
            columns[f"{name} MiB"] = (f"{name} MiB", ".1f")
        overhead = [call_overhead_us(device, causal) for causal in (False, True)]
        meta["fast path overhead per call (us)"] = [round(o, 1) for o in overhead]
        mean = statistics.geometric_mean(r["fast/SDPA"] for r in rows)
        text = (f"Batch {B}, {H} heads, head size {M}, float32; forward + backward, median "
                f"ms. Largest fast/SDPA ratio {worst['fast/SDPA']:.3f} (T={worst['T']}, "
                f"causal {worst['causal']}): the target of at most {FAST_LIMIT} is {verdict}; "
                f"geometric mean over the rows {mean:.3f}. "
                f"The fast path calls scaled_dot_product_attention itself (is_causal=True for "
                f"causal attention, the same kernel); its argument checks add "
                f"{overhead[0]:.1f} us per call ({overhead[1]:.1f} us causal), measured on "
                f"two-step tensors.")
        sections.append(("Attention: seqlib's explicit and fast paths, and SDPA", text, rows,
                         columns))
    if "block" in args.parts:
        rows, loads = bench_block(args, device)
        meta["block load (1 min)"] = loads
        worst = max(rows, key=lambda r: r["ratio to torch"])
        verdict = "met" if worst["ratio to torch"] <= BLOCK_LIMIT else "NOT met"
        text = (f"p={BLOCK['p']}, {BLOCK['heads']} heads, n1={BLOCK['n1']}, batch "
                f"{BLOCK['batch']}, T={args.block_length}, dropout 0, post-norm, float32; "
                f"forward + backward (input gradient included). Largest ratio "
                f"{worst['ratio to torch']:.2f}: the target of at most {BLOCK_LIMIT} is "
                f"{verdict}.")
        columns = {"implementation": ("implementation", "s"), "runs": ("runs", "d"),
                   "median ms": ("median ms", ".1f"), "ratio to torch": ("ratio to torch", ".2f"),
                   "peak MiB": ("peak MiB", ".1f")}
        sections.append(("Transformer block (7.31) against torch.nn.TransformerEncoderLayer",
                         text, rows, columns))
    method = ("torch.profiler allocation events (CPU)" if device.type == "cpu"
              else "torch.cuda.max_memory_allocated")
    meta["peak memory"] = f"largest growth of the bytes held in tensors, from {method}"
    report("attention", "Attention and transformer block against PyTorch", meta, sections, out)


if __name__ == "__main__":
    main()
