"""How the cost of a recurrent layer and of self-attention grows with sequence length T.

An LSTM (torch.nn.LSTM and seqlib.LSTM's fast path, input and hidden size 256) against one
layer of causal multi-head self-attention (seqlib.MultiHeadAttention, p = 256, 4 heads of
size 64, fast path = scaled_dot_product_attention, and the explicit path that forms the
T x T weights), batch 8, T = 64 ... 2048, float32: forward + backward time (median of
interleaved runs) and peak memory, measured as in bench_attention. The LSTM does O(T) work
in T sequential steps; attention does O(T^2) work in a few large products, and its explicit
path keeps O(T^2) weights for the backward pass.

Prints the tables and the fitted log-log slopes (time ~ T^slope), writes
benchmarks/results/scaling-<device>.md and .json and the figure
book/figures/attention_scaling.png (attention_scaling-cuda.png on a GPU).
"""

import os
from pathlib import Path

import matplotlib
import numpy as np
import torch
from torch import nn

from benchmarks.bench_attention import (
    FIGURES,
    RESULTS,
    common_parser,
    forward_backward,
    machine,
    median_times,
    peak_memory_mib,
    report,
    set_up,
    wait_for_quiet,
)
from seqlib import LSTM, MultiHeadAttention

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the file-only backend)
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

LENGTHS = (64, 128, 256, 512, 1024, 2048)
B, P, HEADS = 8, 256, 4  # batch, features (LSTM input and hidden size, attention's p), heads
LAYERS = ("torch.nn.LSTM", "seqlib LSTM", "attention, fast", "attention, explicit")
STYLE = {"torch.nn.LSTM": ("C0", "o", "-"), "seqlib LSTM": ("C0", "s", "--"),
         "attention, fast": ("C3", "o", "-"), "attention, explicit": ("C3", "s", "--")}


def scaling_cases(T: int, device: torch.device) -> dict:
    """One run() per layer: forward and backward over x (B, T, P), input gradient included."""
    torch.manual_seed(0)
    reference = nn.LSTM(P, P, batch_first=True)
    ours = LSTM.from_torch(reference, fast=True)
    attention = MultiHeadAttention(P, HEADS)  # fast=True: scaled_dot_product_attention
    explicit = MultiHeadAttention(P, HEADS, fast=False)
    explicit.load_state_dict(attention.state_dict())
    gen = torch.Generator().manual_seed(T)
    x, grad = (torch.randn(B, T, P, generator=gen).to(device) for _ in range(2))
    x.requires_grad_()
    layers = {"torch.nn.LSTM": reference, "seqlib LSTM": ours, "attention, fast": attention,
              "attention, explicit": explicit}
    return {name: forward_backward(_output(layer.to(device)), [x, *layer.parameters()], grad, x)
            for name, layer in layers.items()}


def _output(layer: nn.Module):
    """x -> the layer's outputs (B, T, P): attention causal, as the LSTM reads the past."""
    if isinstance(layer, MultiHeadAttention):
        return lambda x: layer(x, causal=True)[0]
    return lambda x: layer(x)[0]


def slope(lengths, values) -> float:
    """The exponent a of the least-squares fit values ~ c T^a on log-log axes."""
    return float(np.polyfit(np.log(lengths), np.log(values), 1)[0])


def plot(rows: list, title: str, path: Path) -> None:
    """Time and peak memory against T, log-log, one line per layer."""
    lengths = [r["T"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for ax, unit, label in [(axes[0], "ms", "forward + backward time (ms)"),
                            (axes[1], "MiB", "peak memory (MiB)")]:
        for name in LAYERS:
            colour, marker, line = STYLE[name]
            ax.plot(lengths, [r[f"{name} {unit}"] for r in rows], color=colour,
                    marker=marker, linestyle=line, label=name)
        for power, anchor in [(1, "torch.nn.LSTM"), (2, "attention, explicit")]:
            end = rows[-1][f"{anchor} {unit}"]  # guide lines through the last point
            ax.plot(lengths, [end * (t / lengths[-1]) ** power for t in lengths],
                    color="grey", linestyle=":", linewidth=1)
            ax.annotate(f"$\\propto T^{power}$", (lengths[0], end * (lengths[0] /
                        lengths[-1]) ** power), color="grey", textcoords="offset points",
                        xytext=(0, 4))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(lengths, [str(t) for t in lengths])
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("sequence length T")
        ax.set_ylabel(label)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"figure written to {path}")


def main() -> None:
    parser = common_parser(__doc__, repeats=31, quick="T = 64, 128, 256, 3 runs",
                           figure="attention_scaling.png")
    args = parser.parse_args()
    if args.quick:
        args.lengths, args.repeats, args.max_wait = [64, 128, 256], 3, 0.0
    lengths = sorted(set(args.lengths))
    if len(lengths) < 2:
        raise ValueError(f"--lengths needs at least two lengths to fit a slope, got {lengths}")
    device = set_up(args.device)
    out = args.out if args.out is not None or args.quick else RESULTS
    figure = args.figure
    if figure is None and not args.quick:
        figure = FIGURES / ("attention_scaling.png" if device.type == "cpu"
                            else f"attention_scaling-{device.type}.png")
    meta, loads = machine(device), [wait_for_quiet(args.max_load, args.max_wait)]
    rows = []
    for T in lengths:
        cases = scaling_cases(T, device)
        medians, rounds, _ = median_times(cases, device, args.repeats, args.budget)
        row = {"T": T, "runs": rounds}
        row |= {f"{name} ms": 1e3 * medians[name] for name in LAYERS}
        row |= {f"{name} MiB": peak_memory_mib(cases[name], device) for name in LAYERS}
        rows.append(row)
        loads.append(os.getloadavg()[0])
        print(f"T={T:5d} " + "  ".join(f"{name} {row[f'{name} ms']:.1f} ms" for name in LAYERS),
              flush=True)
    meta["load (1 min)"] = {"at start": round(loads[0], 2), "max during": round(max(loads), 2)}
    meta["peak memory"] = ("largest growth of the bytes held in tensors, from "
                           + ("torch.profiler allocation events (CPU)" if device.type == "cpu"
                              else "torch.cuda.max_memory_allocated"))
    large = [t for t in lengths if t >= 512] if sum(t >= 512 for t in lengths) >= 2 else lengths
    slopes = [{"layer": name,
               "time, all T": slope(lengths, [r[f"{name} ms"] for r in rows]),
               f"time, T >= {large[0]}": slope(large, [r[f"{name} ms"] for r in rows
                                                       if r["T"] in large]),
               "memory, all T": slope(lengths, [r[f"{name} MiB"] for r in rows]),
               f"memory, T >= {large[0]}": slope(large, [r[f"{name} MiB"] for r in rows
                                                         if r["T"] in large])}
              for name in LAYERS]
    columns = {"T": ("T", "d"), "runs": ("runs", "d")}
    columns |= {f"{name} ms": (f"{name} ms", ".1f") for name in LAYERS}
    columns |= {f"{name} MiB": (f"{name} MiB", ".1f") for name in LAYERS}
    sizes = (f"batch {B}, LSTM input and hidden size {P}; causal self-attention p={P}, "
             f"{HEADS} heads of size {P // HEADS}; float32, forward + backward")
    sections = [("Time and peak memory against T", sizes + ", median ms.", rows, columns),
                ("Fitted log-log slopes", "The exponent a of time (or memory) ~ c T^a, a "
                 "least-squares line through the log-log points.", slopes,
                 {key: (key, "s" if key == "layer" else ".2f") for key in slopes[0]})]
    report("scaling", "Cost against sequence length: LSTM and self-attention", meta,
           sections, out)
    if figure is not None:
        where = "one CPU thread" if device.type == "cpu" else meta["device_name"]
        plot(rows, f"LSTM (hidden {P}) and causal self-attention (p={P}, {HEADS} heads), "
             f"batch {B}, forward + backward, {where}", figure)


if __name__ == "__main__":
    main()
