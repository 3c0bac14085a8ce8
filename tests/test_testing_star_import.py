"""The star-import battery, as an environment author uses it, on GridWorld with a reference.

The fixtures below are what an author puts in `conftest.py` (they work in the test module
too); the star-import brings one test per check, each run in f32 and x64.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from parallax.envs import GridWorld
from parallax.envs._gridworld import SIZE
from parallax.testing import Tolerance
from parallax.testing.battery import *  # noqa: F403

pytest_plugins = ["pytester"]

MOVES = np.array([(0.0, 1.0), (0.0, -1.0), (1.0, 0.0), (-1.0, 0.0)], np.float32)


class GridReference:
    """Readable one-instance GridWorld; its goal is drawn with GridWorld's own jax.random call."""

    def reset(self, key, initial):
        _, goal_key = jax.random.split(key)
        self.goal = np.asarray(jax.random.randint(goal_key, (2,), 1, 5), np.float32)
        self.pos = np.zeros(2, np.float32)
        self.t = 0
        return {"observation": np.concatenate([self.pos, self.goal]), "reward": 0.0}

    def step(self, action):
        self.t += 1
        self.pos = np.clip(self.pos + MOVES[int(action)], 0.0, SIZE).astype(np.float32)
        distance = np.sqrt(np.sum(np.square(self.pos - self.goal), dtype=np.float32))
        return {
            "observation": np.concatenate([self.pos, self.goal]),
            "reward": np.exp(-distance, dtype=np.float32),
            "termination": bool((self.pos == self.goal).all()),
            "truncation": False,
            "step_count": self.t,
        }


@pytest.fixture
def env_factory():
    return GridWorld


@pytest.fixture
def reference_factory():
    return GridReference


@pytest.fixture
def reference_options():
    # XLA's exp and NumPy's differ by up to 1 ulp in float32; the rule states it once
    return {"tolerance": Tolerance(ulp=2), "num_episodes": 2}


@pytest.fixture
def num_steps():
    return 6


@pytest.fixture
def batch_size():
    return 3


BROKEN_CONFTEST = """
import dataclasses
import jax.numpy as jnp
import pytest
from parallax.envs import GridWorld


class NaNRewardGridWorld(GridWorld):
    def step(self, state, action):
        s = super().step(state, action)
        return dataclasses.replace(s, reward=s.reward * jnp.float32(jnp.nan))


@pytest.fixture
def env_factory():
    return NaNRewardGridWorld


@pytest.fixture
def num_steps():
    return 3
"""


def test_star_import_reports_a_broken_env(pytester):
    """In an author's project: the battery fails test_contract, naming check, step, field."""
    pytester.makeconftest(BROKEN_CONFTEST)
    pytester.makepyfile(test_battery="from parallax.testing.battery import *  # noqa: F403\n")
    result = pytester.runpytest_inprocess(
        "-q", "-p", "no:cacheprovider", "-k", "contract or marl_rules or matches_reference"
    )
    result.assert_outcomes(failed=2, skipped=4)
    result.stdout.fnmatch_lines(
        ["*check_env/reward failed at step 1, field `reward`: the reward must be finite*"]
    )
    assert "FAILED test_battery.py::test_contract[f32]" in result.stdout.str()
    assert "FAILED test_battery.py::test_contract[x64]" in result.stdout.str()


BROKEN_ENVS = '''
import dataclasses

import jax.numpy as jnp
import numpy as np

from parallax.envs import GridWorld

CALLS = [0]


class LeakyGridWorld(GridWorld):
    """Broken on purpose: the reward depends on a Python counter outside the state."""

    def step(self, state, action):
        CALLS[0] += 1
        s = super().step(state, action)
        return dataclasses.replace(s, reward=s.reward + jnp.float32(CALLS[0]))


class LateDrift(GridWorld):
    """Broken on purpose: from step 1 on, the reward is off by one."""

    def step(self, state, action):
        s = super().step(state, action)
        bump = jnp.where(s.step_count >= 1, jnp.float32(1.0), jnp.float32(0.0))
        return dataclasses.replace(s, reward=s.reward + bump)
'''

LEAK_TESTS = """
import pytest
from broken_envs import LeakyGridWorld
from parallax.testing.battery import *  # noqa: F403


@pytest.fixture
def env_factory():
    return LeakyGridWorld


@pytest.fixture
def num_steps():
    return 4
"""

DRIFT_TESTS = """
import pytest
from broken_envs import LateDrift
from reference import GridReference
from parallax.testing import Tolerance
from parallax.testing.battery import *  # noqa: F403


@pytest.fixture
def env_factory():
    return LateDrift


@pytest.fixture
def reference_factory():
    return GridReference


@pytest.fixture
def reference_options():
    return {"tolerance": Tolerance(ulp=2), "num_episodes": 1}


@pytest.fixture
def num_steps():
    return 4


@pytest.fixture
def trajectory_dir():
    return "trajectories"  # relative to the working directory
"""


def _written(output: str, test: str) -> str:
    """The trajectory file named in the failure message of `test`."""
    import re

    found = re.findall(
        r"trajectory written to (\S+\.npz) \(replay it: parallax replay \1\)", output
    )
    assert found, output
    (path,) = [p for p in set(found) if test in p]
    return path


def test_failing_battery_check_writes_a_trajectory_that_replays(pytester, monkeypatch, capsys):
    """A check that fails with a diverging trajectory writes it and names it; replaying the
    file (its env rebuilt from `module:qualname`) reports the first difference."""
    import inspect
    import os

    from parallax._cli import main as parallax_main
    from parallax.testing import load_trajectory, replay
    from parallax.testing.battery import TRAJECTORY_DIR_ENV

    monkeypatch.delenv(TRAJECTORY_DIR_ENV, raising=False)
    pytester.makepyfile(
        broken_envs=BROKEN_ENVS,
        reference="import jax\nimport numpy as np\nfrom parallax.envs._gridworld import SIZE\n"
        f"MOVES = np.array({MOVES.tolist()}, np.float32)\n\n" + inspect.getsource(GridReference),
        test_leak=LEAK_TESTS,
        test_drift=DRIFT_TESTS,
    )
    result = pytester.runpytest_inprocess(
        "-q", "-p", "no:cacheprovider", "-k", "(determinism or matches_reference) and f32"
    )
    # test_drift.py::test_determinism passes; test_leak.py has no reference_factory
    result.assert_outcomes(failed=2, passed=1, skipped=1)
    out = result.stdout.str()
    leak = _written(out, "test_leak.determinism.f32")
    drift = _written(out, "test_drift.matches_reference.f32")
    # default: pytest's tmp_path of the test; the `trajectory_dir` fixture: that directory
    assert os.path.isfile(leak) and "test_determinism_f32" in leak
    assert drift == str(
        pytester.path / "trajectories" / "test_drift.matches_reference.f32.trajectory.npz"
    )
    assert os.path.isfile(drift)

    monkeypatch.syspath_prepend(str(pytester.path))
    assert load_trajectory(drift).env == "broken_envs:LateDrift"
    # the reference's side of the episode, replayed on the broken env: off by one at step 1
    result_drift = replay(drift)
    assert not result_drift.identical and result_drift.first_step == 1
    (difference,) = result_drift.differences
    assert difference.field == "reward"
    assert abs(float(difference.got) - float(difference.expected) - 1.0) < 1e-3
    # the leaky env's own run: a fresh process-state gives other rewards from step 1
    assert load_trajectory(leak).env == "broken_envs:LeakyGridWorld"
    capsys.readouterr()
    assert parallax_main(["replay", leak]) == 1
    replayed = capsys.readouterr().out
    assert "differs at step 1" in replayed and "reward" in replayed

    # PARALLAX_TRAJECTORY_DIR takes precedence over the fixture and tmp_path
    chosen = pytester.path / "from_env"
    monkeypatch.setenv(TRAJECTORY_DIR_ENV, str(chosen))
    again = pytester.runpytest_inprocess(
        "-q", "-p", "no:cacheprovider", "test_drift.py", "-k", "matches_reference and f32"
    )
    again.assert_outcomes(failed=1)
    expected = chosen / "test_drift.matches_reference.f32.trajectory.npz"
    assert _written(again.stdout.str(), "test_drift.matches_reference.f32") == str(expected)
    assert not replay(str(expected)).identical
