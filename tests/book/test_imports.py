"""The house of seqlib: the chapter's library never imports the book's subpackages, a page
loads only what it uses, and no import cycle."""

import ast
import json
import pathlib
import subprocess
import sys

import pytest

SEQLIB = pathlib.Path(__file__).resolve().parents[2] / "seqlib"


def loaded_after(statement: str) -> list[str]:
    """The seqlib modules (and whether sacrebleu is) loaded by `statement` in a fresh
    interpreter."""
    code = (f"{statement}\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules "
            f"if m.split('.')[0] in ('seqlib', 'sacrebleu'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_import_seqlib_loads_no_model_and_no_experiment():
    assert loaded_after("import seqlib") == ["seqlib"]
    loaded = loaded_after("import seqlib; seqlib.LSTM")
    assert "seqlib.gated" in loaded and not any(".experiments" in m for m in loaded)


def test_a_checker_loads_only_what_it_needs():
    loaded = loaded_after("from seqlib.exercises import check_rnn_forward")
    assert len(loaded) <= 10, loaded
    assert "sacrebleu" not in loaded
    with pytest.raises(subprocess.CalledProcessError):
        loaded_after("from seqlib.exercises import check_nothing")


def test_a_checker_draws_nothing():
    """The beam-search checker runs seqlib.decoding's search on tables; no figure code, so
    no matplotlib."""
    code = ("import sys, seqlib.exercises.decoding\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.splitlines()[-1] == "[]"


def imports() -> dict[str, set[str]]:
    """{module: the seqlib modules it imports} over every file of seqlib."""
    graph = {}
    for path in SEQLIB.rglob("*.py"):
        parts = path.relative_to(SEQLIB.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("seqlib"):
                targets.add(node.module)
                targets |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith("seqlib")}
        graph[name] = targets
    return {name: targets & set(graph) - {name} for name, targets in graph.items()}


def test_the_chapter_library_never_imports_a_subpackage_and_nothing_cycles():
    graph = imports()
    chapter = {name for name in graph if name.count(".") == 1 and
               (SEQLIB / f"{name.split('.')[1]}.py").exists()}
    assert len(chapter) > 15
    for name in chapter:
        assert graph[name] <= chapter | {"seqlib"}, (name, graph[name] - chapter)
    done, active = set(), []

    def visit(name):
        assert name not in active, f"import cycle: {active[active.index(name):] + [name]}"
        if name in done:
            return
        active.append(name)
        for target in graph[name]:
            visit(target)
        active.pop()
        done.add(name)

    for name in graph:
        visit(name)


# The modules of seqlib.experiments by kind, as README's layout gives them: one per page's
# experiment, the parts they share, and the command line of the full-profile runs.
EXPERIMENTS = {"translation", "sentiment", "captioning", "forecasting", "window", "length",
               "trainability", "pretraining"}
SHARED = {"runs", "shakespeare", "streams", "sentences", "datasets", "classify", "ngrams",
          "bpe", "digits", "calibration", "word2vec"}
COMMAND_LINE = {"distributed"}


def test_no_experiment_imports_another_experiment():
    """A module of seqlib.experiments imports, of seqlib.experiments, only the shared parts
    (SHARED: runs, datasets, ...), never an experiment (EXPERIMENTS, one per page); only
    `distributed`, the command line that trains the full-profile runs, imports experiments. Every
    module is of one of these kinds, and the layout table of README.md names each."""
    prefix = "seqlib.experiments."
    graph = imports()
    modules = {name.removeprefix(prefix) for name in graph if name.startswith(prefix)}
    assert modules == EXPERIMENTS | SHARED | COMMAND_LINE, "classify the new module here"
    for module in modules - COMMAND_LINE:
        used = {name.removeprefix(prefix) for name in graph[prefix + module]
                if name.startswith(prefix)}
        assert used <= SHARED, f"{module} imports the experiment(s) {sorted(used - SHARED)}"
    readme = (SEQLIB.parent / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `seqlib/experiments/`"))
    assert not [m for m in sorted(modules) if f"`{m}`" not in row and f"`{m}.py`" not in row]
