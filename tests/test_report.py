"""The validation report of `parallax check` and `require_fresh_report`.

`parallax check DIR` on a project written by `parallax new` writes `validation_report.json`
with each check's verdict and seconds, the throughput (measured only after every check
passed), the environment and the sha256 of the env's and reference's source files;
`require_fresh_report` raises (or warns) when the report is missing, failing, or older than
the source, and returns it otherwise; `parallax.train` can be asked to require it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import pathlib
import shutil

import jax
import pytest

from parallax._scaffold import new_project
from parallax.testing import (
    BATTERY_CHECKS,
    StaleReportError,
    StaleReportWarning,
    require_fresh_report,
)
from parallax.testing import _cli as check_cli
from parallax.testing._targets import load_target

# one worker runs this file, so its module fixtures are built once per `make test`
pytestmark = pytest.mark.xdist_group("report")

CHECKS = "contract,matches_reference"
TINY = ["--throughput-envs", "4,8", "--throughput-steps", "4", "--throughput-repeats", "1"]


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict:
    """A fresh project, checked once (two checks, f32, throughput forced on, tiny sizes)."""
    root = pathlib.Path(new_project("walk", tmp_path_factory.mktemp("proj")))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = check_cli.main(
            [str(root), "--checks", CHECKS, "--x64", "off", "--throughput", "on", *TINY]
        )
    return {"root": root, "code": code, "out": out.getvalue()}


def _report(checked) -> dict:
    return json.loads((checked["root"] / "validation_report.json").read_text())


def test_check_prints_each_check_and_a_final_verdict(checked):
    assert checked["code"] == 0, checked["out"]
    lines = checked["out"].splitlines()
    for name in CHECKS.split(","):
        line = next(row for row in lines if row.startswith(f"f32  {name}"))
        assert "PASS" in line and line.rstrip().endswith("s")
    assert "throughput (f32):" in checked["out"]
    assert "batched n=8" in checked["out"] and "x the reference" in checked["out"]
    assert lines[-1].startswith("overall: PASS (eligible for training)")


def test_report_records_verdicts_environment_throughput_and_hashes(checked):
    data = _report(checked)
    assert data["schema"] == "parallax-validation-report/1"
    assert data["env"] == str(checked["root"]) and data["overall"] == "PASS"
    assert data["eligible_for_training"] is True
    rows = {(r["check"], r["precision"]): r for r in data["results"]}
    assert set(rows) == {("contract", "f32"), ("matches_reference", "f32")}
    assert all(r["status"] == "pass" and r["seconds"] > 0 for r in rows.values())
    env = data["environment"]
    assert env["jax"] == jax.__version__ and env["backend"] == jax.default_backend()
    assert env["parallax"] and env["devices"]
    tp = data["throughput"]
    assert tp["measured"] and tp["precision"] == "f32"
    assert [row["num_envs"] for row in tp["batched"]] == [4, 8]
    assert all(row["steps_per_second"] > 0 for row in tp["batched"])
    assert tp["reference"]["num_envs"] == 1 and tp["reference"]["steps_per_second"] > 0
    assert set(tp["speedup"]) == {"4", "8"}
    files = {str(checked["root"] / "env.py"), str(checked["root"] / "reference.py")}
    assert set(data["sources"]) == files
    for path, digest in data["sources"].items():
        assert digest == hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def test_throughput_is_skipped_unless_every_check_passed_or_for_a_subset(tmp_path, capsys):
    report = tmp_path / "r.json"
    code = check_cli.main(
        ["GridWorld-v0", "--checks", "structure_stable", "--x64", "off", "--report", str(report)]
    )
    assert code == 0
    data = json.loads(report.read_text())
    assert data["throughput"] == {
        "measured": False,
        "reason": "only a subset of the checks ran (--checks)",
    }
    assert "throughput (f32)" not in capsys.readouterr().out
    assert len(BATTERY_CHECKS) >= 8  # the full battery is what `auto` measures after


def test_registered_id_hashes_its_package_module():
    sources = check_cli._sources(load_target("GridWorld-v0"), None)
    assert [pathlib.Path(p).name for p in sources] == ["_gridworld.py"]


def test_fresh_report_is_returned(checked):
    data = require_fresh_report(checked["root"])
    assert data is not None and data["overall"] == "PASS"
    same = require_fresh_report(checked["root"] / "validation_report.json", strict=False)
    assert same == data


def test_missing_report_raises_or_warns(tmp_path):
    with pytest.raises(StaleReportError, match="no validation report at"):
        require_fresh_report(tmp_path)
    with pytest.warns(StaleReportWarning, match="no validation report"):
        assert require_fresh_report(tmp_path / "nothing.json", strict=False) is None


def test_failing_report_raises_or_warns(checked, tmp_path):
    data = _report(checked)
    data["overall"] = "FAIL"
    data["results"][0]["status"] = "fail"
    path = tmp_path / "failing.json"
    path.write_text(json.dumps(data))
    with pytest.raises(StaleReportError, match=r"is failing \(contract \(f32\)\)"):
        require_fresh_report(path)
    with pytest.warns(StaleReportWarning, match="is failing"):
        assert require_fresh_report(path, strict=False)["overall"] == "FAIL"


def test_report_goes_stale_when_the_source_changes(checked, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(checked["root"], root)
    data = _report(checked)
    data["sources"] = {
        str(root / pathlib.Path(p).name): digest for p, digest in data["sources"].items()
    }
    (root / "validation_report.json").write_text(json.dumps(data))
    assert require_fresh_report(root)["overall"] == "PASS"  # same bytes: still fresh
    with (root / "env.py").open("a") as fh:
        fh.write("\n# a tweak after the check\n")
    with pytest.raises(StaleReportError, match=r"older than the source .*env\.py"):
        require_fresh_report(root)
    with pytest.warns(StaleReportWarning, match="older than the source"):
        require_fresh_report(root, strict=False)
    (root / "reference.py").unlink()
    with pytest.raises(StaleReportError, match=r"reference\.py \(missing\)"):
        require_fresh_report(root)


def test_env_object_must_be_covered_by_the_report(checked, monkeypatch):
    from parallax.envs import GridWorld

    monkeypatch.chdir(checked["root"])  # validation_report.json of the current directory
    with pytest.raises(StaleReportError, match=r"_gridworld\.py \(not covered by the report\)"):
        require_fresh_report(GridWorld())


def test_ppo_trainer_can_require_the_report(checked, tmp_path):
    train = pytest.importorskip("parallax.train")
    config = train.preset("GridWorld-v0", total_steps=64, num_envs=2, num_steps=4, hidden=4)
    with pytest.raises(StaleReportError, match="no validation report"):
        train.make_train(config, require_report=tmp_path)
    with pytest.raises(StaleReportError, match="no validation report"):
        train.run(config, require_report=tmp_path / "missing.json", progress=False)
    assert callable(train.make_train(config, require_report=checked["root"]))
