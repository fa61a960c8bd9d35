"""seqlib.RNN against torch.nn.RNN (+ output Linear): forward + backward time.

Batch 64, 100 steps, input 64, hidden 256, output 64, float32. On the CPU with one
thread; the runs of the two models are interleaved and the median of --repeats is kept.
Results go to benchmarks/results/rnn-<device>.json and are printed as a table.
"""

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
from torch import nn

import seqlib

B, T, P, M, Q = 64, 100, 64, 256, 64


def step_time(fn, device) -> float:
    """Wall time of one forward + backward call, synchronised on a GPU."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    gen = seqlib.seed_everything(0)
    torch.use_deterministic_algorithms(False)  # timing only; cuDNN's fast kernels allowed
    reference = nn.RNN(P, M, batch_first=True).to(device)
    linear = nn.Linear(M, Q).to(device)
    ours = seqlib.RNN.from_torch(reference, linear)
    x = torch.randn(B, T, P, generator=gen).to(device)

    models = {
        "torch.nn.RNN + Linear": lambda: linear(reference(x)[0]).sum().backward(),
        "seqlib.RNN": lambda: ours(x)[0].sum().backward(),
    }
    times = {name: [] for name in models}
    for fn in models.values():  # warm-up
        fn()
    for _ in range(args.repeats):
        for name, fn in models.items():
            times[name].append(step_time(fn, device))
    medians = {name: statistics.median(t) for name, t in times.items()}
    base = medians["torch.nn.RNN + Linear"]
    rows = [{"model": n, "median_ms": 1e3 * t, "ratio": t / base} for n, t in medians.items()]

    print(f"forward+backward, B={B} T={T} p={P} m={M} q={Q}, float32, {device}, "
          f"threads={torch.get_num_threads()}, median of {args.repeats}")
    print(f"{'model':<24}{'median ms':>12}{'ratio':>8}")
    for row in rows:
        print(f"{row['model']:<24}{row['median_ms']:>12.2f}{row['ratio']:>8.2f}")
    out = Path(__file__).parent / "results" / f"rnn-{device.type}.json"
    out.parent.mkdir(exist_ok=True)
    meta = {"device": str(device), "torch": torch.__version__, "machine": platform.machine(),
            "threads": torch.get_num_threads(), "repeats": args.repeats}
    out.write_text(json.dumps({"meta": meta, "results": rows}, indent=2))


if __name__ == "__main__":
    main()
