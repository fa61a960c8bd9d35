"""seqlib's recurrent units against torch.nn's: forward + backward time against batch size.

The sizes of the book's issue for Section 7.3: input 64, hidden 256, T = 100 steps, float32,
batch sizes 1 to 64 (--batches). For each unit (RNN, LSTM, GRU) and batch size, four
implementations share torch.nn's weights (from_torch): torch.nn, seqlib's fast path (hand-
written backward pass, seqlib.fastpath), its textbook path (one product per gate, autograd
through every step), and for the GRU the fast path of the chapter's form (reset gate before
the product; a different model with the same number of products' arithmetic).

Timing: one run is one forward and one backward with a fixed output gradient (the weights'
gradients computed afresh every run). The implementations take turns run by run, their
order rotating, for --repeats rounds (fewer, at least 5, where that would take more than
--budget seconds). On the CPU (one thread) each run is timed by the CPU time of the process
(time.process_time), which the other programs of a busy machine do not inflate, and by the
wall clock; on a GPU by the wall clock, the queue drained. Reported: the median time, the
ratio of medians to torch.nn, and the spread of the run-by-run ratios (quartiles). Peak
memory is measured as in bench_attention.

Writes benchmarks/results/recurrent-<device>.md and .json and the figure
book/figures/recurrent_batch.png (recurrent_batch-cuda.png on a GPU).
"""

import os
import statistics
import time
from pathlib import Path

import matplotlib
import torch
from torch import nn

import seqlib
from benchmarks.bench_attention import (
    FIGURES,
    RESULTS,
    check_equal,
    common_parser,
    forward_backward,
    machine,
    peak_memory_mib,
    report,
    set_up,
    wait_for_quiet,
)
from seqlib.gated import GRU, LSTM

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the file-only backend)

T, P, M = 100, 64, 256  # steps, input size, hidden size
BATCHES = (1, 2, 4, 8, 12, 16, 32, 64)
TARGETS = {8: 1.3, 64: 1.1}  # the limits on fast / torch.nn, by batch size
UNITS = {"RNN": (nn.RNN, seqlib.RNN), "LSTM": (nn.LSTM, LSTM), "GRU": (nn.GRU, GRU)}
GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}
REFERENCE, FAST, TEXTBOOK = "torch.nn", "seqlib fast", "seqlib textbook"
CHAPTER_GRU, PRODUCTS = "seqlib fast, chapter's GRU", "matrix products only"


def cases(unit: str, B: int, device: torch.device) -> dict:
    """One run() per implementation of `unit` at batch B, all with torch.nn's weights."""
    torch.manual_seed(0)
    torch_class, ours_class = UNITS[unit]
    reference = torch_class(P, M, batch_first=True)
    models = {REFERENCE: reference, FAST: ours_class.from_torch(reference),
              TEXTBOOK: ours_class.from_torch(reference)}
    models[TEXTBOOK].fast = False
    if unit == "GRU":
        models[CHAPTER_GRU] = GRU(P, M)  # reset_after=False: the chapter's (7.18)
    gen = torch.Generator().manual_seed(B)
    x, grad = (torch.randn(B, T, n, generator=gen).to(device) for n in (P, M))
    for model in models.values():
        model.to(device)
    runs = {name: forward_backward(lambda x, model=model: model(x)[0],
                                   list(model.parameters()), grad, x)
            for name, model in models.items()}
    return runs | {PRODUCTS: products_only(GATES[unit], B, device)}


def products_only(G: int, B: int, device: torch.device):
    """A run() doing only the matrix products of seqlib's fast path for a unit with G gate
    blocks, on random numbers: the input terms of all steps, one product with W_hh per step
    forward and one per step back, and the weight gradients (a floor for any implementation
    that calls these products one by one)."""
    gen = torch.Generator().manual_seed(B)
    X, W_hx, W_hh, b, H, D = (torch.randn(*shape, generator=gen).to(device) for shape in
                              [(T * B, P), (G * M, P), (G * M, M), (G * M,), (T + 1, B, M),
                               (T, B, G * M)])

    def run() -> torch.Tensor:
        Z = torch.addmm(b, X, W_hx.T).view(T, B, G * M)  # input terms
        for t in range(T):
            Z[t].addmm_(H[t], W_hh.T)  # forward
        for t in range(T - 1, 0, -1):
            torch.addmm(H[t], D[t], W_hh)  # backward
        flat = D.view(T * B, G * M)
        flat.T @ H[:-1].reshape(T * B, M), flat.T @ X, flat.sum(0)  # weight gradients
        return Z

    return run


def clocks(device: torch.device):
    """The clocks a run is timed by: (name, function), the first one reported."""
    if device.type == "cuda":
        return [("wall", time.perf_counter)]
    return [("cpu", time.process_time), ("wall", time.perf_counter)]


def interleaved_times(runs: dict, device: torch.device, repeats: int, budget: float):
    """{clock: {name: [seconds of each round]}}: the runs take turns, order rotating."""
    names, sync = list(runs), (torch.cuda.synchronize if device.type == "cuda" else None)
    start = time.perf_counter()
    for name in names:  # warm-up, which also sizes the number of rounds
        runs[name]()
    rounds = max(5, min(repeats, int(budget / max(time.perf_counter() - start, 1e-9))))
    times = {clock: {name: [] for name in names} for clock, _ in clocks(device)}
    for i in range(rounds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            if sync:
                sync(device)
            before = [tick() for _, tick in clocks(device)]
            runs[name]()
            if sync:
                sync(device)
            for (clock, tick), t0 in zip(clocks(device), before, strict=True):
                times[clock][name].append(tick() - t0)
    return times


def quartiles(values: list[float]) -> tuple[float, float]:
    q1, _, q3 = statistics.quantiles(values, n=4)
    return q1, q3


def measure(unit: str, B: int, device: torch.device, args) -> list[dict]:
    """The rows of one unit at batch B: time, ratio to torch.nn with its spread, memory."""
    runs = cases(unit, B, device)
    check_equal({name: runs[name]() for name in (REFERENCE, FAST, TEXTBOOK)})
    times = interleaved_times(runs, device, args.repeats, args.budget)
    rows = []
    for name in runs:
        row = {"unit": unit, "batch": B, "implementation": name,
               "runs": len(times[clocks(device)[0][0]][name])}
        for clock, by_name in times.items():
            ours, base = by_name[name], by_name[REFERENCE]
            row[f"{clock} ms"] = 1e3 * statistics.median(ours)
            row[f"{clock} ratio"] = statistics.median(ours) / statistics.median(base)
            low, high = quartiles([a / b for a, b in zip(ours, base, strict=True)])
            row[f"{clock} ratio q1"], row[f"{clock} ratio q3"] = low, high
        row["peak MiB"] = peak_memory_mib(runs[name], device)
        rows.append(row)
    return rows


def plot(rows: list, clock: str, title: str, path: Path) -> None:
    """The ratio to torch.nn against batch size: fast path (quartile bars) and textbook."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2), constrained_layout=True)
    for k, unit in enumerate(UNITS):
        for name, style in ((FAST, "-"), (TEXTBOOK, "--")):
            own = [r for r in rows if r["unit"] == unit and r["implementation"] == name]
            if not own:
                continue
            batches = [r["batch"] for r in own]
            ratio = [r[f"{clock} ratio"] for r in own]
            spread = [[r - r_[f"{clock} ratio q1"] for r, r_ in zip(ratio, own, strict=True)],
                      [r_[f"{clock} ratio q3"] - r for r, r_ in zip(ratio, own, strict=True)]]
            label = f"{unit}, {'fast path' if name == FAST else 'textbook path'}"
            ax.errorbar(batches, ratio, yerr=[[max(0, s) for s in side] for side in spread],
                        color=f"C{k}", linestyle=style, marker="o" if name == FAST else "",
                        capsize=2, label=label, alpha=1.0 if name == FAST else 0.5)
    floor = [r for r in rows if r["unit"] == "LSTM" and r["implementation"] == PRODUCTS]
    if floor:
        ax.plot([r["batch"] for r in floor], [r[f"{clock} ratio"] for r in floor],
                color=f"C{list(UNITS).index('LSTM')}", linestyle=":",
                label="LSTM, matrix products only")
    for B, limit in TARGETS.items():
        ax.plot([B / 1.25, B * 1.25], [limit, limit], color="black", linewidth=2)
        ax.annotate(f"target {limit}", (B, limit), textcoords="offset points",
                    xytext=(0, 5), ha="center", fontsize=8)
    ax.axhline(1.0, color="grey", linewidth=1, linestyle=":")
    batches = sorted({r["batch"] for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.set_yscale("log")
    ticks = [t for t in (0.25, 0.5, 1, 1.5, 2, 4, 8, 16, 32)
             if min(r[f"{clock} ratio"] for r in rows) / 1.5 <= t
             <= 1.5 * max(r[f"{clock} ratio"] for r in rows)]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("batch size B")
    ax.set_ylabel("time / time of torch.nn")
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: ("products" in labels[i], i))
    ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=8, ncol=2)
    ax.set_title(title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"figure written to {path}")


def headline(rows: list, clock: str) -> str:
    """The targets, met or not, at batch 8 and 64 for the fast path."""
    words = []
    for unit in UNITS:
        for B, limit in TARGETS.items():
            row = next((r for r in rows if r["unit"] == unit and r["batch"] == B
                        and r["implementation"] == FAST), None)
            if row is not None:
                ratio = row[f"{clock} ratio"]
                words.append(f"{unit} at batch {B}: {ratio:.2f} (target {limit}, "
                             f"{'met' if ratio <= limit else 'NOT met'})")
    return "; ".join(words) + "."


def main() -> None:
    parser = common_parser(__doc__, repeats=41, quick="batches 2 and 8, 5 rounds",
                           sweep=("batches", BATCHES, "batch sizes B"), budget=40.0, least=5,
                           figure="recurrent_batch.png")
    parser.add_argument("--units", nargs="+", default=list(UNITS), choices=list(UNITS))
    args = parser.parse_args()
    if args.quick:
        args.batches, args.repeats, args.max_wait = [2, 8], 5, 0.0
    device = set_up(args.device)
    out = args.out if args.out is not None or args.quick else RESULTS
    figure = args.figure
    if figure is None and not args.quick:
        figure = FIGURES / ("recurrent_batch.png" if device.type == "cpu"
                            else f"recurrent_batch-{device.type}.png")
    meta, loads = machine(device), [wait_for_quiet(args.max_load, args.max_wait)]
    rows = []
    for unit in args.units:
        for B in sorted(set(args.batches)):
            rows += measure(unit, B, device, args)
            loads.append(os.getloadavg()[0])
            fast = next(r for r in rows[::-1] if r["implementation"] == FAST)
            print(f"{unit:5s} B={B:3d}: fast / torch.nn "
                  + ", ".join(f"{c} {fast[f'{c} ratio']:.2f}" for c, _ in clocks(device))
                  + f" ({fast['runs']} rounds)", flush=True)
    clock = clocks(device)[0][0]
    meta["load (1 min)"] = {"at start": round(loads[0], 2), "max during": round(max(loads), 2)}
    meta["timing"] = ("median of interleaved runs; 'cpu' is the CPU time of the process, "
                      "'wall' the wall clock; ratio q1, q3: quartiles of the run-by-run ratios")
    meta["peak memory"] = ("largest growth of the bytes held in tensors, from "
                           + ("torch.profiler allocation events (CPU)" if device.type == "cpu"
                              else "torch.cuda.max_memory_allocated"))
    meta["sizes"] = {"steps": T, "input": P, "hidden": M}
    columns = {"unit": ("unit", "s"), "batch": ("batch", "d"),
               "implementation": ("implementation", "s"), "runs": ("runs", "d")}
    for c, _ in clocks(device):
        columns |= {f"{c} ms": (f"{c} ms", ".2f"), f"{c} ratio": (f"{c} ratio", ".2f"),
                    f"{c} ratio q1": (f"{c} ratio q1", ".2f"),
                    f"{c} ratio q3": (f"{c} ratio q3", ".2f")}
    columns["peak MiB"] = ("peak MiB", ".1f")
    text = (f"Input {P}, hidden {M}, T = {T}, float32, forward + backward; ratios to torch.nn "
            f"({clock} time). Fast path: {headline(rows, clock)}")
    report("recurrent", "Recurrent units against torch.nn", meta,
           [("Time against batch size", text, rows, columns)], out)
    if figure is not None:
        where = "one CPU thread, CPU time" if device.type == "cpu" else meta["device_name"]
        plot(rows, clock, f"seqlib against torch.nn, forward + backward: input {P}, hidden "
             f"{M}, T = {T}, float32\n{where}, median of interleaved runs, quartile bars",
             figure)


if __name__ == "__main__":
    main()
