"""`parallax check`: the table, the JSON report and the exit code."""

from __future__ import annotations

import dataclasses
import json

import jax.numpy as jnp

from parallax._cli import main as parallax_main
from parallax.envs import GridWorld
from parallax.testing._cli import main as check_main


class NaNRewardGridWorld(GridWorld):
    """Broken on purpose: every reward after reset is NaN."""

    def step(self, state, action):
        s = super().step(state, action)
        return dataclasses.replace(s, reward=s.reward * jnp.float32(jnp.nan))


def test_parallax_check_registered_id_passes(tmp_path, capsys):
    report = tmp_path / "report.json"
    code = parallax_main(
        [
            "check",
            "GridWorld-v0",
            "--steps",
            "4",
            "--batch-size",
            "2",
            "--checks",
            "contract,structure_stable,marl_rules",
            "--report",
            str(report),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "contract" in out and "PASS" in out and "overall: PASS" in out
    assert "[marl_rules] skipped: single-agent env" in out
    data = json.loads(report.read_text())
    assert data["env"] == "GridWorld-v0" and data["overall"] == "PASS"
    rows = {(r["check"], r["precision"]): r["status"] for r in data["results"]}
    assert rows[("contract", "f32")] == rows[("contract", "x64")] == "pass"
    assert rows[("marl_rules", "f32")] == "skip"
    assert set(rows) == {
        (c, p) for c in ("contract", "structure_stable", "marl_rules") for p in ("f32", "x64")
    }


def test_parallax_check_module_factory_fails_with_exit_1(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = check_main(
        ["test_testing_cli:NaNRewardGridWorld", "--checks", "contract", "--x64", "off"]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL" in out and "overall: FAIL" in out
    assert "check_env/reward failed at step 1, field `reward`" in out
    data = json.loads(
        (tmp_path / "parallax-check-test_testing_cli_NaNRewardGridWorld.json").read_text()
    )
    assert data["overall"] == "FAIL"
    assert data["results"][0]["status"] == "fail"
    assert "the reward must be finite" in data["results"][0]["message"]


def test_parallax_check_usage_errors(capsys):
    assert check_main(["no.such.module:Env", "--x64", "off"]) == 2
    assert "cannot load" in capsys.readouterr().err
    assert check_main(["GridWrld-v0", "--x64", "off"]) == 2
    assert "did you mean 'GridWorld-v0'" in capsys.readouterr().err
    try:
        check_main(["GridWorld-v0", "--checks", "speed"])
    except SystemExit as exit_:
        assert exit_.code == 2
    else:  # pragma: no cover
        raise AssertionError("argparse should have exited")
    assert "unknown ['speed']" in capsys.readouterr().err
