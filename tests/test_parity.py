"""`check_training_parity`: jitted with donation, vmapped over seeds and `shard_rollout` over
the devices all give the plain jitted batched rollout, bit for bit; an env whose step reads
Python-side state fails it."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import pytest

from parallax import VmapAutoResetWrapper
from parallax.envs import GridWorld, Race
from parallax.testing import BATTERY_CHECKS, check_training_parity, run_battery


class GlobalCounter(GridWorld):
    """Broken on purpose: the reward adds how often `step` was traced (Python state)."""

    traces = 0

    def step(self, state, action):
        GlobalCounter.traces += 1
        s = super().step(state, action)
        return dataclasses.replace(s, reward=s.reward + jnp.float32(GlobalCounter.traces))


# The sizes of test_testing_star_import.py's battery on GridWorld (batch 3, 6 steps): equal
# programs, which the persistent compilation cache compiles once for both files.
NUM_ENVS, NUM_STEPS = 3, 6


def test_gridworld_trains_as_it_was_checked():
    report = check_training_parity(GridWorld(), num_envs=NUM_ENVS, num_steps=NUM_STEPS)
    assert report.passed == ["donation", "vmap_seeds", "shard_rollout"]
    assert report.stats["num_envs"] == NUM_ENVS and NUM_ENVS % report.stats["devices"] == 0


def test_battery_check_fails_on_env_reading_python_state():
    (outcome,) = run_battery(GlobalCounter, num_steps=4, batch_size=4, checks=["training_parity"])
    assert outcome.status == "fail", outcome
    assert outcome.message.startswith("check_training_parity/")
    assert "at step 1" in outcome.message and "field `trajectory.reward`" in outcome.message
    assert "not bit-identical to the plain jitted batched rollout" in outcome.message


def test_battery_check_is_last_and_covers_multi_agent_envs():
    assert BATTERY_CHECKS[-1] == "training_parity"
    (outcome,) = run_battery(
        Race, num_steps=4, batch_size=2, checks=["training_parity"], options={"deterministic": True}
    )
    assert outcome.status == "pass", outcome.message
    assert outcome.report.passed == ["donation", "vmap_seeds", "sharded_state"]


def test_a_vector_env_runs_as_it_is():
    # the training stack the first test builds from GridWorld(), given as a vector env (the
    # same programs, served by the compilation cache); num_envs=99 must be ignored
    env = VmapAutoResetWrapper(GridWorld(), NUM_ENVS)
    report = check_training_parity(env, num_envs=99, num_steps=NUM_STEPS)
    assert report.stats["num_envs"] == NUM_ENVS and NUM_ENVS % report.stats["devices"] == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_envs": 0}, "num_envs must be an int >= 1, got 0"),
        ({"num_steps": 2.0}, "num_steps must be an int >= 1, got 2.0"),
        ({"num_seeds": 1}, "num_seeds must be an int >= 2, got 1"),
    ],
)
def test_arguments_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        check_training_parity(GridWorld(), **kwargs)
