"""The book's checks on a GPU, in one command sized to a short lease of one.

    python -m benchmarks.gpu_check --out gpu-check            # on a GPU, ~9 minutes
    python -m benchmarks.gpu_check --tiny --out /tmp/check    # the rehearsal on the CPU

Within --budget seconds of wall time it runs, on SEQLIB_DEVICE (cuda by default):

1. the benchmarks (bench_recurrent, bench_attention, bench_scaling) on the idle device, each
   with a short time budget;
2. then, at the same time on the one device:
   - `make test-gpu`'s check: the chapters under nbval in its lax mode (every cell runs,
     and the device-independent cells, tagged nbval-check-output, are compared with the
     stored outputs), the chapters that train on the device first (`DEVICE_CHAPTERS`),
     then the others while time is left;
   - the full profile's three headline runs through seqlib.experiments.distributed
     (`HEADLINES`), in TF32. Each is first probed: a few steps, beside the others,
     measure its pace. It then trains for its profile's steps or, where they do not fit
     in the time left, for as many as do (the learning-rate schedule is then that of the
     shorter run, and the results say so), and is evaluated;
3. writes OUT/gpu-check.json (all it measured) and OUT/gpu-check.md (the record on the
   measurements page, book/gpu-check.md), with the logs and the benchmarks' tables beside
   them.

`--tiny` runs the same steps on the CPU in about a minute, with tiny configurations, one
chapter and the benchmarks' smoke runs, so that the real run cannot fail on a slip.
"""

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
# The chapters that put models on the device (seqlib.default_device()), in order of cost.
DEVICE_CHAPTERS = ("12_transformer_language_model", "11_transformer_translation",
                   "07_encoder_decoder_translation", "08_attention",
                   "06_character_level_shakespeare", "15_image_captioning",
                   "21_training_deep_transformers", "03_backpropagation_through_time")
TINY_CHAPTERS = ("10_transformer_blocks_and_parameter_counts",)
# Experiment of seqlib.experiments.distributed -> its published anchor, the target, and
# seconds kept for the evaluation after training.
HEADLINES = {
    "translation-de-en": dict(
        metric="bleu_greedy", goal=">=", value=37.0, reserve=60,
        anchor="36.52 BLEU, the 9.0M-parameter transformer of the pytorch-seq2seq "
               "tutorials (greedy decoding)"),
    "char-lm": dict(
        metric="val_loss_best", goal="<=", value=1.47, reserve=25,
        options=["--eval-every", "250"], tiny_options=["--eval-every", "5"],
        anchor="1.4697 nats per character, nanoGPT's shakespeare_char: the best of its "
               "validation losses measured every 250 steps, as ours"),
    "attention-de-en": dict(
        metric="bleu_greedy", goal="near", value=28.3, reserve=60,
        anchor="28.3 BLEU, the Bahdanau model of about 20M parameters of the "
               "pytorch-seq2seq tutorials"),
}
NEAR = 2.0  # BLEU points: "near" the anchor
TINY_RUNS = {  # a few seconds each on a CPU
    "char-lm": ["p=16", "heads=2", "n1=32", "num_layers=1", "max_len=16", "context=16",
                "batch_size=6", "steps=20", "warmup=3", "dropout=0.0"],
    "translation-de-en": ["p=16", "heads=2", "n1=32", "num_layers=1", "limit=500",
                          "eval_limit=20", "batch_size=10", "steps=20", "warmup=3",
                          "dropout=0.0"],
    "attention-de-en": ["embed_size=16", "hidden_size=16", "encoder_size=16", "attention_size=16",
                        "limit=500", "eval_limit=20", "batch_size=10", "steps=20"],
}
# The share of the time left that a run is sized to: on the first check on a GPU, steps
# took up to 1.5 times the pace of their probe once the chapters trained beside them.
SAFETY = 0.65
# Steps of a probe, and how many of its first steps are not timed (warm-up).
PROBE, PROBE_TINY = (30, 5), (8, 2)
# The benchmarks' options: short time budgets on the device; smoke runs of one size in --tiny.
BENCH = {"bench_recurrent": ["--units", "LSTM", "GRU"], "bench_attention": [],
         "bench_scaling": []}
BENCH_TINY = {"bench_recurrent": ["--units", "LSTM", "--batches", "2"],
              "bench_attention": ["--lengths", "64"], "bench_scaling": ["--lengths", "64", "128"]}
# A line of nbval's verbose log: "notebooks/NAME::ipynb::Cell N PASSED" (with xdist, the
# outcome comes first).
CELL = re.compile(r"notebooks/(\w+)(?:\.ipynb|::ipynb)::Cell \d+")
OUTCOME = re.compile(r"\b(PASSED|FAILED|ERROR|SKIPPED)\b")


class Clock:
    """Seconds since the start, and what is left of the budget."""

    def __init__(self, budget: float):
        self.start, self.budget = time.monotonic(), budget

    def now(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.budget - self.now()


def log(clock: Clock, message: str) -> None:
    print(f"[{clock.now():6.1f} s] {message}", flush=True)


def start(command: list, log_file: Path, env: dict) -> subprocess.Popen:
    """A child process in its own process group (so that it can be stopped whole), its
    output to `log_file`."""
    with open(log_file, "w") as out:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def finish(process: subprocess.Popen, deadline: float, clock: Clock) -> int | None:
    """The exit status of `process`, waited for until `deadline` (seconds since the
    start); None if it had to be stopped there."""
    try:
        return process.wait(timeout=max(deadline - clock.now(), 0.1))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        return None


def benchmarks(out: Path, device: str, tiny: bool, env: dict, clock: Clock) -> dict:
    """Each benchmark on the idle device, with a short time budget: {name: status}."""
    status = {}
    for name, more in (BENCH_TINY if tiny else BENCH).items():
        options = (["--quick"] if tiny else
                   ["--budget", "0.5", "--repeats", "11", "--max-wait", "0", "--max-load", "99"])
        if name != "bench_attention" and not tiny:
            options += ["--figure", str(out / f"{name}.png")]
        command = [sys.executable, "-m", f"benchmarks.{name}", "--device", device,
                   "--out", str(out), *options, *more]
        process = start(command, out / f"{name}.log", env)
        code = finish(process, clock.now() + (60 if tiny else 45), clock)
        status[name] = "done" if code == 0 else ("stopped" if code is None else f"exit {code}")
        log(clock, f"{name}: {status[name]}")
    return status


def chosen_chapters(numbers: list | None, tiny: bool) -> list:
    """The chapters to check: those of `numbers` (e.g. ["03", "12"]), else all, the
    chapters that train on the device first (or TINY_CHAPTERS for the rehearsal)."""
    every = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
    if numbers is not None:
        unknown = set(numbers) - {name[:2] for name in every}
        if unknown:
            raise SystemExit(f"--chapters: no chapter numbered {sorted(unknown)}")
        return [name for name in every if name[:2] in numbers]
    if tiny:
        return list(TINY_CHAPTERS)
    return list(DEVICE_CHAPTERS) + [name for name in every if name not in DEVICE_CHAPTERS]


def nbval(chapters: list, out: Path, device: str, jobs: int, env: dict) -> subprocess.Popen:
    """nbval in its lax mode over the chapters, `jobs` at a time, on `device`."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-rfE",
               "-p", "benchmarks.pytest_failures", "--nbval-lax", "--nbval-current-env",
               "--nbval-sanitize-with", "tests/sanitize.cfg",
               *(["-n", str(jobs), "--dist", "loadfile"] if jobs > 1 else []),
               *(f"notebooks/{name}.ipynb" for name in chapters)]
    env = env | {"SEQLIB_DEVICE": device, "SEQLIB_MODEL_CACHE": tempfile.mkdtemp(),
                 "OMP_NUM_THREADS": "2", "PYTEST_FAILURES_FILE": str(out / "failures.log")}
    return start(command, out / "nbval.log", env)


def chapters_report(chapters: list, log_text: str) -> dict:
    """{chapter: cells passed, failed, skipped, and its status} from nbval's verbose log
    (one test a code cell)."""
    cells = {name: {"passed": 0, "failed": 0, "skipped": 0} for name in chapters}
    for line in log_text.splitlines():
        cell, outcome = CELL.search(line), OUTCOME.search(line)
        if cell and outcome and cell.group(1) in cells:
            key = {"PASSED": "passed", "SKIPPED": "skipped"}.get(outcome.group(1), "failed")
            cells[cell.group(1)][key] += 1
    for name, counts in cells.items():
        notebook = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
        code = sum(cell["cell_type"] == "code" for cell in notebook["cells"])
        ran = counts["passed"] + counts["failed"] + counts["skipped"]
        counts["status"] = ("failed" if counts["failed"] else "not reached" if ran == 0
                            else "passed" if ran == code else f"stopped after {ran} of {code}")
    return cells


def run_command(experiment: str, sets: list, folder: Path, tf32: bool, *more) -> list:
    return [sys.executable, "-m", "seqlib.experiments.distributed", experiment,
            *(arg for item in sets for arg in ("--set", item)), "--out", str(folder),
            "--no-progress", "--checkpoint-every", "1000", *(["--tf32"] if tf32 else []),
            *more]


def pace(folder: Path, skipped: int) -> float:
    """Seconds a step of the probe in `folder`, its first `skipped` steps left out."""
    seconds = torch.load(folder / "checkpoint.pt", weights_only=True)["history"]["seconds"]
    timed = seconds[skipped:]
    return statistics.median(b - a for a, b in zip(timed, timed[1:], strict=False))


def sized(steps: int, warmup: int, seconds_per_step: float, seconds: float) -> tuple:
    """(steps, warmup) that fit in `seconds`: the profile's, or fewer steps (with at most
    a tenth of them as warm-up)."""
    fit = max(int(SAFETY * seconds / seconds_per_step), 1)
    if fit >= steps:
        return steps, warmup
    return fit, min(warmup, fit // 10)


def headline_runs(names: list, base: dict, out: Path, device: str, tiny: bool, env: dict,
                  clock: Clock, end: float) -> dict:
    """Probe every run, then train and evaluate each in the time left (see the module's
    docstring): {experiment: record}."""
    from seqlib.experiments.distributed import configure  # the configuration a run starts from

    env = env | {"SEQLIB_DEVICE": device, "OMP_NUM_THREADS": "2"}
    probe_steps, skipped = PROBE_TINY if tiny else PROBE
    records, probes = {}, {}
    for name in names:
        config = configure(name, base[name])
        records[name] = {"profile_steps": config["fit"]["steps"],
                         "warmup": config["fit"]["warmup"],
                         **HEADLINES[name]}
        sets = base[name] + [f"steps={probe_steps}", f"warmup={min(config['fit']['warmup'], 1)}"]
        probes[name] = (start(run_command(name, sets, out / "probe" / name, not tiny,
                                          "--no-evaluate"), out / f"probe-{name}.log", env),
                        time.time())
    runs = {}
    for name, (process, began) in probes.items():
        code = finish(process, end, clock)
        record = records[name]
        if code != 0:
            record["status"] = f"probe failed ({'stopped' if code is None else code})"
            continue
        checkpoint = out / "probe" / name / "checkpoint.pt"  # written after the last step
        trained = torch.load(checkpoint, weights_only=True)["history"]["seconds"][-1]
        record["probe_seconds_per_step"] = pace(out / "probe" / name, skipped)
        record["startup_seconds"] = checkpoint.stat().st_mtime - began - trained
        train_end = end - record["reserve"] * (0.2 if tiny else 1)
        seconds = train_end - clock.now() - record["startup_seconds"]
        steps, warmup = sized(record["profile_steps"], record["warmup"],
                              record["probe_seconds_per_step"], seconds)
        record |= {"steps": steps, "warmup_run": warmup}
        sets = base[name] + [f"steps={steps}", f"warmup={warmup}"]
        command = run_command(name, sets, out / "runs" / name, not tiny,
                              *record.get("tiny_options" if tiny else "options", []),
                              "--max-seconds", f"{seconds:.0f}")  # if the pace falls
        record["command"] = " ".join(["python", *command[1:]])
        runs[name] = start(command, out / f"run-{name}.log", env)
        log(clock, f"{name}: {record['probe_seconds_per_step'] * 1000:.1f} ms a step, "
                   f"{steps:,} of {record['profile_steps']:,} steps")
    for name, process in runs.items():
        code, record = finish(process, end, clock), records[name]
        results = out / "runs" / name / "results.json"
        if code == 0 and results.exists():
            record |= json.loads(results.read_text())
            record["status"] = "done"
        else:
            record["status"] = "stopped at the deadline" if code is None else f"exit {code}"
        log(clock, f"{name}: {record['status']}")
    return records


def verdict(record: dict) -> str:
    """Whether a finished run met its target."""
    if record.get("status") != "done":
        return "no result"
    value, target = record[record["metric"]], record["value"]
    met = {">=": value >= target, "<=": value <= target,
           "near": abs(value - target) <= NEAR}[record["goal"]]
    return "met" if met else "not met"


def machine_report(device: str) -> dict:
    """Date, versions and the device of the check."""
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "python": platform.python_version(), "torch": torch.__version__,
              "cuda": torch.version.cuda, "cores": os.cpu_count(), "device": device}
    if device.startswith("cuda"):
        report["gpu"] = torch.cuda.get_device_name(0)
        report["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory
                                         / 2**30, 1)
        try:
            report["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            report["driver"] = "unknown"
    return report


def result(run: dict) -> str:
    """A finished run's figures, as the measurements page shows them."""
    if "bleu_greedy" in run:
        return f"BLEU {run['bleu_greedy']:.1f} greedy, {run['bleu_beam4']:.1f} beam 4"
    best = (f"best {run['val_loss_best']:.3f} (step {run['val_loss_best_step']:,}), "
            if "val_loss_best" in run else "")
    return f"val loss {best}last {run['val_loss']:.3f}"


def markdown(report: dict) -> str:
    """The record on the measurements page: the device, the chapters, the headline runs."""
    m = report["machine"]
    where = (f"{m['gpu']} ({m['gpu_memory_gib']} GiB, driver {m['driver']}) and "
             f"{m['cores']} CPU cores" if "gpu" in m else f"the CPU ({m['cores']} cores)")
    lines = [f"Run on {m['date']} on {where}; Python {m['python']}, PyTorch {m['torch']}"
             + (f" (CUDA {m['cuda']})" if m.get("cuda") else "")
             + f"; `{report['command']}`, {report['seconds']:.0f} s in all."]
    if report["chapters"]:
        lines += ["", "| chapter | cells passed | cells failed | status |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| {name} | {c['passed']} | {c['failed']} | {c['status']} |"
                  for name, c in report["chapters"].items()]
    if report["runs"]:
        lines += ["", "| run | parameters | steps | a step | training | result | target | |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in report["runs"].items():
        done = r.get("status") == "done"
        steps = r.get("steps_done", r.get("steps"))
        cells = [f"{r['parameters']:,}" if "parameters" in r else "-",
                 f"{steps:,} of {r['profile_steps']:,}" if steps else "-",
                 f"{r['probe_seconds_per_step'] * 1000:.1f} ms"
                 if "probe_seconds_per_step" in r else "-",
                 f"{r['train_seconds']:.0f} s" if "train_seconds" in r else "-",
                 result(r) if done else "-",
                 {">=": "≥ {}", "<=": "≤ {}", "near": f"{{}} ± {NEAR}"}[r["goal"]].format(
                     r["value"]),
                 verdict(r) if done else r.get("status", "-")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if report["runs"]:
        lines += ["", "The targets' anchors: " + "; ".join(
            f"{name}, {r['anchor']}" for name, r in report["runs"].items()) + "."]
    if report["benchmarks"]:
        lines += ["", "Benchmarks: " + ", ".join(
            f"{k} {v}" for k, v in report["benchmarks"].items()) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder of the results")
    parser.add_argument("--budget", type=float, default=520.0,
                        help="seconds of wall time for everything (default 520)")
    parser.add_argument("--jobs", type=int, default=6, help="chapters run at a time")
    parser.add_argument("--tiny", action="store_true",
                        help="the rehearsal: on the CPU, tiny runs, one chapter")
    parser.add_argument("--chapters", nargs="*", metavar="NN", help="only these chapters "
                        "(their numbers, e.g. 03 12; none for no chapter): to run again what "
                        "failed")
    parser.add_argument("--runs", nargs="*", choices=list(HEADLINES), metavar="RUN",
                        help=f"only these headline runs, among {', '.join(HEADLINES)}")
    parser.add_argument("--no-benchmarks", action="store_true", help="skip the benchmarks")
    args = parser.parse_args(argv)
    clock = Clock(args.budget)
    device = "cpu" if args.tiny else os.environ.get("SEQLIB_DEVICE", "cuda")
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        CUBLAS_WORKSPACE_CONFIG=":4096:8", PYTHONUNBUFFERED="1")
    shown = list(argv or sys.argv[1:])
    if "--out" in shown:  # the folder is this machine's
        del shown[shown.index("--out"):shown.index("--out") + 2]
    report = {"command": " ".join(["python -m benchmarks.gpu_check", *shown]),
              "machine": machine_report(device)}
    log(clock, json.dumps(report["machine"]))
    report["benchmarks"] = ({} if args.no_benchmarks else
                            benchmarks(args.out, device, args.tiny, env, clock))
    chapters = chosen_chapters(args.chapters, args.tiny)
    end = args.budget - 15  # every child stopped by then; the rest writes the results
    checks = nbval(chapters, args.out, device, 1 if args.tiny else args.jobs, env) \
        if chapters else None
    runs = list(HEADLINES) if args.runs is None else args.runs
    base = {name: (TINY_RUNS[name] if args.tiny else []) for name in runs}
    report["runs"] = headline_runs(runs, base, args.out, device, args.tiny, env, clock, end)
    report["nbval_exit"] = finish(checks, end, clock) if chapters else None
    report["chapters"] = chapters_report(chapters, (args.out / "nbval.log").read_text()
                                         if chapters else "")
    report["seconds"] = clock.now()
    (args.out / "gpu-check.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (args.out / "gpu-check.md").write_text(markdown(report))
    log(clock, "wrote gpu-check.json and gpu-check.md")
    return report


if __name__ == "__main__":
    main()
