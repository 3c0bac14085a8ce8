"""PettingZooEnv: a multi-agent Parallax env as a PettingZoo `ParallelEnv`.

PettingZoo's own API and seed tests must pass on `Race-v0`; agents leave `agents` on the
step their slot becomes inactive, with the reward of that step (docs/protocol.md, timing).
"""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import re
import sys

import chex
import gymnasium
import jax.numpy as jnp
import numpy as np
import pytest

pettingzoo = pytest.importorskip("pettingzoo")
from pettingzoo.test import parallel_api_test, parallel_seed_test  # noqa: E402

import parallax  # noqa: E402
from parallax import TimeLimit, VmapWrapper, Wrapper  # noqa: E402
from parallax.adapters import PettingZooEnv, to_pettingzoo  # noqa: E402
from parallax.envs import GridWorld, Race  # noqa: E402

AGENTS = ["agent_0", "agent_1", "agent_2"]


class MaskedRace(Wrapper):
    """Race whose agent 1 may only stay (mask [1, 0]); the others may do anything."""

    def _masked(self, state):
        mask = jnp.ones((3, 2), bool).at[1, 1].set(False)
        return dataclasses.replace(
            state, agents=dataclasses.replace(state.agents, action_mask=mask)
        )

    def reset(self, *, key):
        return self._masked(self.env.reset(key=key))

    def step(self, state, action):
        return self._masked(self.env.step(state, action))


class Blink(Wrapper):
    """Race whose agent 2 is inactive on odd steps: it would come back after leaving."""

    def step(self, state, action):
        state = self.env.step(state, action)
        active = state.agents.active.at[2].set(state.step_count % 2 == 0)
        return dataclasses.replace(state, agents=dataclasses.replace(state.agents, active=active))


def test_pettingzoo_parallel_api_and_seed_tests_pass_on_race():
    env = to_pettingzoo(parallax.make("Race-v0"))
    assert isinstance(env, pettingzoo.ParallelEnv) and isinstance(env, PettingZooEnv)
    parallel_api_test(env, num_cycles=100)  # warnings are errors: none may be raised
    parallel_seed_test(lambda: to_pettingzoo(parallax.make("Race-v0")), num_cycles=100)
    parallel_api_test(to_pettingzoo(TimeLimit(MaskedRace(Race()), 15)), num_cycles=30)


def test_per_agent_spaces_are_gymnasium_spaces_and_stable():
    env = to_pettingzoo(Race())
    assert env.possible_agents == AGENTS and env.agents == []
    assert env.action_space("agent_1") == gymnasium.spaces.Discrete(2)
    assert env.observation_space("agent_2") == gymnasium.spaces.Box(0.0, 10.0, (), np.float32)
    assert env.observation_space("agent_0") is env.observation_spaces["agent_0"]
    assert env.action_space("agent_0") is env.action_space("agent_0")
    with pytest.raises(ValueError, match="unknown agent 'agent_9'; possible_agents"):
        env.action_space("agent_9")


def test_agents_leave_on_the_step_their_slot_becomes_inactive():
    race = Race()
    race.step = chex.assert_max_traces(race.step, n=1)  # every step below: one compile
    env = to_pettingzoo(race)
    chex.clear_trace_counter()  # the constructor's shape probes are not calls
    obs, infos = env.reset(seed=0)
    assert env.agents == AGENTS and set(obs) == set(infos) == set(AGENTS)
    assert obs["agent_0"].dtype == np.float32 and infos["agent_0"] == {}
    for t in range(1, 14):  # docs/protocol.md: agent 1 waits three steps and finishes last
        obs, rewards, terminated, truncated, infos = env.step(
            {a: int(a != "agent_1" or t > 3) for a in env.agents}
        )
        if t == 10:
            assert rewards == {"agent_0": 1.0, "agent_1": 0.0, "agent_2": 1.0}
            assert terminated == {"agent_0": True, "agent_1": False, "agent_2": True}
            assert not any(truncated.values()) and float(obs["agent_0"]) == 0.0  # rule 2
            assert env.agents == ["agent_1"]
    assert (rewards, terminated, truncated) == (
        {"agent_1": 1.0},
        {"agent_1": True},
        {"agent_1": False},
    )
    assert env.agents == []
    with pytest.raises(gymnasium.error.ResetNeeded, match="the episode is over"):
        env.step({})


def test_truncation_ends_every_live_agent():
    env = to_pettingzoo(TimeLimit(Race(), 5))
    env.reset(seed=1)
    for _ in range(5):
        _, _, terminated, truncated, _ = env.step({a: 0 for a in env.agents})
    assert truncated == dict.fromkeys(AGENTS, True) and not any(terminated.values())
    assert env.agents == []


def test_actions_are_checked_against_agents_and_spaces():
    env = to_pettingzoo(Race(), seed=3)
    env.reset()
    for bad in (2, -1, 1.7, np.float64(1.0)):
        with pytest.raises(
            ValueError,
            match=rf"action {re.escape(repr(bad))} of 'agent_0' is not in the action space Discrete\(2\)",
        ):
            env.step({"agent_0": bad, "agent_1": 0, "agent_2": 0})
    with pytest.raises(ValueError, match=r"no action for the live agents \['agent_2'\]"):
        env.step({"agent_0": 0, "agent_1": 0})
    for _ in range(10):
        env.step({a: int(a == "agent_0") for a in env.agents})
    assert env.agents == ["agent_1", "agent_2"]  # agent_0 finished
    with pytest.raises(ValueError, match=r"actions for agents not in agents: \['agent_0'\]"):
        env.step({"agent_0": 1, "agent_1": 0, "agent_2": 0})
    with pytest.raises(TypeError, match="actions must be a dict"):
        env.step([0, 0])


def test_action_masks_reach_the_infos():
    env = to_pettingzoo(MaskedRace(Race()))
    _, infos = env.reset(seed=0)
    assert infos["agent_1"]["action_mask"].tolist() == [1, 0]
    assert infos["agent_0"]["action_mask"].dtype == np.int8
    mask = infos["agent_1"]["action_mask"]
    assert all(env.action_space("agent_1").sample(mask) == 0 for _ in range(5))


def test_an_agent_that_returns_after_leaving_is_refused():
    env = to_pettingzoo(Blink(Race()))
    env.reset(seed=0)
    env.step(dict.fromkeys(AGENTS, 0))  # step 1: agent 2 inactive -> it left
    assert env.agents == ["agent_0", "agent_1"]
    with pytest.raises(RuntimeError, match=r"\['agent_2'\] became active again"):
        env.step({"agent_0": 0, "agent_1": 0})


def test_seeds_reset_options_and_state():
    env = to_pettingzoo(Race(), seed=5)
    first = [env.reset()[0] for _ in range(2)]
    again = to_pettingzoo(Race(), seed=5)
    assert [again.reset()[0] for _ in range(2)] == first
    env.reset(seed=0, options={"anything": 1})  # accepted and ignored
    with pytest.raises(TypeError, match="options must be a dict or None"):
        env.reset(options=3)
    with pytest.raises(ValueError, match="seed must be None or a non-negative int"):
        env.reset(seed=-1)
    with pytest.raises(NotImplementedError, match="has no global_observation"):
        env.state()


def test_refuses_single_agent_and_vector_envs():
    with pytest.raises(TypeError, match="got State; use GymnasiumEnv"):
        to_pettingzoo(GridWorld())
    with pytest.raises(TypeError, match="must be a single env, got a vector env"):
        to_pettingzoo(VmapWrapper(Race(), 2))


def test_missing_pettingzoo_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pettingzoo", None)
    monkeypatch.delitem(sys.modules, "parallax.adapters._pettingzoo")
    with pytest.raises(ImportError, match=r"needs pettingzoo.*parallax-rl\[pettingzoo\]"):
        importlib.import_module("parallax.adapters._pettingzoo")


def test_docstring_examples_run():
    from parallax.adapters import _pettingzoo

    result = doctest.testmod(_pettingzoo, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
