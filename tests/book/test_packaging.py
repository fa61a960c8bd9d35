"""The set-up files agree with each other: one list of dependencies, exact pins for the build."""

import re
from pathlib import Path

import tomllib
import yaml
from fresh_env import claimed_pythons
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def declared_requirements() -> set[str]:
    project = pyproject()["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs.extend(extra)
    return {str(Requirement(r)) for r in reqs}


def test_environment_yml_installs_what_pyproject_declares():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    assert len(pip_sections) == 1, "environment.yml should have exactly one pip section"
    pip = pip_sections[0]
    assert "-e ." in pip, "environment.yml must install the seqlib package itself (-e .)"
    listed = {str(Requirement(r)) for r in pip if r != "-e ."}
    assert listed == declared_requirements(), (
        f"only in environment.yml: {sorted(listed - declared_requirements())}; "
        f"only in pyproject.toml: {sorted(declared_requirements() - listed)}"
    )


def test_constraints_pin_every_declared_dependency_within_its_range():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line).groups()
            pins[Requirement(name).name.lower().replace("_", "-")] = version
    assert pins["torch"] == "2.13.0"
    for req in map(Requirement, declared_requirements()):
        key = req.name.lower().replace("_", "-")
        assert key in pins, f"{req.name} is declared in pyproject.toml but not pinned"
        assert req.specifier.contains(pins[key], prereleases=True), (
            f"{req.name}=={pins[key]} in constraints.txt is outside pyproject's range {req}"
        )


def test_torch_is_a_range_in_pyproject_so_colab_keeps_its_build():
    torch_req = next(Requirement(r) for r in pyproject()["project"]["dependencies"]
                     if r.startswith("torch"))
    assert not any(spec.operator == "==" for spec in torch_req.specifier)


def test_requires_python_claims_no_more_than_the_tested_versions():
    """The classifiers name the Python versions that the tests run on (make test-oldest the
    oldest, make test-newest the newest, make test that of constraints.txt), and
    requires-python spans those and no more."""
    tested = claimed_pythons()
    assert "3.11" in tested, "constraints.txt's Python"
    minors = [int(version.split(".")[1]) for version in tested]
    assert pyproject()["project"]["requires-python"] == f">=3.{minors[0]},<3.{minors[-1] + 1}"
