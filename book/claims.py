"""The ledger of runs behind the pages' claims about trained models (book/claims.csv).

Every claim a page makes about a trained model goes through `seqlib.pages.claims.claim`,
which, in a run made here, appends its margin to a log. A run is one way of computing the
pages: a seed offset (SEQLIB_SEED), the kernel settings and the processor (or GPU). This
script runs pages under such runs and appends one row per claim to the ledger, with the
columns page, claim, run, margin, says (what the claim expects) and code (a digest of the
page's code cells when it ran):

    python book/claims.py run [--pages 06 14] [--runs 0 1 2 6/default 8/cuda]
    python book/claims.py report       # every claim's evidence, and what falls short
    python book/claims.py render       # the ledger's tables on the evidence page

A run is written SEED (the Makefile's kernel pins, on x86-64), SEED/default (PyTorch's,
MKL's and oneDNN's own choice of vector instructions) or SEED/cuda (a GPU), and /N more
for N threads instead of the pages' one (SEED/default/2). `run` skips a (page, run) that
the ledger already holds for every claim of the page's current code (in rows that count, as
below), so that the ledger can be built over several sittings. Each run computes its pages
with a model cache of its own, which pages share (a page that loads another's models finds
them there) and which is removed at the end.

The evidence: a claim's rows are those of the page's current code, and those of an earlier
version of its code when one run of both gave every claim they share the same margin to the
last bit (a change that moved no number, such as a cell moved or a comment edited). A claim
is supported when it has at least MIN_RUNS runs, held in every one, and its mean margin is
at least SIGMAS standard deviations of its margins.
"""

import argparse
import ast
import csv
import hashlib
import json
import os
import pathlib
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from seqlib.pages.kernels import processor  # noqa: E402  (imports no torch)

LEDGER = ROOT / "book" / "claims.csv"
EVIDENCE = ROOT / "book" / "evidence.md"
PROBE = ROOT / "tests" / "nbval_probe.json"
COLUMNS = ("page", "claim", "run", "margin", "says", "code")
MIN_RUNS, SIGMAS = 8, 3.0
# The runs of the ledger: the stored run (seed 0), seeds 1 to 5 with the Makefile's pins,
# and two seeds with other kernels, the second on two threads (sums split another way, and
# the exact cells checked under them too). A GPU adds SEED/cuda.
STANDARD_RUNS = ("0", "1", "2", "3", "4", "5", "6/default", "7/default/2")
PINS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
UNPINNED = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AUTO", "ONEDNN_MAX_CPU_ISA": "ALL"}
HEADLINES = ROOT / "book" / "headlines.yml"
BEGIN = "<!-- the claims' table: written by book/claims.py render -->"
END = "<!-- end of the claims' table -->"
HEAD_BEGIN = "<!-- the headline comparisons: written by book/claims.py render -->"
HEAD_END = "<!-- end of the headline comparisons -->"


# ---- pages ---------------------------------------------------------------------------------

def pages(numbers=None) -> list[pathlib.Path]:
    """The notebooks of the pages numbered `numbers` ("06"), or all of them."""
    found = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if not numbers:
        return found
    chosen = [p for p in found if p.name[:2] in numbers]
    missing = sorted(set(numbers) - {p.name[:2] for p in chosen})
    if missing:
        raise SystemExit(f"no page numbered {missing}: expected two digits such as 06")
    return chosen


def code_cells(path: pathlib.Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def code_digest(path: pathlib.Path) -> str:
    """The digest of a page's code cells, in order: the page's code as a run computed it."""
    return hashlib.sha256("\0".join(code_cells(path)).encode()).hexdigest()[:12]


def claim_names(path: pathlib.Path, profile: str = "book") -> list[str]:
    """The names of the page's claims that the `profile` ("book", or "full" with
    SEQLIB_FULL=1) states, in order, as its code cells spell them: a claim's name is a plain
    string, the first argument, so that the ledger can be checked against the page. A claim
    under `if FULL:` belongs to the full profile, one under `if not FULL:` (or in the `else`
    of `if FULL:`) to the book's."""
    names = []
    for source in code_cells(path):
        code = "\n".join(line[:len(line) - len(line.lstrip())] + "pass"  # magics: pass
                         if line.lstrip().startswith(("%", "!")) else line
                         for line in source.splitlines())
        names += [name for name, where in _claims_in(ast.parse(code).body, "both", path)
                  if where in ("both", profile)]
    return names


def _claims_in(nodes, where: str, path: pathlib.Path):
    """(name, profile) of every claim( call in the statements `nodes`."""
    for node in nodes:
        if isinstance(node, ast.If) and _is_full(node.test) is not None:
            full = _is_full(node.test)
            yield from _claims_in(node.body, "full" if full else "book", path)
            yield from _claims_in(node.orelse, "book" if full else "full", path)
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _claims_in([child], where, path)
                continue
            for call in ast.walk(child):
                if isinstance(call, ast.Call) and getattr(call.func, "id",
                                                          getattr(call.func, "attr", None)) \
                        == "claim":
                    first = call.args[0] if call.args else None
                    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                        kind = "an f-string" if isinstance(first, ast.JoinedStr) else \
                            "not a plain string"
                        raise ValueError(f"{path.name}: a claim's name is {kind} (line "
                                         f"{call.lineno} of its cell); a claim's name must "
                                         "be a plain string, the first argument")
                    yield first.value, where


def _is_full(test) -> bool | None:
    """True for `FULL`, False for `not FULL`, None for any other condition."""
    if isinstance(test, ast.Name) and test.id == "FULL":
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return None if _is_full(test.operand) is None else not _is_full(test.operand)
    return None


# ---- runs ----------------------------------------------------------------------------------

def gpu_name() -> str:
    done = subprocess.run([sys.executable, "-c", "import torch; "
                           "print(torch.cuda.get_device_name())"],
                          capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise SystemExit(f"a /cuda run needs a GPU: {done.stderr.strip().splitlines()[-1]}")
    return done.stdout.strip()


def parse_run(spec: str) -> dict:
    """A run spec, SEED, SEED/default or SEED/cuda, and /N more for N threads (SEED/default/2):
    its label and its environment."""
    parts = spec.split("/")
    seed, kind, threads = parts + [""] * (3 - len(parts)) if len(parts) <= 3 else ("",) * 3
    if not seed.isdigit() or kind not in ("", "default", "cuda") \
            or threads and (not threads.isdigit() or threads == "0"):
        raise SystemExit(f"a run is SEED, SEED/default or SEED/cuda, with /N for N threads "
                         f"(such as 3/default or 6/default/2), got {spec!r}")
    environ = {"SEQLIB_SEED": seed, "SEQLIB_DEVICE": "cuda" if kind == "cuda" else "cpu",
               "SEQLIB_THREADS": threads}
    if platform.machine().lower() in ("x86_64", "amd64"):
        environ |= UNPINNED if kind == "default" else PINS
    return {"spec": spec, "label": label(environ), "environ": environ}


def label(environ=os.environ) -> str:
    """The run that the variables `environ` make: its seed offset, the kernels (a page's
    set-up pins each kernel variable left unset, on x86-64) and the processor or GPU."""
    seed = environ.get("SEQLIB_SEED", "").strip() or "0"
    threads = environ.get("SEQLIB_THREADS", "").strip()
    threads = f", {threads} threads" if threads and threads != "1" else ""
    if environ.get("SEQLIB_DEVICE", "").strip().startswith("cuda"):
        return f"seed {seed}, GPU{threads}, {gpu_name()}"
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    pinned = x86 and all(environ.get(k) in (None, "", v) for k, v in PINS.items())
    kernels = "AVX2 pins" if pinned else "default kernels"
    return f"seed {seed}, {kernels}{threads}, {processor()}"


def record(path: pathlib.Path, log: pathlib.Path, ledger: pathlib.Path = LEDGER) -> None:
    """Append the claims a page logged (`log`, as `make execute` runs it: the stored run)
    to the ledger, as a run of this environment."""
    logged = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() \
        else []
    append([{"page": path.name[:2], "claim": c["claim"], "run": label(), "margin": c["margin"],
             "says": c["says"], "code": code_digest(path)} for c in logged], ledger)
    failed = [c["claim"] for c in logged if not c["margin"] > 0]
    if failed:
        raise SystemExit(f"{path.name}: claims that do not hold: {failed} (their messages "
                         "are in the page's stderr output)")


def run_page(path: pathlib.Path, environ: dict, cache: str,
             keep: pathlib.Path | None = None) -> tuple[list[dict], list[str]]:
    """Execute one page in a fresh kernel with `environ`: (the claims it logged, the errors
    of cells other than those that demonstrate one). With `keep`, a folder, the executed
    notebook is written there."""
    with tempfile.TemporaryDirectory() as tmp:
        log = pathlib.Path(tmp) / "claims.jsonl"
        env = {**os.environ, **environ, "SEQLIB_MODEL_CACHE": cache,
               "SEQLIB_CLAIMS": str(log), "SEQLIB_PROGRESS": "0"}
        command = [sys.executable, __file__, "execute", str(path)]
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            command.append(str(keep / path.name))
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        errors = done.stdout.splitlines()
        if done.returncode:
            errors.append(f"the page did not run: {done.stderr.strip()[-2000:]}")
        logged = [json.loads(line) for line in log.read_text().splitlines()] \
            if log.exists() else []
    return logged, errors


def execute(path: pathlib.Path, out: pathlib.Path | None = None) -> None:
    """Run the notebook at `path` to its end (a failing cell does not stop it) and print
    one line per cell that raised where the page expects no error, and per exact cell
    (tagged nbval-check-output) whose text differs from the stored one; write the executed
    notebook to `out` if given."""
    import nbclient
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    stored = [c.get("outputs", []) for c in notebook.cells]
    client = nbclient.NotebookClient(notebook, timeout=3600, allow_errors=True,
                                     kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    if out is not None:
        nbformat.write(notebook, out)
    sanitize = sanitizers()
    for index, (cell, before) in enumerate(zip(notebook.cells, stored, strict=True)):
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and "raises-exception" not in tags:
                first = (out["evalue"].splitlines() or [""])[0]
                print(f"cell {index}: {out['ename']}: {first[:300]}")
        if "nbval-check-output" in tags and text(before, sanitize) != text(cell.outputs,
                                                                           sanitize):
            print(f"cell {index}: an exact cell printed another text than the stored one")


def sanitizers() -> list[tuple[re.Pattern, str]]:
    """The regular expressions of tests/sanitize.cfg, as nbval applies them."""
    pairs, regex = [], None
    for line in (ROOT / "tests" / "sanitize.cfg").read_text().splitlines():
        if line.startswith("regex:"):
            regex = re.compile(line.partition(":")[2].strip())
        elif line.startswith("replace:") and regex is not None:
            pairs.append((regex, line.partition(":")[2].strip()))
    return pairs


def text(outputs: list, sanitize: list) -> str:
    """The text a cell printed and returned, as nbval compares it."""
    parts = []
    for out in outputs:
        value = out.get("text") or out.get("data", {}).get("text/plain", "")
        parts.append("".join(value) if isinstance(value, list) else value)
    joined = "".join(parts)
    for regex, replacement in sanitize:
        joined = regex.sub(replacement, joined)
    return joined


# ---- the ledger ----------------------------------------------------------------------------

def read(ledger: pathlib.Path = LEDGER) -> list[dict]:
    if not ledger.exists():
        return []
    with open(ledger, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["margin"] = float(row["margin"])
    return rows


def append(rows: list[dict], ledger: pathlib.Path = LEDGER) -> None:
    new = not ledger.exists()
    with open(ledger, "a", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({**row, "margin": repr(float(row["margin"]))})


def run(numbers, specs, jobs: int, ledger: pathlib.Path = LEDGER,
        keep: pathlib.Path | None = None) -> int:
    """Make the runs `specs` of the pages `numbers`, appending their rows to the ledger;
    returns the number of cells that raised where the page expects no error."""
    chosen = [p for p in order(pages(numbers)) if claim_names(p)]
    failures = 0
    for spec in specs:
        what = parse_run(spec)
        rows = read(ledger)
        todo = [p for p in chosen if not _recorded(p, what["label"], rows)]
        print(f"run {what['label']}: {len(todo)} pages to run "
              f"({len(chosen) - len(todo)} already in the ledger)", flush=True)
        folder = None if keep is None else keep / spec.replace("/", "-")
        with tempfile.TemporaryDirectory(prefix="seqlib-claims-") as cache, \
                ThreadPoolExecutor(jobs) as pool:
            failures += sum(pool.map(partial(_run_one, what=what, cache=cache, keep=folder,
                                             ledger=ledger), todo))
    return failures


def _recorded(path: pathlib.Path, label: str, rows: list[dict]) -> bool:
    """Whether the ledger holds the run `label` of the page for every claim of its current
    code, in rows that count (of its current code, or of an earlier code that computed the
    same margins: see the module's docstring)."""
    page = path.name[:2]
    mine = [r for r in rows if r["page"] == page]
    counted = _counted_codes(mine, code_digest(path))
    have = {r["claim"] for r in mine if r["run"] == label and r["code"] in counted}
    return set(claim_names(path)) <= have


_LOCK = threading.Lock()


def _run_one(path: pathlib.Path, what: dict, cache: str, keep, ledger) -> int:
    """One page of one run: its rows appended to the ledger; returns its count of errors."""
    digest = code_digest(path)
    logged, errors = run_page(path, what["environ"], cache, keep)
    rows = [{"page": path.name[:2], "claim": c["claim"], "run": what["label"],
             "margin": c["margin"], "says": c["says"], "code": digest} for c in logged]
    with _LOCK:
        append(rows, ledger)
        failed = [c["claim"] for c in logged if not c["margin"] > 0]
        print(f"  {path.name[:2]}: {len(rows)} claims"
              + (f", failed: {failed}" if failed else "")
              + "".join(f"\n    {e}" for e in errors), flush=True)
    return len(errors)


def order(paths: list[pathlib.Path]) -> list[pathlib.Path]:
    """The pages in the Makefile's order for nbval (the longest first)."""
    makefile = (ROOT / "Makefile").read_text()
    first = re.search(r"^NBVAL_FIRST := (.*)$", makefile, re.M).group(1).split()
    rank = {n: i for i, n in enumerate(first)}
    return sorted(paths, key=lambda p: (rank.get(p.name[:2], len(rank)), p.name))


# ---- the evidence --------------------------------------------------------------------------

def evidence(rows: list[dict] | None = None, paths=None) -> list[dict]:
    """Every claim of the pages, with the margins of its runs (one per run: the latest row
    of the code that counts, see the module's docstring) and their summary."""
    rows = read() if rows is None else rows
    result = []
    for path in paths or pages():
        page, current = path.name[:2], code_digest(path)
        counted = _counted_codes([r for r in rows if r["page"] == page], current)
        for name in claim_names(path):
            margins, says = {}, None
            for r in rows:
                if r["page"] == page and r["claim"] == name and r["code"] in counted:
                    if r["code"] == current or r["run"] not in margins:
                        margins[r["run"]] = r["margin"]
                    says = r["says"] if r["code"] == current or says is None else says
            values = list(margins.values())
            mean = statistics.fmean(values) if values else float("nan")
            spread = statistics.stdev(values) if len(values) > 1 else float("nan")
            result.append({"page": page, "claim": name, "says": says, "margins": margins,
                           "runs": len(values), "held": sum(v > 0 for v in values),
                           "least": min(values, default=float("nan")), "mean": mean,
                           "spread": spread, "sigmas": mean / spread if spread else
                           (float("inf") if values and mean > 0 else float("nan"))})
    return result


def _counted_codes(rows: list[dict], current: str) -> set[str]:
    """The versions of a page's code whose rows count: the current one, and each earlier
    one that shares a run with a counted version in which every claim they both hold has
    the same margin, bit for bit."""
    by_code = {}
    for r in rows:
        by_code.setdefault(r["code"], {}).setdefault(r["run"], {})[r["claim"]] = r["margin"]
    counted, changed = {current}, True
    while changed:
        changed = False
        for code, runs in by_code.items():
            if code in counted:
                continue
            for other in counted:
                shared = set(runs) & set(by_code.get(other, {}))
                if any(_same(runs[run], by_code[other][run]) for run in shared):
                    counted.add(code)
                    changed = True
                    break
    return counted


def _same(a: dict, b: dict) -> bool:
    shared = set(a) & set(b)
    return bool(shared) and all(a[k] == b[k] for k in shared)


def supported(entry: dict) -> bool:
    return entry["runs"] >= MIN_RUNS and entry["held"] == entry["runs"] \
        and entry["sigmas"] >= SIGMAS


def complete(entries: list[dict] | None = None) -> bool:
    """Whether every claim of the pages has MIN_RUNS runs in the ledger (held or not)."""
    return all(e["runs"] >= MIN_RUNS for e in (evidence() if entries is None else entries))


def stored_label() -> str:
    """The stored run's label: seed 0 with the pins, on the processor the outputs were made
    on (tests/nbval_probe.json names it)."""
    return f"seed 0, AVX2 pins, {json.loads(PROBE.read_text())['processor']}"


def report(entries: list[dict]) -> str:
    lines, short = [], 0
    for e in entries:
        ok = supported(e)
        short += not ok
        lines.append(f"{'  ' if ok else '! '}{e['page']} {e['claim']}: {e['runs']} runs, "
                     f"held in {e['held']}, least {e['least']:.4g}, mean {e['mean']:.4g}, "
                     f"{e['sigmas']:.1f} sd")
    lines.append(f"{len(entries)} claims, {short} short of {MIN_RUNS} runs held in all at "
                 f"{SIGMAS:g} standard deviations")
    return "\n".join(lines)


def _number(value: float) -> str:
    return f"{value:.3g}" if value == value else "-"


def render(entries: list[dict]) -> None:
    """Write the table of the headline comparisons (HEADLINES) and the claims' tables, one
    page's claims to a fold, into the evidence page, each between its markers."""
    stored = stored_label()
    runs = sorted({run for e in entries for run in e["margins"]})
    table = [f"{len(entries)} claims on {len({e['page'] for e in entries})} pages; "
             f"{sum(map(supported, entries))} of them have the evidence the book asks for "
             f"({MIN_RUNS} runs or more, held in every one, the mean margin {SIGMAS:g} "
             f"spreads or more), {sum(e['runs'] < MIN_RUNS for e in entries)} fewer than "
             f"{MIN_RUNS} runs so far; {len(runs)} runs in all:", ""]
    table += [f"- {run}" + (" (the stored run)" if run == stored else "") for run in runs]
    titles = {p.name[:2]: _title(p) for p in pages()}
    for page in sorted({e["page"] for e in entries}):
        mine = [e for e in entries if e["page"] == page]
        counts = sorted({e["runs"] for e in mine})
        held = "held in every run" if all(e["held"] == e["runs"] for e in mine) \
            else f"{sum(e['held'] < e['runs'] for e in mine)} failed in a run"
        table += ["", f":::{{dropdown}} {titles.get(page, page)}: {len(mine)} claims, "
                  f"{'-'.join(map(str, sorted({counts[0], counts[-1]})))} runs each, "
                  f"{held}", "| claim | what it says | stored run | least | mean | spread | "
                  "mean / spread | runs |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        table += [_row([e["claim"], _cell(e["says"] or "")], e, stored) for e in mine]
        table.append(":::")
    by_name = {(e["page"], e["claim"]): e for e in entries}
    heads = ["| comparison | page | claim | stored run | least | mean | spread | "
             "mean / spread | runs |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for head in headlines():
        e = by_name[head["page"], head["claim"]]
        heads.append(_row([_cell(head["comparison"]), head["page"], head["claim"]], e, stored))
    page = EVIDENCE.read_text()
    for begin, end, lines in [(BEGIN, END, table), (HEAD_BEGIN, HEAD_END, heads)]:
        if begin not in page or end not in page:
            raise SystemExit(f"{EVIDENCE.name} has no place for a table: add the lines "
                             f"{begin!r} and {end!r}")
        head, rest = page.split(begin, 1)
        page = head + "\n".join([begin, "", *lines, "", end]) + rest.split(end, 1)[1]
    EVIDENCE.write_text(page)


def _title(path: pathlib.Path) -> str:
    """A page's title, the first line of its first cell ("6. Character-level ...")."""
    first = json.loads(path.read_text())["cells"][0]["source"]
    return "".join(first).splitlines()[0].removeprefix("# ").strip()


def _row(columns: list[str], e: dict, stored: str) -> str:
    """A row of a table: `columns`, then the claim's evidence: its margin in the stored run,
    the least and the mean of its margins, their spread and the mean in spreads, the runs."""
    sigmas = "all equal" if e["sigmas"] == float("inf") else _number(e["sigmas"])
    evidence = [e["margins"].get(stored, float("nan")), e["least"], e["mean"], e["spread"]]
    return "| " + " | ".join([*columns, *map(_number, evidence), sigmas, str(e["runs"])]) + " |"


def headlines() -> list[dict]:
    """The headline comparisons: each a claim of a page (book/headlines.yml)."""
    import yaml

    return yaml.safe_load(HEADLINES.read_text())


def _cell(text: str) -> str:
    return text.replace("\n", " ").replace("|", "\\|").replace("<", "\\<")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("run", help="run pages and append their claims to the ledger")
    make.add_argument("--pages", nargs="*", default=None, help="page numbers (default: all)")
    make.add_argument("--runs", nargs="*", default=list(STANDARD_RUNS))
    make.add_argument("--jobs", type=int, default=2, help="pages at a time")
    make.add_argument("--ledger", type=pathlib.Path, default=LEDGER)
    make.add_argument("--keep", type=pathlib.Path, default=None,
                      help="a folder for the executed notebooks, one subfolder per run")
    keep = sub.add_parser("record", help="append the claims a page logged (make execute)")
    keep.add_argument("path", type=pathlib.Path)
    keep.add_argument("log", type=pathlib.Path)
    sub.add_parser("report", help="print every claim's evidence")
    sub.add_parser("render", help="write the claims' tables into the evidence page")
    page = sub.add_parser("execute", help=argparse.SUPPRESS)
    page.add_argument("path", type=pathlib.Path)
    page.add_argument("out", type=pathlib.Path, nargs="?")
    args = parser.parse_args()
    if args.command == "run":
        failed = run(args.pages, args.runs, args.jobs, args.ledger, args.keep)
        print(report(evidence(read(args.ledger), pages(args.pages))))
        sys.exit(1 if failed else 0)
    elif args.command == "record":
        record(args.path, args.log)
    elif args.command == "report":
        print(report(evidence()))
    elif args.command == "render":
        render(evidence())
    else:
        execute(args.path, args.out)


if __name__ == "__main__":
    main()
