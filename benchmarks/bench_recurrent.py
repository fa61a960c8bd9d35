"""seqlib's recurrent units against torch.nn's: forward + backward time and peak memory.

Batch 64, 100 steps, input 64, hidden 256, float32 (the sizes of the book's issue for
Section 7.3). On the CPU the runs use one thread; the implementations are interleaved,
run by run, and the median of --repeats runs is kept. Peak memory is measured in a fresh
process per implementation: on the CPU, the growth of the peak resident set during one
forward + backward; on a GPU, torch.cuda.max_memory_allocated.

Writes benchmarks/results/recurrent-<device>.json and prints a table.
"""

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

import seqlib
from seqlib.gated import GRU, LSTM

B, T, P, M = 64, 100, 64, 256
UNITS = {"RNN": (nn.RNN, seqlib.RNN), "LSTM": (nn.LSTM, LSTM), "GRU": (nn.GRU, GRU)}
VARIANTS = ("torch.nn", "seqlib fast", "seqlib textbook")


def build(unit: str, variant: str, device: torch.device):
    """The module and input of one implementation, weights shared through from_torch."""
    torch.manual_seed(0)
    reference = UNITS[unit][0](P, M, batch_first=True).to(device)
    x = torch.randn(B, T, P, generator=torch.Generator().manual_seed(0)).to(device)
    if variant == "torch.nn":
        return reference, x
    model = UNITS[unit][1].from_torch(reference)
    model.fast = variant == "seqlib fast"
    return model, x


def run_once(model, x) -> None:
    output = model(x)[0]
    output.sum().backward()


def timed(model, x, device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    run_once(model, x)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def peak_memory_mib(unit: str, variant: str, device: torch.device) -> float:
    """Peak memory of one forward + backward, measured in this (fresh) process."""
    model, x = build(unit, variant, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        run_once(model, x)
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    with open("/proc/self/statm") as statm:  # resident pages now
        resident = int(statm.read().split()[1]) * resource.getpagesize() / 2**10
    run_once(model, x)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return max(peak - resident, 0.0) / 2**10


def measure_memory(unit: str, variant: str, device: torch.device) -> float:
    code = ("import benchmarks.bench_recurrent as b, torch; "
            f"print(b.peak_memory_mib({unit!r}, {variant!r}, torch.device({str(device)!r})))")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--units", nargs="+", default=list(UNITS), choices=list(UNITS))
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    rows = []
    for unit in args.units:
        models = {v: build(unit, v, device) for v in VARIANTS}
        times = {v: [] for v in VARIANTS}
        for model, x in models.values():  # warm-up
            run_once(model, x)
        for _ in range(args.repeats):
            for v, (model, x) in models.items():
                times[v].append(timed(model, x, device))
        base = statistics.median(times["torch.nn"])
        for v in VARIANTS:
            median = statistics.median(times[v])
            rows.append({"unit": unit, "implementation": v, "median_ms": 1e3 * median,
                         "ratio": median / base,
                         "peak_mib": measure_memory(unit, v, device)})
    meta = {"device": str(device), "torch": torch.__version__, "machine": platform.machine(),
            "threads": torch.get_num_threads(), "repeats": args.repeats,
            "sizes": {"batch": B, "steps": T, "input": P, "hidden": M}}
    print(f"forward+backward, batch {B}, {T} steps, input {P}, hidden {M}, float32, {device}, "
          f"{meta['threads']} thread(s), median of {args.repeats} interleaved runs")
    print(f"{'unit':<6}{'implementation':<18}{'median ms':>11}{'ratio':>8}{'peak MiB':>10}")
    for r in rows:
        print(f"{r['unit']:<6}{r['implementation']:<18}{r['median_ms']:>11.1f}"
              f"{r['ratio']:>8.2f}{r['peak_mib']:>10.1f}")
    out = Path(__file__).parent / "results" / f"recurrent-{device.type}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    print(f"written to {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")


if __name__ == "__main__":
    main()
