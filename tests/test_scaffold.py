"""`parallax new NAME`: the skeleton passes its own battery as written, and bad input is refused.

The generated project's tests (the star-import battery against the example game, the JAX
env versus its NumPy reference) run in a subprocess, with pytest on the generated folder.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from parallax._cli import main as parallax_main
from parallax._scaffold import class_name, new_project
from parallax._scaffold._templates import TEMPLATES

FILES = {
    "spec.md",
    "reference.py",
    "env.py",
    "README.md",
    "tests/conftest.py",
    "tests/test_battery.py",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> pathlib.Path:
    return pathlib.Path(new_project("noisy_walk", tmp_path_factory.mktemp("new")))


def test_new_writes_every_file_from_the_templates(project):
    written = {str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()}
    assert written == FILES == set(TEMPLATES)
    env = (project / "env.py").read_text()
    assert "class NoisyWalk:" in env and "from parallax import State, rng, spaces" in env
    reference = (project / "reference.py").read_text()
    assert "class NoisyWalkReference:" in reference
    assert "from parallax.rng import reference as rng" in reference
    assert (
        "from parallax.testing.battery import *" in (project / "tests/test_battery.py").read_text()
    )
    conftest = (project / "tests/conftest.py").read_text()
    assert "def env_factory" in conftest and "def reference_factory" in conftest
    assert "| slot | name" in (project / "spec.md").read_text()
    assert "__NAME__" not in env + reference and "__CLASS__" not in env + reference


@pytest.mark.slow  # the generated project's whole battery (`make test-slow`)
def test_generated_project_passes_its_battery(project):
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "f32", "tests"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "test_matches_reference" not in run.stdout  # no failure names
    summary = run.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary


def test_generated_env_and_reference_agree_on_a_longer_run(project, x64):
    from parallax.testing import check_matches_reference
    from parallax.testing._targets import load_target

    target = load_target(str(project))
    assert target.kind == "project" and target.reference_factory is not None
    report = check_matches_reference(
        target.env_factory(), target.reference_factory(), num_steps=40, num_episodes=3
    )
    assert report.stats["steps_compared"] > 40


def test_an_empty_existing_directory_is_used(tmp_path):
    (tmp_path / "walk").mkdir()
    root = new_project("walk", tmp_path)
    assert (pathlib.Path(root) / "env.py").is_file()


def test_refuses_a_non_empty_directory_or_a_file(tmp_path):
    (tmp_path / "walk").mkdir()
    (tmp_path / "walk" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="is a directory that is not empty"):
        new_project("walk", tmp_path)
    assert sorted(os.listdir(tmp_path / "walk")) == ["notes.txt"]  # nothing written
    (tmp_path / "afile").write_text("")
    with pytest.raises(FileExistsError, match="is a file"):
        new_project("afile", tmp_path)


@pytest.mark.parametrize("name", ["", "1walk", "my-env", "my env", "class", "a" * 65, "../x"])
def test_refuses_an_invalid_name(tmp_path, name):
    with pytest.raises(ValueError, match="NAME must start with a letter"):
        new_project(name, tmp_path)
    assert os.listdir(tmp_path) == []


def test_class_names():
    assert class_name("walk") == "Walk"
    assert class_name("noisy_walk") == "NoisyWalk"
    assert class_name("myEnv2") == "MyEnv2"


def test_parallax_new_command(tmp_path, capsys):
    assert parallax_main(["new", "walk", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'walk'}/" in out and "parallax check" in out
    assert (tmp_path / "walk" / "spec.md").is_file()
    for argv, message in (
        (["new", "walk", "--dir", str(tmp_path)], "is a directory that is not empty"),
        (["new", "my-env", "--dir", str(tmp_path)], "NAME must start with a letter"),
    ):
        with pytest.raises(SystemExit) as exit_:
            parallax_main(argv)
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err
