"""What every experiment shares: one record of a training run, its training, the model
cache, and several runs trained at once.

- A run is one record, `Run`: its model, its loss, its batches (`batches(generator)`, the
  batches of a CPU generator seeded with the run's seed), its optimizer and learning-rate
  schedule (seqlib.training's `adam` or `adamw`, `warmup_linear` or `warmup_cosine`), its
  settings `fit` (steps, warm-up, clipping, seed and the rest, as the experiment checked
  them), what it trains on (`data`) and the experiment's module. Making the record checks
  the steps and the warm-up and derives its key in the model cache, `run.key`, here and
  nowhere else: the run's name, the model (class, repr, plain attributes, the weights it
  starts from and which of them train), the settings, a digest of the data, the seed
  (offset by SEQLIB_SEED), the device, dtype, CPU threads and kernel settings (sums round
  differently with each), torch's version, and the source of the modules of seqlib that
  the run uses (`_sources`: those of its model's classes, loss, data and schedule, of the
  training loop and of the experiment's module, followed through the names their code
  uses), so that editing a module retrains the runs that use it and no other.
- An experiment's run is made by its module's `run(name, model, data, fit)`, from the
  "fit" of one of the module's PROFILES (seqlib.pages.config): `built(model, seed)` is
  the model it trains, `model` itself or what a function builds after
  seed_everything(seed).
- `fit(run)` trains it with seqlib.train, on random numbers of its own
  (`own_randomness`): dropout draws what the run's seed gives, whatever was drawn before.
  `trained(run)` does so once and keeps the result in the model cache: an identical run,
  on this page or another, loads it instead.
- `trained_together(runs)` trains the runs the cache lacks at the same time, one worker
  process each.
- The switch between the book profile and the full one (`SEQLIB_FULL=1`, for a GPU) is
  seqlib.pages.config.profile.
"""

import contextlib
import copy
import hashlib
import multiprocessing
import os
import pathlib
import pickle
import sys
import time
import types
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial

import torch
from filelock import FileLock
from torch import nn
from tqdm import tqdm

from seqlib.checks import check_warmup, positive_int
from seqlib.pages import kernels
from seqlib.pages.seeds import book_seed, generator, seed_everything
from seqlib.training import train

LIBRARY = pathlib.Path(__file__).resolve().parents[1]  # the package: seqlib/
PROGRESS_VARIABLE = "SEQLIB_PROGRESS"  # "0": no progress bars while runs train


# ---- a run --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """One training run, never changed once made (its key would no longer be its own).
    `batches` is called with the run's generator, `torch.Generator().manual_seed(seed)`,
    and returns the batches: an iterable, or a function step -> batch. `loss(model, batch)`
    is a scalar; `optimizer(model)` is as seqlib.train takes it; `fit`, the run's settings
    as its experiment checked them: "steps", and where they apply "warmup" (steps of
    warm-up, 0 without), "clip" (the bound of the gradient's norm, none without) and
    "seed" (0 without), then the others (rate, batch size, ...); `schedule(step, steps,
    warmup)`, the fraction of the optimizer's rate at a step (None: a constant rate).
    `data`, what it trains on (tensors, lists, strings: digested), and `fit` go into the
    key; `module`, the experiment's module (its __name__), whose code shapes the run.
    `on_step(step, history)` runs after every step and may return True to stop;
    `finish(history)` after the last one returns the history to keep (for example after
    restoring the best weights)."""

    name: str
    model: nn.Module
    loss: Callable
    batches: Callable[[torch.Generator], Iterable | Callable]
    optimizer: Callable[[nn.Module], torch.optim.Optimizer]
    fit: dict
    schedule: Callable[..., float] | None = None
    data: tuple = ()
    module: str | None = None
    on_step: Callable | None = None
    finish: Callable[[dict], dict] | None = None
    key: str = field(init=False)  # the hash of everything the trained weights depend on

    def __post_init__(self):
        if not isinstance(self.model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(self.model).__name__}")
        if not isinstance(self.fit, dict) or not isinstance(self.data, tuple):
            raise TypeError(f"fit must be a dict and data a tuple, got "
                            f"{type(self.fit).__name__} and {type(self.data).__name__}")
        if "steps" not in self.fit:
            raise ValueError(f"fit must hold the steps, got {self.fit!r}")
        check_warmup(self.warmup, positive_int("steps", self.steps))
        if self.warmup and self.schedule is None:
            raise ValueError(f"warmup={self.warmup} needs a schedule (warmup_linear or "
                             "warmup_cosine), got schedule=None")
        object.__setattr__(self, "key", _key(self))

    @property
    def steps(self) -> int:
        return self.fit["steps"]

    @property
    def warmup(self) -> int:
        return self.fit.get("warmup", 0)

    @property
    def clip(self) -> float | None:
        return self.fit.get("clip")

    @property
    def seed(self) -> int:
        return self.fit.get("seed", 0)

    def rate(self, step: int) -> float:
        """The fraction of the optimizer's rate at `step`: schedule(step, steps, warmup)."""
        return self.schedule(step, steps=self.steps, warmup=self.warmup)


def built(model, seed: int) -> nn.Module:
    """The model of a run: `model` itself, or what the function `model` builds after
    seed_everything(seed), the one seeding rule of the book."""
    if isinstance(model, nn.Module):
        return model
    if not callable(model):
        raise TypeError(f"model must be a torch.nn.Module or a function that builds one, "
                        f"got {type(model).__name__}")
    seed_everything(seed)
    return model()


def fit(run: Run, progress: bool = False, report: pathlib.Path | None = None) -> dict:
    """Train run.model with seqlib.train as the record says, on random numbers of its own
    (`own_randomness`: dropout's masks come from the run's seed); returns the history. With
    `progress`, a progress bar that is gone when training ends; with `report`, a file in
    which the number of steps done is kept (for `trained_together`'s bar)."""
    batches = run.batches(generator(run.seed))
    device = next(run.model.parameters()).device
    on_step = run.on_step if report is None else _reporting(report, run.on_step)
    with own_randomness(run.seed, device):
        history = train(run.model, run.loss, batches, steps=run.steps,
                        optimizer=run.optimizer(run.model), clip=run.clip,
                        schedule=None if run.schedule is None else run.rate,
                        on_step=on_step, progress=progress, desc=run.name, leave=False)
    return history if run.finish is None else run.finish(history)


def _reporting(path: pathlib.Path, on_step: Callable | None) -> Callable:
    """An on_step that writes the steps done to `path` (at most twice a second), then calls
    the run's own `on_step`, if any, and returns what it returns."""
    last = [0.0]

    def report(step: int, history: dict):
        if time.monotonic() - last[0] >= 0.5:
            path.write_text(str(step + 1))
            last[0] = time.monotonic()
        return None if on_step is None else on_step(step, history)

    return report


def show_progress() -> bool:
    """Whether `trained` and `trained_together` show the progress of the runs they train (a
    bar that is gone when training ends): yes, unless SEQLIB_PROGRESS=0, as `make execute`,
    `make nbval` and `make claims` set, so that a page's outputs are the same whether its
    models were trained or loaded from the cache."""
    return os.environ.get(PROGRESS_VARIABLE, "").strip() != "0"


def trained(run: Run) -> tuple[nn.Module, dict]:
    """`fit(run)` once: the first time trains and saves the weights and history; an
    identical run later loads them into run.model instead. Returns (run.model, history).
    While it trains, a progress bar (`show_progress`) that is gone when training ends, and
    a file beside the cache's (NAME.progress) holding the steps done. Runs that ask at once
    (chapters tested in parallel) take turns through a lock file: the first trains and
    saves, the others load what it saved. A file that cannot be read (cut short,
    overwritten) is set aside as NAME.damaged, said so, and retrained."""
    path = cache_path(run)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if path.exists():
            history = _load(path, run.model)
            if history is not None:
                run.model.eval()
                return run.model, history
        report = _progress_path(path)
        try:
            history = fit(run, progress=show_progress(), report=report)
        finally:
            report.unlink(missing_ok=True)
        save_atomic({"state": run.model.state_dict(), "history": history}, path)
    return run.model, history


def _load(path: pathlib.Path, model: nn.Module) -> dict | None:
    """The history of the run saved at `path`, its weights loaded into `model`; None, with
    the file set aside and the model as it was, if the file cannot be read."""
    start = copy.deepcopy(model.state_dict())
    try:
        saved = torch.load(path, weights_only=True, map_location="cpu")
        model.load_state_dict(saved["state"])
        return saved["history"]
    except (RuntimeError, EOFError, OSError, KeyError, TypeError, ValueError,
            pickle.UnpicklingError) as err:
        model.load_state_dict(start)
        aside = path.with_name(path.name + ".damaged")
        os.replace(path, aside)
        why = type(err).__name__ + (f": {str(err).splitlines()[0][:100]}" if str(err) else "")
        print(f"model cache: {path.name} could not be read ({why}); set aside as "
              f"{aside.name}, training the run again")
        return None


def trained_together(runs: list, processes: int | None = None) -> list:
    """`trained(run)` for every run of `runs`: on the CPU, the runs the cache lacks train
    at the same time in worker processes (`run_in_processes`: at most `processes`, by
    default one per core), each exactly as it would train here; then every run is loaded
    from the cache. On a GPU they train here, one after the other. Returns the (model,
    history) of each run."""
    if all(next(run.model.parameters()).device.type == "cpu" for run in runs):
        missing = [run for run in runs if not cache_path(run).exists()]
        bar = _Progress(missing) if show_progress() else None
        try:
            run_in_processes([(trained, (run,)) for run in missing], processes,
                             None if bar is None else bar.update)
        finally:
            if bar is not None:
                bar.close()
    return [trained(run) for run in runs]


def _progress_path(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(path.name + ".progress")


class _Progress:
    """One progress bar in this process for runs that train in worker processes: the sum of
    their steps done, read from the files their `trained` keeps; gone when they end."""

    def __init__(self, runs: list):
        self.files = [_progress_path(cache_path(run)) for run in runs]
        self.bar = tqdm(total=sum(run.steps for run in runs), leave=False, mininterval=1.0,
                        desc=f"training {len(runs)} runs at once")

    def update(self) -> None:
        done = 0
        for file in self.files:
            with contextlib.suppress(OSError, ValueError):
                done += int(file.read_text() or 0)
        self.bar.update(max(0, done - self.bar.n))

    def close(self) -> None:
        self.bar.close()


# ---- the cache ------------------------------------------------------------------------------

def cache_dir() -> pathlib.Path:
    """Where `trained` keeps runs: $SEQLIB_MODEL_CACHE, else ~/.cache/seqlib/models."""
    default = pathlib.Path.home() / ".cache" / "seqlib" / "models"
    return pathlib.Path(os.environ.get("SEQLIB_MODEL_CACHE") or default)


def _sources(run: Run) -> list[bytes]:
    """The source the run uses: every module of seqlib that holds code the run reaches, from
    the classes of the model's modules, its loss, batches, optimizer, schedule, on_step and
    finish, the training loop (seqlib.training.train and `fit`) and the run's own module,
    followed through the names that code uses (`_reached`); the tooling of the book's pages
    (seqlib.pages) is not the run's. A module's whole source counts: editing any line of it
    retrains the runs that use it, and no other run."""
    model_classes = [type(module) for module in run.model.modules()]
    model_callables = [value for module in run.model.modules() for value in vars(module).values()
                       if callable(value) and not isinstance(value, nn.Module)]
    roots = [*model_classes, *model_callables, run.loss, run.batches, run.optimizer,
             run.schedule, run.on_step, run.finish, train, fit, own_randomness]
    names = _reached(roots)
    if run.module is not None:
        if run.module not in sys.modules or not getattr(sys.modules[run.module], "__file__",
                                                         None):
            raise ValueError(f"a run's module must be an imported module, got {run.module!r}")
        names.add(run.module)
    files = sorted({pathlib.Path(sys.modules[name].__file__).resolve() for name in names})
    return [_source(path) for path in files]


def _source(path: pathlib.Path) -> bytes:
    return path.read_bytes()


def _reached(roots: list) -> set[str]:
    """The modules of seqlib (not seqlib.pages) whose functions and classes the objects
    `roots` use: a function's global names (and the attributes it reads of a module it
    names), its defaults and closure; a class's bases and methods; a partial's function and
    arguments; an object's class; a dict's, list's or tuple's items."""
    package = __name__.split(".")[0] + "."
    modules, seen, todo = set(), set(), list(roots)
    while todo:
        value = todo.pop()
        if id(value) in seen or value is None or isinstance(value, (str, bytes, int, float)):
            continue
        seen.add(id(value))
        if isinstance(value, partial):
            todo += [value.func, *value.args, *value.keywords.values()]
        elif isinstance(value, (staticmethod, classmethod)):
            todo.append(value.__func__)
        elif isinstance(value, property):
            todo += [value.fget, value.fset]
        elif isinstance(value, types.MethodType):
            todo += [value.__func__, value.__self__]
        elif isinstance(value, (dict, list, tuple, set)):
            todo += list(value.values() if isinstance(value, dict) else value)
        elif isinstance(value, types.ModuleType):
            if value.__name__.startswith(package):
                modules.add(value.__name__)
        elif isinstance(value, (types.FunctionType, type)):
            module = getattr(value, "__module__", "") or ""
            if not module.startswith(package) or module.startswith(package + "pages"):
                continue
            modules.add(module)
            if isinstance(value, type):
                todo += [*value.__mro__[1:], *vars(value).values()]
            else:
                todo += [*_used_globals(value), *(value.__defaults__ or ()),
                         *(value.__kwdefaults__ or {}).values(),
                         *(cell.cell_contents for cell in value.__closure__ or ())]
        elif not isinstance(value, (torch.Tensor, nn.Module)) and callable(value):
            todo.append(type(value))  # an object called as a function: its class's code
    return {name for name in modules if not name.startswith(package + "pages")}


def _used_globals(function: types.FunctionType) -> list:
    """The global values a function's code names, and the attributes it names of those that
    are modules (`fastpath.RNNScan` gives the class)."""
    names, codes = set(), [function.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    found = []
    for name in names:
        value = function.__globals__.get(name)
        found.append(value)
        if isinstance(value, types.ModuleType) and value.__name__.startswith("seqlib."):
            found += [getattr(value, attribute) for attribute in names
                      if hasattr(value, attribute)]
    return found


def _key(run: Run) -> str:
    """The hash of everything the trained weights of `run` depend on (the module's
    docstring lists them)."""
    model = run.model
    parameter = next(model.parameters())
    attributes = {k: v for k, v in sorted(vars(model).items())  # e.g. reverse_source
                  if isinstance(v, (bool, int, float, str)) and k != "training"}
    settings = [book_seed(run.seed), parameter.device.type, parameter.dtype,
                torch.get_num_threads(), torch.__version__, kernels.settings(),
                torch.backends.cpu.get_cpu_capability()]
    frozen = [name for name, p in model.named_parameters() if not p.requires_grad]
    start = digest(*model.state_dict().values())  # the weights it starts from
    h = hashlib.sha256()
    for part in [run.name, type(model).__qualname__, repr(model), attributes, frozen,
                 *settings, sorted(run.fit.items()), digest(*run.data), start,
                 *_sources(run)]:
        h.update((part if isinstance(part, bytes) else repr(part).encode()) + b"\0")
    return h.hexdigest()


def cache_path(run: Run) -> pathlib.Path:
    """The file in which `trained` keeps the run, trained or not yet: named after the run
    and its key."""
    return cache_dir() / f"{run.name}-{run.key[:20]}.pt"


def digest(*parts) -> str:
    """A short hash of data (tensors, lists, strings) for a run's key."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.cpu().numpy().tobytes() if isinstance(part, torch.Tensor)
                 else repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()


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


# ---- processes and randomness ------------------------------------------------------------

def _call_in_worker(function: Callable, args: tuple, threads: int, deterministic: bool):
    os.environ[PROGRESS_VARIABLE] = "0"  # the parent shows the progress, read from files
    torch.set_num_threads(threads)  # as in the parent process: the same sums, the same key
    torch.use_deterministic_algorithms(deterministic)
    function(*args)


def run_in_processes(calls: list, processes: int | None = None,
                     waiting: Callable[[], None] | None = None) -> None:
    """Run each call (function, args) at once in its own worker process, at most `processes`
    at a time (by default one per CPU core this process may use). Each worker is a fresh
    interpreter ("spawn": no threads inherited from this one) with this process's number
    of threads and determinism, so a training run there is the run it would be here.
    Returns when all have finished, raising what a worker raised; `waiting()`, if given, is
    called about twice a second until then (a progress bar). Fewer than two calls or
    one process: nothing runs, and the caller runs the calls itself (as `trained_together`
    does: it trains what is still missing, then loads everything from the cache). The
    functions must be importable module-level ones, and the arguments picklable."""
    if processes is None:
        processes = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else os.cpu_count() or 1
    positive_int("processes", processes)
    workers = min(len(calls), processes)
    if workers < 2:
        return
    spawn = multiprocessing.get_context("spawn")
    settings = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    with ProcessPoolExecutor(workers, mp_context=spawn) as pool:
        jobs = [pool.submit(_call_in_worker, function, args, *settings)
                for function, args in calls]
        while waiting is not None and wait(jobs, timeout=0.5).not_done:
            waiting()
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
        torch.manual_seed(book_seed(seed))
        yield
