"""Ladder rung 8: agents that leave and re-join keep the multi-agent timing contract.

`Relay` is a small MARL env where each of three runners sits out one leg in three and
re-joins after it; `check_marl_env` must pass on it, count the re-joins, and catch an env
that stops using an agent's actions once it has re-joined.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pytest

from parallax import Agents, MARLState, TimeLimit, VmapWrapper, spaces
from parallax.testing import Battery, CheckError, check_marl_env

N, LEG, LENGTH = 3, 2, 14


class Relay:
    """Three runners; in leg `k = step_count // 2`, runner `k % 3` rests (inactive).

    Action `Discrete(2)` per runner (rest, run; clipped); an active runner's distance grows
    by its action and it earns that as reward; observations are distances (0 when resting).
    The episode terminates after 14 steps.
    """

    num_agents = N
    action_space = spaces.stack_space(spaces.Discrete(2), N)
    observation_space = spaces.stack_space(spaces.Box(0.0, float(LENGTH), ()), N)

    def active_at(self, count):
        return jnp.arange(N) != (count // LEG) % N

    def used(self, state, action, active):
        return jnp.where(active, jnp.clip(action, 0, 1), 0).astype(jnp.float32)

    def reset(self, *, key):
        start = jax.random.randint(key, (N,), 0, 2).astype(jnp.float32)
        return self._state(start, jnp.zeros(N, jnp.float32), jnp.int32(0), key)

    def step(self, state, action):
        active = state.agents.active
        run = self.used(state, action, active)
        distance = state.env_state + run
        return self._state(distance, run, state.step_count + 1, state.key)

    def _state(self, distance, reward, count, key):
        active = self.active_at(count)
        return MARLState(
            env_state=distance,
            agents=Agents(
                observation=jnp.where(active, distance, 0.0),
                active=active,
                reward=reward,
            ),
            termination=count >= LENGTH,
            truncation=jnp.bool_(False),
            info={},
            step_count=count,
            key=key,
        )


class ForgetfulRelay(Relay):
    """Planted bug: runner 0 always runs once it has re-joined (from step 8 on), whatever
    its action (it still rests while inactive)."""

    def used(self, state, action, active):
        run = super().used(state, action, active)
        return run.at[0].set(jnp.where((state.step_count >= 8) & active[0], 1.0, run[0]))


class RewardsTheRester(Relay):
    """Planted bug: the reward pairs with the *next* active mask, so a runner re-joining
    is paid for the leg it sat out."""

    def step(self, state, action):
        out = super().step(state, action)
        bonus = (~state.agents.active & out.agents.active).astype(jnp.float32)
        agents = dataclasses.replace(out.agents, reward=out.agents.reward + bonus)
        return dataclasses.replace(out, agents=agents)


def test_relay_keeps_the_timing_contract_and_rejoins_are_counted():
    report = check_marl_env(Relay(), num_steps=LENGTH)
    assert report.stats["rejoins"] >= 3
    assert report.stats["steps_with_inactive_agents"] == LENGTH
    assert any("re-join" in note for note in report.notes)


def test_relay_under_time_limit_and_vmap():
    report = check_marl_env(VmapWrapper(TimeLimit(Relay(), 10), 2), num_steps=12)
    assert report.stats["rejoins"] >= 2


def test_actions_ignored_after_a_rejoin_are_caught():
    with pytest.raises(CheckError) as info:
        check_marl_env(ForgetfulRelay(), num_steps=LENGTH)
    error = info.value
    assert error.check == "check_marl_env/rule5_active_actions_used"
    assert error.field == "agents.active[0]"


def test_a_rejoining_agent_paid_for_the_leg_it_sat_out_is_caught():
    with pytest.raises(CheckError) as info:
        check_marl_env(RewardsTheRester(), num_steps=LENGTH)
    assert info.value.check == "check_marl_env/rule3_inactive_reward_zero"


def test_the_battery_runs_the_rejoin_rules():
    report = Battery(Relay, num_steps=LENGTH, batch_size=2).run("marl_rules")
    assert report.stats["rejoins"] >= 3
