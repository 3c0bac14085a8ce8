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
