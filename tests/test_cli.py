"""The `parallax` command: `--version`, a `list` that imports no jax, strict options for every
subcommand, `check` reporting as it goes and refusing a bad `--report` up front, `--help`
with defaults, and unknown ids that point to `parallax list`."""

from __future__ import annotations

import ast
import importlib.metadata
import io
import json
import pathlib
import re
import subprocess
import sys

import pytest

import parallax
from parallax import _ids, _registry
from parallax._cli import main
from parallax.envs import GridWorld
from parallax.testing import _cli as check_cli
from parallax.testing import run_battery

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONSOLE_SCRIPT = pathlib.Path(sys.executable).with_name("parallax")
HEAVY = ("jax", "jaxlib", "numpy", "gymnax", "brax", "mujoco", "mujoco_playground")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def _exit_code(argv: list[str]) -> int | str | None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    return exit_.value.code


# -- --version and a cheap `parallax list` -------------------------------------------------
def test_version_prints_the_installed_package_version(capsys):
    assert _exit_code(["--version"]) == 0
    assert capsys.readouterr().out == f"parallax {importlib.metadata.version('parallax-rl')}\n"
    assert parallax.__version__ == importlib.metadata.version("parallax-rl")


def test_import_parallax_list_and_version_import_nothing_heavy():
    code = f"""
import sys
import parallax
from parallax._cli import main
try:
    main(["--version"])
except SystemExit:
    pass
main(["list"])
print(sorted(m for m in {HEAVY!r} if m in sys.modules))
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    *ids, heavy = done.stdout.splitlines()
    assert heavy == "[]"
    assert ids[0] == f"parallax {parallax.__version__}"
    assert ids[1:] == _ids.listed_ids()


def test_list_prints_the_builtin_ids_then_the_installed_namespaces(capsys):
    assert main(["list"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[: len(_ids.BUILTIN_IDS)] == list(_ids.BUILTIN_IDS)
    assert printed == _ids.listed_ids()  # one id per line, nothing else, for scripts
    # an id that cannot run with the pinned versions gets its reason on stderr
    assert main(["list"]) == 0
    notes = capsys.readouterr().err.splitlines()
    unsupported = [i for i in _ids.listed_ids() if i in _ids.UNSUPPORTED]
    assert len(notes) == len(unsupported)
    assert all(n.strip().startswith("(unsupported: ") for n in notes)
    assert main(["list", "--no-namespaces"]) == 0
    assert capsys.readouterr().out.splitlines() == list(_ids.BUILTIN_IDS)


def test_the_static_tables_match_the_live_registry(monkeypatch):
    # the namespaced ids parallax.registered_ids() gets from the installed libraries
    live = [i for i in parallax.registered_ids() if "/" in i]
    assert [i for i in _ids.listed_ids() if "/" in i] == live
    # the builtin ids and namespaces that parallax._registry registers at import
    monkeypatch.setattr(_registry, "_REGISTRY", {})
    monkeypatch.setattr(_registry, "_NAMESPACES", {})
    _registry._register_builtins()
    assert sorted(_registry._REGISTRY) == list(_ids.BUILTIN_IDS)
    assert sorted(_registry._NAMESPACES) == sorted(_ids.NAMESPACES)


def test_list_spaces_builds_each_env(capsys):
    assert main(["list", "--spaces", "--no-namespaces"]) == 0
    out = capsys.readouterr().out
    assert "GridWorld-v0\n    observation: " in out and "\n    action: " in out
    assert "cannot build" not in out
    # the replay envs need a loaded day: the listing says so instead of building them
    assert "LimitOrderBookReplay-v0\n    (needs data=, a LOBSTER day from " in out
    assert out.count("(needs data=") == len(_ids.NEEDS_DATA) == 2


def test_the_lazy_package_still_exports_every_name():
    assert set(parallax.__all__) <= set(dir(parallax))
    for name in parallax.__all__:
        assert getattr(parallax, name) is not None
    from parallax import State, spaces

    assert State.__module__ == "parallax._core" and spaces.__name__ == "parallax.spaces"
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        parallax.nope
    # the TYPE_CHECKING imports (what mypy sees) and the lazy table name the same things
    tree = ast.parse((ROOT / "parallax" / "__init__.py").read_text())
    typed = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for stmt in node.body
        if isinstance(stmt, ast.ImportFrom)
        for alias in stmt.names
    }
    assert typed == set(parallax._LAZY) == set(parallax.__all__) - {"__version__"}


# -- unknown options -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["list", "--bogus"],
        ["--bogus", "list"],
        ["check", "GridWorld-v0", "--bogus"],
        ["check", "--bogus", "GridWorld-v0"],
        ["bench", "GridWorld-v0", "--bogus"],
    ],
)
def test_unknown_options_are_usage_errors(argv, capsys):
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "usage: parallax" in err and "unrecognized arguments: --bogus" in err


def test_the_console_script_refuses_unknown_options():
    if not CONSOLE_SCRIPT.exists():
        pytest.skip("the parallax console script is not installed next to this python")
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), "list", "--bogus"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "usage: parallax list" in done.stderr
    assert "error: unrecognized arguments: --bogus" in done.stderr


# -- --help --------------------------------------------------------------------------------
def test_help_lists_the_commands_and_list_spaces(capsys):
    assert _exit_code(["--help"]) == 0
    out = capsys.readouterr().out
    for text in ("list", "check", "bench", "--spaces", "--version"):
        assert text in out
    assert _exit_code(["list", "--help"]) == 0
    assert "--spaces" in capsys.readouterr().out


def test_check_and_bench_help_show_the_defaults(capsys):
    assert _exit_code(["bench", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for text in ("--num-envs N [N ...] batch sizes (default: 1024)", "seed (default: 0)"):
        assert text in out
    assert "(default: None)" not in out and "(default: False)" not in out
    assert _exit_code(["check", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for text in ("--steps T steps per rollout (default: 16)", "(default: 8)", "(default: both)"):
        assert text in out
    assert "(default: None)" not in out and "(default: False)" not in out


# -- parallax check: progress and --report -------------------------------------------------
def test_run_battery_reports_each_outcome_as_it_ends():
    seen = []
    outcomes = run_battery(
        GridWorld, num_steps=2, batch_size=2, checks=["matches_reference"], on_outcome=seen.append
    )
    assert seen == outcomes and [o.status for o in seen] == ["skip"]


def test_check_prints_a_line_per_check_before_the_table(tmp_path, capsys):
    report = tmp_path / "r.json"
    argv = ["check", "GridWorld-v0", "--steps", "2", "--batch-size", "2", "--x64", "off"]
    assert main([*argv, "--checks", "contract,marl_rules", "--report", str(report)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    contract = next(i for i, line in enumerate(lines) if re.match(r"f32\s+contract\s", line))
    assert re.fullmatch(r"f32  contract    PASS\s+\d+\.\d\ds", lines[contract])
    assert re.fullmatch(r"f32  marl_rules  skip\s+\d+\.\d\ds", lines[contract + 1])
    table = next(i for i, line in enumerate(lines) if line.startswith("check "))
    assert contract < table and lines[-1].startswith("overall: PASS")
    assert "\r" not in captured.err  # stderr is not a terminal: no bar
    assert json.loads(report.read_text())["overall"] == "PASS"


@pytest.mark.parametrize("tqdm_installed", [True, False])
def test_the_progress_bar_draws_on_stderr_below_the_lines(tqdm_installed, monkeypatch):
    if not tqdm_installed:
        monkeypatch.setitem(sys.modules, "tqdm", None)  # `from tqdm import tqdm` fails
    out, err = io.StringIO(), io.StringIO()
    progress = check_cli._Progress(2, bar=True, out=out, err=err)
    progress.start("f32 contract")
    progress.line("f32  contract  PASS  1.00s")
    progress.start("f32 determinism")
    progress.close()
    assert out.getvalue() == "f32  contract  PASS  1.00s\n"
    assert "f32 determinism" in err.getvalue()
    if not tqdm_installed:
        assert "[##########----------] 1/2 f32 determinism" in err.getvalue()
    silent_err = io.StringIO()
    quiet = check_cli._Progress(2, bar=False, out=io.StringIO(), err=silent_err)
    quiet.start("f32 contract")
    quiet.line("f32  contract  PASS  1.00s")
    quiet.close()
    assert silent_err.getvalue() == ""


@pytest.mark.parametrize("where", ["missing/r.json", "."])
def test_check_refuses_a_report_path_it_cannot_write_before_running(where, tmp_path, monkeypatch):
    def run_battery(*args, **kwargs):  # pragma: no cover - must not run
        raise AssertionError("the battery ran before --report was checked")

    monkeypatch.setattr(check_cli, "run_battery", run_battery)
    path = str(tmp_path / where)
    with pytest.raises(SystemExit) as exit_:
        check_cli.main(["GridWorld-v0", "--report", path])
    assert exit_.value.code == 2


def test_check_names_report_and_the_path_in_the_error(capsys):
    assert _exit_code(["check", "GridWorld-v0", "--report", "/missing/dir/r.json"]) == 2
    err = capsys.readouterr().err
    assert "--report '/missing/dir/r.json'" in err
    assert "the directory '/missing/dir' does not exist" in err


# -- unknown ids ---------------------------------------------------------------------------
def test_an_unknown_id_points_to_parallax_list_and_close_ids():
    with pytest.raises(KeyError) as error:
        parallax.make("GridWrld-v0")
    message = error.value.args[0]
    assert "did you mean 'GridWorld-v0'" in message
    assert "run `parallax list` to see the registered ids" in message
    if _ids.installed("gymnax"):  # namespaced ids are suggested too
        with pytest.raises(KeyError, match="did you mean 'gymnax/CartPole-v1'"):
            parallax.make("gymnx/CartPole-v1")


@pytest.mark.parametrize("command", ["check", "bench"])
def test_the_commands_name_parallax_list_for_an_unknown_id(command, capsys):
    assert main([command, "GridWrld-v0", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'GridWorld-v0'" in err and "run `parallax list`" in err


# -- parallax new / replay -----------------------------------------------------------------
def test_help_lists_new_and_replay(capsys):
    assert _exit_code(["--help"]) == 0
    out = capsys.readouterr().out
    assert "new" in out and "replay" in out and "parallax new myenv" in out
    assert _exit_code(["new", "--help"]) == 0
    assert "(default: .)" in " ".join(capsys.readouterr().out.split())
    assert _exit_code(["replay", "--help"]) == 0
    assert "a .npz trajectory file" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv", [["new", "walk", "--bogus"], ["replay", "file.npz", "--bogus"], ["new"]]
)
def test_new_and_replay_usage_errors(argv, capsys):
    assert _exit_code(argv) == 2
    assert "usage: parallax" in capsys.readouterr().err


def test_parallax_new_imports_no_jax(tmp_path):
    done = _python(
        "import sys\nfrom parallax._cli import main\n"
        f"assert main(['new', 'walk', '--dir', {str(tmp_path)!r}]) == 0\n"
        "print(sorted(m for m in ('jax', 'numpy') if m in sys.modules))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "walk" / "env.py").is_file()
