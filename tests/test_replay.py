"""Trajectory I/O and replay: a saved trajectory reads back with its declared schema and
replays bit for bit; a planted divergence is reported at its first step, field by field;
`parallax replay FILE` exits 0 when identical, 1 when not; a failing `parallax check`
writes the diverging trajectory and names it."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallax._cli import main as parallax_main
from parallax.envs import GridWorld
from parallax.testing import (
    ReplayResult,
    TrajectoryRecord,
    load_trajectory,
    new_project,
    record_trajectory,
    replay,
    save_trajectory,
)
from parallax.testing import _cli as check_cli


class LateDrift(GridWorld):
    """Broken on purpose: from step 3 on, the reward is off by one."""

    def step(self, state, action):
        s = super().step(state, action)
        bump = jnp.where(s.step_count >= 3, jnp.float32(1.0), jnp.float32(0.0))
        return dataclasses.replace(s, reward=s.reward + bump)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> pathlib.Path:
    trajectory = record_trajectory(
        GridWorld(), key=jax.random.key(7), num_steps=6, env_spec="GridWorld-v0", note="test"
    )
    return pathlib.Path(save_trajectory(trajectory, tmp_path_factory.mktemp("t") / "grid"))


def test_saved_file_declares_its_schema(saved):
    assert saved.suffix == ".npz"
    with np.load(saved) as data:
        header = json.loads(str(data["header"]))
        arrays = {name: data[name] for name in data.files}
    assert header["schema"] == "parallax-trajectory/1"
    assert header["env"] == "GridWorld-v0" and header["num_steps"] == 6
    assert header["parallax"] and header["jax"] == jax.__version__
    assert header["x64"] is False and header["key_impl"] == "threefry2x32"
    assert "State" in header["state_structure"] and header["note"] == "test"
    assert header["actions"] == [{"path": "<root>", "shape": [], "dtype": "int32"}]
    states = {entry["path"]: entry for entry in header["states"]}
    assert states["observation"] == {"path": "observation", "shape": [4], "dtype": "float32"}
    assert states["termination"]["dtype"] == "bool" and "key" not in states
    for j, entry in enumerate(header["states"]):
        assert arrays[f"state_{j}"].shape == (7, *entry["shape"])
        assert str(arrays[f"state_{j}"].dtype) == entry["dtype"]


def test_round_trip_and_bit_identical_replay(saved, x64):
    with jax.enable_x64(x64):
        trajectory = record_trajectory(GridWorld(), key=jax.random.key(3), num_steps=5)
    back = load_trajectory(save_trajectory(trajectory, saved.with_name(f"rt{x64}.npz")))
    assert back.x64 == x64 and back.num_steps == 5
    assert np.array_equal(jax.random.key_data(back.key), jax.random.key_data(jax.random.key(3)))
    for a, b in zip(trajectory.actions, back.actions, strict=True):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    for a, b in zip(trajectory.states, back.states, strict=True):
        assert a.keys() == b.keys()
        assert all(a[k].tobytes() == b[k].tobytes() and a[k].dtype == b[k].dtype for k in a)
    result = replay(back, GridWorld())
    assert result == ReplayResult(True, 5) and result.format().startswith("identical")


def test_replay_rebuilds_the_env_from_the_spec(saved):
    assert replay(saved).identical


def test_planted_divergence_is_reported_at_its_first_step(saved):
    result = replay(saved, LateDrift())
    assert not result.identical and result.first_step == 3
    (difference,) = result.differences
    assert difference.field == "reward"
    got, expected = float(difference.got), float(difference.expected)
    assert got == pytest.approx(expected + 1.0)
    text = result.format()
    assert "differs at step 3" in text and "step 3  reward  expected" in text


def test_tampered_file_differs_field_by_field(saved, tmp_path):
    trajectory = load_trajectory(saved)
    trajectory.states[2]["observation"] = trajectory.states[2]["observation"].copy()
    trajectory.states[2]["observation"][1] += np.float32(0.5)
    trajectory.states[2]["step_count"] = np.int32(99)
    result = replay(trajectory)
    assert result.first_step == 2
    assert [(d.field, d.index) for d in result.differences] == [
        ("observation", (1,)),
        ("step_count", ()),
    ]
    assert int(result.differences[1].expected) == 99 and int(result.differences[1].got) == 2


def test_trajectory_record_validates_lengths():
    with pytest.raises(ValueError, match="one record per action plus the reset state"):
        TrajectoryRecord(None, np.zeros(2, np.uint32), "threefry2x32", [1], [{}], False)


def test_load_refuses_a_foreign_file(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, a=np.zeros(2))
    with pytest.raises(ValueError, match="not a parallax trajectory"):
        load_trajectory(path)


def test_parallax_replay_exit_codes(saved, tmp_path, capsys):
    assert parallax_main(["replay", str(saved)]) == 0
    assert "identical: 6 steps replayed bit for bit" in capsys.readouterr().out
    trajectory = load_trajectory(saved)
    trajectory.states[4]["reward"] = np.float32(123.0)
    bad = save_trajectory(trajectory, tmp_path / "bad.npz")
    assert parallax_main(["replay", bad]) == 1
    out = capsys.readouterr().out
    assert "differs at step 4" in out and "step 4  reward  expected 123.0 (float32)" in out
    assert parallax_main(["replay", str(tmp_path / "missing.npz")]) == 2
    assert "parallax replay:" in capsys.readouterr().err


def test_failing_check_writes_the_trajectory_it_names(tmp_path, capsys):
    root = pathlib.Path(new_project("walk", tmp_path))
    env_py = root / "env.py"
    good = env_py.read_text()
    bug = good.replace(
        "rng.randint(s.episode_key, t, SLOTS.NOISE_MOVE, 0, 3)",
        "rng.randint(s.episode_key, t, SLOTS.TARGET, 0, 3)",  # a misread slot
    )
    assert bug != good
    env_py.write_text(bug)
    code = check_cli.main([str(root), "--checks", "matches_reference", "--x64", "off"])
    out = capsys.readouterr().out
    assert code == 1 and "overall: FAIL" in out
    path = root / "validation_report.matches_reference.f32.trajectory.npz"
    assert f"trajectory written to {path}" in out and f"parallax replay {path}" in out
    kept = root / "validation_report.matches_reference.f32.mismatch.json"
    assert kept.is_file() and str(kept) in out  # the check's own dump, next to the report
    report = json.loads((root / "validation_report.json").read_text())
    assert report["results"][0]["trajectory"] == str(path)
    assert parallax_main(["replay", str(path)]) == 1
    replayed = capsys.readouterr().out
    first = json.loads(kept.read_text())["first_divergence"]
    assert f"differs at step {first['step']}" in replayed
    # the check's JSON dump replays too (the pytest battery leaves only that file)
    assert parallax_main(["replay", str(kept), "--env", str(root)]) == 1
    assert f"differs at step {first['step']}" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        parallax_main(["replay", str(kept)])
    assert exit_.value.code == 2 and "pass --env SPEC" in capsys.readouterr().err
    env_py.write_text(good)  # the fix: the env now replays the reference's trajectory
    assert parallax_main(["replay", str(path)]) == 0
    assert parallax_main(["replay", str(kept), "--env", str(root)]) == 0


@pytest.mark.parametrize(
    "name",
    [
        "parallax.testing._replay",
        "parallax.testing._freshness",
        "parallax.testing._report",
        "parallax._scaffold",
    ],
)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
