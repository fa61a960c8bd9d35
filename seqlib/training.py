"""The training of every model of the book: `train`, one short loop (no Trainer class, just a
function), with the learning-rate schedule of each step and hooks to resume from a
checkpoint; and `cached`, which saves what a training run produced so that an identical run
loads it. The function `train` is also `seqlib.train`."""

import contextlib
import hashlib
import multiprocessing
import os
import pathlib
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor

import torch
from filelock import FileLock
from torch import nn
from tqdm import tqdm


def train(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, object], torch.Tensor],
    batches: Iterable | Callable[[int], object],
    *,
    steps: int,
    optimizer: torch.optim.Optimizer,
    clip: float | None = None,
    schedule: Callable[[int], float] | None = None,
    start: int = 0,
    history: dict | None = None,
    on_step: Callable[[int, dict], bool | None] | None = None,
    progress: bool = True,
    desc: str = "train",
) -> dict[str, list[float]]:
    """Run optimisation steps start, ..., steps - 1 and return the history of losses.

    - `loss_fn(model, batch)` returns the scalar loss of one batch.
    - `batches` is an iterable of batches (one per step to run) or a function
      `step -> batch`.
    - `clip`, when given, rescales the gradient so its global 2-norm is at most `clip`
      (gradient clipping, the chapter's remedy for exploding gradients).
    - `schedule`, when given, is the learning rate of each step as a fraction of the
      optimizer's own rate: step s runs at schedule(s) times the rate each parameter group
      started with (kept in the group as "initial_lr", the key of torch's schedulers). It
      is the one learning-rate mechanism of the book: a function of the step alone, so a
      resumed run needs no scheduler state.
    - `start` and `history` resume a run: the first step to run and the history of the
      steps before it (both from a checkpoint, with the model's and optimizer's states).
    - `on_step(step, history)` is called after every step, for example to write a
      checkpoint; when it returns True, training stops after that step (a time limit).

    The history has one entry per step: "loss", "grad_norm" (before clipping) and
    "seconds" (wall time since the start of the run), so learning curves can be drawn
    against steps, tokens seen or time.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < steps:
        raise ValueError(f"start must be an int in [0, steps={steps}), got {start!r}")
    if clip is not None and not clip > 0:
        raise ValueError(f"clip must be positive or None, got {clip!r}")
    history = {"loss": [], "grad_norm": [], "seconds": []} if history is None else history
    if sorted(history) != ["grad_norm", "loss", "seconds"] \
            or any(len(v) != start for v in history.values()):
        raise ValueError(f"history must hold the lists loss, grad_norm and seconds of the "
                         f"{start} steps before start={start}")
    next_batch = batches if callable(batches) else iter(batches).__next__
    for group in optimizer.param_groups:
        group.setdefault("initial_lr", group["lr"])
    model.train()
    offset = history["seconds"][-1] if start else 0.0
    begin = time.perf_counter()
    bar = tqdm(range(start, steps), desc=desc, disable=not progress, mininterval=1.0,
               initial=start, total=steps)
    for step in bar:
        if schedule is not None:  # this step's rate
            for group in optimizer.param_groups:
                group["lr"] = group["initial_lr"] * schedule(step)
        try:
            batch = next_batch(step) if callable(batches) else next_batch()
        except StopIteration:
            raise ValueError(f"batches ran out after {step - start} of {steps - start} "
                             "steps") from None
        loss = loss_fn(model, batch)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss is {loss.item()} at step {step}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        # clip_grad_norm_ returns the norm before clipping; max_norm=inf only measures it.
        norm = nn.utils.clip_grad_norm_(model.parameters(), clip if clip else float("inf"))
        optimizer.step()
        history["loss"].append(loss.item())
        history["grad_norm"].append(norm.item())
        history["seconds"].append(offset + time.perf_counter() - begin)
        bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", refresh=False)
        if on_step is not None and on_step(step, history):
            break
    model.eval()
    return history


def cache_dir() -> pathlib.Path:
    """Where `cached` keeps weights: $SEQLIB_MODEL_CACHE, else ~/.cache/seqlib/models."""
    default = pathlib.Path.home() / ".cache" / "seqlib" / "models"
    return pathlib.Path(os.environ.get("SEQLIB_MODEL_CACHE") or default)


def _fingerprint(name: str, model: nn.Module, key: tuple) -> str:
    """Hash of everything trained weights depend on: the name, the caller's key (data,
    configuration), the model's class, repr and plain attributes, the torch version, the
    number of CPU threads (sums may round differently) and the source of every seqlib
    module."""
    package = pathlib.Path(__file__).parent
    config = {k: v for k, v in sorted(vars(model).items())  # e.g. reverse_source
              if isinstance(v, (bool, int, float, str)) and k != "training"}
    h = hashlib.sha256()
    for part in [name, type(model).__qualname__, repr(model), config, torch.__version__,
                 torch.get_num_threads(), *key,
                 *(path.read_bytes() for path in sorted(package.glob("*.py")))]:
        h.update((part if isinstance(part, bytes) else repr(part).encode()) + b"\0")
    return h.hexdigest()[:20]


def cache_path(name: str, model: nn.Module, *key) -> pathlib.Path:
    """The file in which `cached` keeps the run (name, model, key), trained or not yet."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return cache_dir() / f"{name}-{_fingerprint(name, model, key)}.pt"


def cached(name: str, model: nn.Module, fit: Callable[[], dict], *key) -> dict:
    """Run `fit()`, which trains `model` and returns its history, or, when an identical run
    saved its result, load the weights into `model` and return the saved history.

    Training is deterministic (seqlib.seed_everything), so a saved run is the run: chapters
    that need a model another chapter trained get it without training it again, in any
    order. `key` is everything else the result depends on (configuration, data); see
    `_fingerprint`. Processes that ask for the same run at once (chapters tested in
    parallel) take turns through a lock file: the first trains and saves, the others wait
    and load what it saved, so no run is trained twice.
    """
    path = cache_path(name, model, *key)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if path.exists():
            saved = torch.load(path, weights_only=True, map_location="cpu")
            model.load_state_dict(saved["state"])
            model.eval()
            return saved["history"]
        history = fit()
        save_atomic({"state": model.state_dict(), "history": history}, path)
    return history


def _call_in_worker(function: Callable, args: tuple, threads: int, deterministic: bool):
    torch.set_num_threads(threads)  # as in the parent process: the same sums, the same key
    torch.use_deterministic_algorithms(deterministic)
    function(*args)


def run_in_processes(calls: list, processes: int | None = None) -> None:
    """Run each call (function, args) at once in its own worker process, at most `processes`
    at a time (by default one per CPU core this process may use). Each worker is a fresh
    interpreter ("spawn": no threads inherited from this one) with this process's number
    of threads and determinism, so a training run there is the run it would be here.
    Returns when all have finished, raising what a worker raised. Fewer than two calls or
    one process: nothing runs, and the caller runs the calls itself (so do the callers
    below, which train what is still missing and then load everything from the cache).
    The functions must be importable module-level ones, and the arguments picklable."""
    if processes is None:
        processes = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else os.cpu_count() or 1
    if not isinstance(processes, int) or isinstance(processes, bool) or processes < 1:
        raise ValueError(f"processes must be a positive int, got {processes!r}")
    workers = min(len(calls), processes)
    if workers < 2:
        return
    spawn = multiprocessing.get_context("spawn")
    settings = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    with ProcessPoolExecutor(workers, mp_context=spawn) as pool:
        jobs = [pool.submit(_call_in_worker, function, args, *settings)
                for function, args in calls]
        for job in jobs:
            job.result()  # raises what a worker raised


@contextlib.contextmanager
def own_randomness(seed: int, device: torch.device):
    """Run a training run on random numbers of its own: inside, torch's generators (the
    CPU's, and `device`'s if it is a GPU) start from `seed`; after, they are as before. So
    dropout draws the same masks wherever the run trains (here, or in a worker process that
    trained another run first), and what the caller draws next does not depend on whether
    the run trained or came from the cache."""
    device = torch.device(device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        yield


def save_atomic(obj, path) -> None:
    """torch.save(obj, path) through a temporary file of the same folder, flushed to the disk
    and then renamed over `path` (atomic): whoever reads `path`, a chapter or a run resumed
    after a crash, finds the previous file or the new one, never half of one."""
    path = pathlib.Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
