"""The built distribution is complete: its wheel, installed into a fresh virtual environment,
imports every subpackage and runs the `parallax` command.

The wheel is built from the sdist (as `make dist` does, offline with the test extra's
setuptools), so a file missing from either shows up here. The fresh environment has no pip
and no copy of the source; it borrows only the *dependencies* (jax, numpy, ...) from the
running interpreter's site-packages through a `.pth` line, which Python does not scan for
further `.pth` files, so this checkout's editable install is not visible there.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUBPACKAGES = ("envs", "finance", "rng", "testing", "adapters", "train", "spaces")

pytestmark = pytest.mark.xdist_group("dist")


def _source_snapshot(dest: pathlib.Path) -> pathlib.Path:
    """The files a build reads, copied: the checkout's own `build/` and `*.egg-info` (a stale
    file list from an earlier build or editable install) and files other tests write while
    this one builds cannot reach the build."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "parallax", dest / "parallax", ignore=skip)
    (dest / "tests").mkdir()
    for path in (ROOT / "tests").glob("test*.py"):  # setuptools puts these in the sdist
        shutil.copy2(path, dest / "tests" / path.name)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, pathlib.Path]:
    out = tmp_path_factory.mktemp("dist")
    source = _source_snapshot(tmp_path_factory.mktemp("source"))
    run = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, (
        f"python -m build failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    )
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


@pytest.fixture(scope="module")
def fresh(built, tmp_path_factory) -> pathlib.Path:
    """A virtual environment holding only the wheel (dependencies borrowed, see above)."""
    home = tmp_path_factory.mktemp("fresh")
    venv.EnvBuilder(with_pip=False).create(home / "venv")
    python = home / "venv" / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(built["wheel"])],
        check=True,
        capture_output=True,
    )  # fmt: skip
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    (pathlib.Path(site) / "borrowed_dependencies.pth").write_text(ours + "\n")
    return home


def _run(home: pathlib.Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(
        list(argv), cwd=home, env=env, capture_output=True, text=True, check=False, timeout=300
    )


def test_the_wheel_holds_the_package_and_nothing_else(built):
    names = zipfile.ZipFile(built["wheel"]).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"parallax"}, tops
    assert "parallax/py.typed" in names
    for sub in SUBPACKAGES:
        assert f"parallax/{sub}/__init__.py" in names or f"parallax/{sub}.py" in names, sub
    source = {p.relative_to(ROOT).as_posix() for p in (ROOT / "parallax").rglob("*.py")}
    tracked = subprocess.run(
        ["git", "ls-files", "parallax"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    expected = {p for p in source if p in tracked} if tracked else source
    assert expected <= set(names), sorted(expected - set(names))


def test_the_wheel_holds_no_benchmark_code(built):
    # the competitors' runners (sekai, raw gymnax, parallax-rl 0.4.0) are developer tools in
    # benchmarks/, not in the package: no benchmark file, and no competitor code in a module
    wheel = zipfile.ZipFile(built["wheel"])
    names = wheel.namelist()
    assert not [n for n in names if "benchmarks/" in n or "competitors" in n], names
    benchmark_files = {p.name: p.read_bytes() for p in (ROOT / "benchmarks").glob("*.py")}
    assert {"competitors.py", "parallax_rl_worker.py"} <= set(benchmark_files)
    for name in names:
        if name.endswith(".py"):
            assert wheel.read(name) not in benchmark_files.values(), name  # no copied script
            text = wheel.read(name).decode()
            for marker in ("SekaiRunner", "GymnaxRunner", "ParallaxRLRunner", "parallax_rl_worker"):
                assert marker not in text, (name, marker)


def test_the_installed_wheel_imports_every_subpackage(fresh):
    code = (
        "import importlib, parallax; "
        f"[importlib.import_module('parallax.' + s) for s in {SUBPACKAGES!r}]; "
        "print(parallax.__file__); print(parallax.__version__)"
    )
    result = _run(fresh, str(fresh / "venv" / "bin" / "python"), "-c", code)
    assert result.returncode == 0, result.stderr
    location, version = result.stdout.split()
    assert pathlib.Path(location).is_relative_to(fresh / "venv"), location  # not this checkout
    assert version != "0.0.0"


def test_the_installed_console_script_lists_and_reports_its_version(fresh):
    parallax = str(fresh / "venv" / "bin" / "parallax")
    listing = _run(fresh, parallax, "list", "--no-namespaces")
    assert listing.returncode == 0, listing.stderr
    assert {"GridWorld-v0", "Trading-v0", "OptimalExecution-v0"} <= set(listing.stdout.split())
    version = _run(fresh, parallax, "--version")
    assert version.returncode == 0, version.stderr
    assert "0." in version.stdout


def test_the_installed_bench_runs_and_says_how_to_compare(fresh):
    parallax = str(fresh / "venv" / "bin" / "parallax")
    argv = ["bench", "GridWorld-v0", "--num-envs", "2", "--steps", "2", "--repeats", "1"]
    plain = _run(fresh, parallax, *argv, "--no-progress", "--json")
    assert plain.returncode == 0, plain.stderr
    assert '"env": "GridWorld-v0"' in plain.stdout
    compared = _run(fresh, parallax, *argv, "--compare", "sekai", "--no-progress")
    assert compared.returncode == 2, compared.stdout + compared.stderr
    assert "--compare sekai needs the competitors' runners" in compared.stderr
    assert "git clone" in compared.stderr and "benchmarks/" in compared.stderr
