"""A fresh virtual environment with chosen versions of seqlib's dependencies, installed from
the package index, and seqlib's tests run in it: the steps that tests/book/test_colab.py and
tests/book/test_ends.py share.

`install` makes the environment: each runtime dependency of pyproject.toml at the version
asked for (or within its declared range), the test extra's tools but those of the book's own
checks (browser, PDF, lint), and the seqlib package itself, built from a copy of the source
and installed as a package (not editable, as Colab's set-up cell installs it). It returns
the versions that were installed, and checks that seqlib is imported from the environment.

torch goes in first, on its own, without its dependencies. The torch wheels of the package
index for Linux x86-64 are CUDA builds: they require a dozen NVIDIA packages (CUDA runtime,
cuBLAS, cuDNN, NCCL, ...: several GB) and triton. Even on a machine without a GPU,
`import torch` loads torch/_C, which links to libtorch_cuda.so, which links to most of the
CUDA libraries: the loader must find them. It needs no more than these: cuSOLVER (linked by
libtorch_cuda_linalg.so), NVRTC (in some releases) and the CUDA driver are opened only when
a GPU computation asks for them, and triton and cuda-bindings only by torch.compile and the
GPU tools. So the environment gets torch's own requirements on every platform (sympy,
networkx, ...) and, of the requirements its Linux wheel adds for the GPU, only those that
ship a library named by the DT_NEEDED entries of torch/_C and, in turn, of torch/lib's
libraries (read from the ELF files, `torch_requirements`). A CPU build of torch (such as a
"+cpu" wheel) links to no CUDA library and gets none.
"""

import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
from importlib.metadata import Distribution

import pytest
import tomllib
from packaging.requirements import Requirement

REPO = pathlib.Path(__file__).resolve().parents[1]
PIP_S = 1800
RUN_S = 2700
# The test extra's tools that serve only the book's own checks, not the tests run here.
BOOK_TOOLS = {"playwright", "pypdf", "pypdfium2", "ruff"}
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/sanitize.cfg"]
# The CUDA libraries that torch links to, by the component of torch's requirements that
# ships each (a package nvidia-COMPONENT[-cuXX], or the extra COMPONENT of cuda-toolkit).
CUDA_LIBRARIES = {
    "libcudart": "cudart", "libcublas": "cublas", "libcublasLt": "cublas", "libcudnn": "cudnn",
    "libcufft": "cufft", "libcufile": "cufile", "libcupti": "cupti", "libcurand": "curand",
    "libcusolver": "cusolver", "libcusparse": "cusparse", "libcusparseLt": "cusparselt",
    "libnccl": "nccl", "libnvrtc": "nvrtc", "libnvshmem_host": "nvshmem",
    "libnvToolsExt": "nvtx",
}


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf8"))["project"]


def dependencies() -> dict[str, Requirement]:
    return {r.name: r for r in map(Requirement, project()["dependencies"])}


def claimed_pythons() -> list[str]:
    """The Python versions of pyproject's classifiers, oldest first."""
    found = [re.fullmatch(r"Programming Language :: Python :: 3\.(\d+)", c)
             for c in project()["classifiers"]]
    return [f"3.{minor}" for minor in sorted(int(m.group(1)) for m in found if m)]


def lower_bound(requirement: Requirement) -> str:
    lows = [s.version for s in requirement.specifier if s.operator == ">="]
    assert len(lows) == 1, f"{requirement}: expected one '>=' lower bound"
    return lows[0]


def run(command: list[str], *, cwd: pathlib.Path, timeout: int, env=None) -> str:
    """Run a command; fail the test with its output if it fails."""
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(command)} took longer than {timeout} s")
    if done.returncode:
        pytest.fail(f"{' '.join(command)} failed ({done.returncode}):\n"
                    f"{(done.stdout + done.stderr)[-6000:]}")
    return done.stdout


def clean_env(**variables: str) -> dict[str, str]:
    """This process's environment, less what would bring in another Python's packages."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return env | variables


def create(venv: pathlib.Path, python: str) -> str:
    """A new virtual environment of the interpreter `python`, with a recent pip; its python."""
    run([python, "-m", "venv", str(venv)], cwd=venv.parent, timeout=120)
    python = str(venv / "bin" / "python")
    pip(python, "--upgrade", "pip>=23.2")
    return python


def pip(python: str, *args: str) -> None:
    run([python, "-m", "pip", "install", "--quiet", *args], cwd=pathlib.Path(python).parent,
        timeout=PIP_S)


def newest(python: str, name: str) -> str:
    """The newest release of `name` on the package index that installs on `python`."""
    out = run([python, "-m", "pip", "index", "versions", name],
              cwd=pathlib.Path(python).parent, timeout=300)
    found = re.match(rf"{re.escape(name)} \(([^)]+)\)", out, re.IGNORECASE)
    assert found, f"pip index versions {name}: {out[:500]}"
    return found.group(1)


def needed(library: pathlib.Path) -> list[str]:
    """The DT_NEEDED entries of a 64-bit little-endian ELF shared library."""
    data = library.read_bytes()
    assert data[:6] == b"\x7fELF\x02\x01", f"{library}: not a 64-bit little-endian ELF file"
    (table,) = struct.unpack_from("<Q", data, 0x28)
    size, count = struct.unpack_from("<HH", data, 0x3A)
    # Each section header: name, type, flags, address, offset, size, link, ...
    sections = [struct.unpack_from("<IIQQQQI", data, table + i * size) for i in range(count)]
    names = []
    for _, kind, _, _, offset, length, link in sections:
        if kind == 6:  # SHT_DYNAMIC: (tag, value) pairs; DT_NEEDED (1) is a string's offset
            strings = sections[link][4]
            for tag, value in struct.iter_unpack("<qQ", data[offset:offset + length]):
                if tag == 1:
                    start = strings + value
                    names.append(data[start:data.index(b"\0", start)].decode())
    return names


def cuda_components(torch_dir: pathlib.Path) -> set[str]:
    """The CUDA components whose libraries `import torch` loads: those named by torch/_C's
    and libtorch_global_deps' DT_NEEDED entries and, in turn, by torch/lib's libraries'."""
    lib = torch_dir / "lib"
    todo = [*torch_dir.glob("_C*.so"), *lib.glob("libtorch_global_deps.so")]
    seen, outside = set(), set()
    while todo:
        for name in needed(todo.pop()):
            if (lib / name).exists():
                if name not in seen:
                    seen.add(name)
                    todo.append(lib / name)
            else:
                outside.add(name.split(".so")[0])
    return {CUDA_LIBRARIES[name] for name in outside if name in CUDA_LIBRARIES}


def component(name: str) -> str:
    """nvidia-cuda-runtime-cu12 -> cudart, nvidia-cudnn-cu13 -> cudnn, nvidia-cublas -> cublas"""
    name = re.sub(r"^nvidia-(cuda-)?|-cu\d+$", "", name.lower())
    return {"runtime": "cudart"}.get(name, name)


def torch_requirements(python: str) -> list[str]:
    """What the installed torch needs to import on the CPU (see the module's docstring)."""
    site, version = json.loads(run([python, "-c", (
        "import json, platform, sysconfig; "
        "print(json.dumps([sysconfig.get_path('purelib'), platform.python_version()]))")],
        cwd=REPO, timeout=60))
    site = pathlib.Path(site)
    where = {"python_version": ".".join(version.split(".")[:2]), "python_full_version": version,
             "extra": ""}
    on_a_mac = where | {"platform_system": "Darwin", "sys_platform": "darwin",
                        "platform_machine": "arm64"}
    components = cuda_components(site / "torch")
    kept = []
    for requirement in map(Requirement, Distribution.at(next(site.glob("torch-*.dist-info")))
                           .requires or []):
        marker, requirement.marker = requirement.marker, None
        if marker is None or marker.evaluate(on_a_mac):
            if marker is None or marker.evaluate(where):
                kept.append(str(requirement))
        elif marker.evaluate(where):  # the Linux wheel's GPU stack
            if requirement.name == "cuda-toolkit":
                requirement.extras &= components
                if requirement.extras:
                    kept.append(str(requirement))
            elif component(requirement.name) in components:
                kept.append(str(requirement))
    return kept


def install(venv: pathlib.Path, python: str, pins: dict[str, str]) -> dict[str, str]:
    """Install seqlib into the new environment `venv`, made by `create`, with the dependencies
    named in `pins` at those versions and the others within their declared range; return the
    installed versions of the runtime dependencies, and of Python."""
    specs = {name: f"{name}=={pins[name]}" if name in pins else str(requirement)
             for name, requirement in dependencies().items()}
    pip(python, "--no-deps", specs.pop("torch"))
    tools = [r for r in project()["optional-dependencies"]["test"]
             if Requirement(r).name not in BOOK_TOOLS]
    pip(python, *specs.values(), *torch_requirements(python), *tools)
    # The package is built from a copy, so that the build leaves nothing in the checkout.
    source = venv.parent / "source"
    shutil.copytree(REPO / "seqlib", source / "seqlib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    pip(python, "--no-deps", str(source))

    # The environment holds what was asked for, and seqlib as installed, not the checkout;
    # importing torch checks that it has what it needs.
    names = list(dependencies())
    report = json.loads(run([python, "-c", (
        "import importlib.metadata as m, json, platform, seqlib, torch; "
        f"report = {{name: m.version(name) for name in {names!r}}}; "
        "report.update(python=platform.python_version(), seqlib=seqlib.__file__); "
        "print(json.dumps(report))")], cwd=venv.parent, timeout=300, env=clean_env()))
    for name, version in pins.items():
        assert Requirement(f"{name}=={version}").specifier.contains(report[name]), (
            f"{name} {report[name]} installed, expected {version}")
    assert pathlib.Path(report.pop("seqlib")).is_relative_to(venv), (
        "seqlib is not imported from the environment")
    return report


def run_tests(venv: pathlib.Path, paths: list[str]) -> str:
    """pytest (nbval for the notebooks) over `paths` in the environment, on two workers, each
    notebook whole on one; its closing line."""
    # The venv's pytest does not put the checkout on sys.path: seqlib is the installed one.
    env = clean_env(SEQLIB_DEVICE="cpu", SEQLIB_MODEL_CACHE=str(venv.parent / "models"))
    out = run([str(venv / "bin" / "pytest"), "-p", "no:cacheprovider", "-q", "--tb=short",
               "--disable-warnings", "-n", "2", "--dist", "loadfile", *NBVAL, *paths],
              cwd=REPO, timeout=RUN_S, env=env)
    return out.strip().splitlines()[-1]
