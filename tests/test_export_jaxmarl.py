"""to_jaxmarl: a multi-agent Parallax env as a JaxMARL (0.2.0) `MultiAgentEnv`.

The export has the interface of JaxMARL's own envs (checked against MPE's), runs exactly
the episodes of `AutoResetWrapper` over the same env, maps `active` to JaxMARL's per-agent
`dones`, works under JaxMARL's own `LogWrapper`, and an IPPO trainer written in the style
of JaxMARL's baselines learns `Race-v0` through it.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jaxmarl = pytest.importorskip("jaxmarl")
from jaxmarl.environments import spaces as jaxmarl_spaces  # noqa: E402
from jaxmarl.environments.multi_agent_env import MultiAgentEnv  # noqa: E402
from jaxmarl.wrappers.baselines import LogWrapper  # noqa: E402
from jaxmarl_style import make_train  # noqa: E402

import parallax  # noqa: E402
from parallax import AutoResetWrapper, TimeLimit, VmapWrapper, Wrapper, spaces  # noqa: E402
from parallax.adapters import (  # noqa: E402
    JaxMARLEnv,
    JaxMARLExportState,
    to_jaxmarl,
    to_jaxmarl_space,
)
from parallax.adapters._common import foreign_numerics  # noqa: E402
from parallax.envs import GridWorld, Race  # noqa: E402

pytestmark = pytest.mark.xdist_group("export_jaxmarl")


# JaxMARL's own code (its MPE envs, LogWrapper) is written for JAX's default promotion
# rules; the suite runs with strict ones (tests/conftest.py), so the tests that run it
# run under `foreign_numerics`, and the export's own code is tested under strict rules.
@pytest.fixture
def jaxmarl_numerics():
    with foreign_numerics():
        yield


AGENTS = ["agent_0", "agent_1", "agent_2"]


def _actions(values):
    return dict(zip(AGENTS, jnp.asarray(values, jnp.int32)))


class RaceWithInfo(Wrapper):
    """Race with an episode-level and a per-agent info entry."""

    def _with_info(self, state):
        info = {"lead": jnp.max(state.env_state), "position": state.env_state}
        return dataclasses.replace(state, info=info)

    def reset(self, *, key):
        return self._with_info(self.env.reset(key=key))

    def step(self, state, action):
        return self._with_info(self.env.step(state, action))


# -- the interface, against JaxMARL's own envs ------------------------------------------------
def test_the_export_has_the_interface_of_jaxmarls_own_envs(jaxmarl_numerics):
    theirs = jaxmarl.make("MPE_simple_spread_v3")
    ours = to_jaxmarl(TimeLimit(parallax.make("Race-v0"), 15))
    assert isinstance(ours, MultiAgentEnv) and isinstance(ours, JaxMARLEnv)
    for env in (theirs, ours):
        assert env.agents == [f"agent_{i}" for i in range(env.num_agents)]
        assert set(env.observation_spaces) == set(env.action_spaces) == set(env.agents)
        assert isinstance(env.action_space(env.agents[0]), jaxmarl_spaces.Discrete)
        assert isinstance(env.max_steps, int) and isinstance(env.name, str)
        obs, state = env.reset(jax.random.PRNGKey(0))
        assert set(obs) == set(env.agents)
        assert state.done.shape == () and state.step.shape == ()
        actions = {a: env.action_space(a).sample(jax.random.PRNGKey(1)) for a in env.agents}
        out = env.step(jax.random.PRNGKey(2), state, actions)
        assert len(out) == 5
        obs, state, rewards, dones, infos = out
        assert set(obs) == set(rewards) == set(env.agents)
        assert set(dones) == {*env.agents, "__all__"}
        assert all(dones[a].dtype == jnp.bool_ for a in dones)
        assert isinstance(infos, dict)
        for a in env.agents:
            assert obs[a].shape == env.observation_space(a).shape
            assert rewards[a].shape == ()
    assert ours.max_steps == 15 and ours.name == "Race"
    assert ours.agent_classes == {"agent": AGENTS}
    assert isinstance(ours.reset(jax.random.PRNGKey(0))[1], JaxMARLExportState)


def test_spaces_convert_to_jaxmarls():
    assert to_jaxmarl_space(spaces.Discrete(4)).n == 4
    box = to_jaxmarl_space(spaces.Box(-1.0, 2.0, (3,)))
    assert isinstance(box, jaxmarl_spaces.Box) and box.shape == (3,)
    np.testing.assert_array_equal(box.low, [-1.0] * 3)
    multi = to_jaxmarl_space(spaces.MultiDiscrete(np.array([6, 6, 3])))
    assert isinstance(multi, jaxmarl_spaces.MultiDiscrete)
    np.testing.assert_array_equal(multi.num_categories, [6, 6, 3])
    bits = to_jaxmarl_space(spaces.MultiBinary((4,)))
    np.testing.assert_array_equal(bits.num_categories, [2, 2, 2, 2])
    tree = to_jaxmarl_space(
        spaces.PyTreeSpace({"a": spaces.Discrete(2), "b": (spaces.Box(0.0, 1.0, ()),)})
    )
    assert isinstance(tree, jaxmarl_spaces.Dict)
    assert isinstance(tree.spaces["b"], jaxmarl_spaces.Tuple)
    with pytest.raises(TypeError, match="no JaxMARL equivalent"):
        to_jaxmarl_space(spaces.MultiBinary((2, 3)))


# -- episodes ---------------------------------------------------------------------------------
def test_a_jaxmarl_rollout_runs_the_episodes_of_autoreset():
    """60 steps of random actions (three episodes of 15 and more): the export's `step` and
    Parallax's `AutoResetWrapper` over the same env agree bit for bit."""
    base = TimeLimit(parallax.make("Race-v0"), 15)
    exported, reference = to_jaxmarl(base), AutoResetWrapper(base)
    key = jax.random.key(3)
    actions = jax.random.randint(jax.random.key(4), (60, 3), 0, 2)

    def ours(carry, action):
        state = carry
        obs, state, rewards, dones, _ = exported.step(
            jax.random.PRNGKey(9), state, dict(zip(AGENTS, action))
        )
        return state, (
            jnp.stack([obs[a] for a in AGENTS]),
            jnp.stack([rewards[a] for a in AGENTS]),
            dones["__all__"],
        )

    def theirs(state, action):
        state = reference.step(state, action)
        return state, (state.agents.observation, state.agents.reward, state.done)

    _, state = exported.reset(jax.random.key_data(key))
    _, got = jax.lax.scan(ours, state, actions)
    _, want = jax.lax.scan(theirs, reference.reset(key=key), actions)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert int(got[2].sum()) >= 3  # episodes did end and restart


def test_step_ignores_jaxmarls_step_key():
    env = to_jaxmarl(parallax.make("LimitOrderBookMarket-v0"))
    _, state = env.reset(jax.random.PRNGKey(0))
    actions = {a: env.action_space(a).sample(jax.random.PRNGKey(1)) for a in env.agents}
    first = env.step(jax.random.PRNGKey(2), state, actions)
    second = env.step(jax.random.PRNGKey(7), state, actions)
    jax.tree.map(np.testing.assert_array_equal, first, second)


def test_dones_mark_the_agents_that_left_and_the_episode():
    env = to_jaxmarl(Race())
    _, state = env.reset(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    for _ in range(10):  # agent 0 runs to the finish, the others stay
        obs, state, rewards, dones, infos = step(jax.random.PRNGKey(0), state, _actions([1, 0, 0]))
    assert bool(dones["agent_0"]) and not bool(dones["agent_1"]) and not bool(dones["__all__"])
    assert float(rewards["agent_0"]) == 1.0 and float(obs["agent_0"]) == 0.0
    np.testing.assert_array_equal(infos["active"], [False, True, True])
    obs, state, rewards, dones, _ = step(jax.random.PRNGKey(0), state, _actions([1, 1, 1]))
    assert bool(dones["agent_0"]) and float(rewards["agent_0"]) == 0.0  # it left: no reward
    for _ in range(9):
        obs, state, rewards, dones, infos = step(jax.random.PRNGKey(0), state, _actions([0, 1, 1]))
    assert bool(dones["__all__"]) and all(bool(dones[a]) for a in AGENTS)
    assert [float(rewards[a]) for a in AGENTS] == [0.0, 1.0, 1.0]
    np.testing.assert_array_equal(infos["terminated"], [True] * 3)
    # JaxMARL's auto-reset: the next episode's first observations and state
    assert all(float(obs[a]) == 0.0 for a in AGENTS) and int(state.step) == 0
    assert not bool(state.done)


def test_reset_state_is_where_an_ended_episode_restarts():
    env = to_jaxmarl(TimeLimit(Race(), 2))
    _, start = env.reset(jax.random.PRNGKey(0))
    _, state, *_ = env.step(jax.random.PRNGKey(0), start, _actions([1, 1, 1]))
    marked = JaxMARLExportState(
        dataclasses.replace(
            start.parallax_state,
            agents=dataclasses.replace(
                start.parallax_state.agents, observation=jnp.full(3, 7.0, jnp.float32)
            ),
        )
    )
    obs, after, _, dones, _ = env.step(jax.random.PRNGKey(0), state, _actions([1, 1, 1]), marked)
    assert bool(dones["__all__"])
    assert [float(obs[a]) for a in AGENTS] == [7.0] * 3
    np.testing.assert_array_equal(after.parallax_state.agents.observation, [7.0] * 3)


def test_infos_hold_one_value_per_agent():
    env = to_jaxmarl(RaceWithInfo(Race()))
    _, state = env.reset(jax.random.PRNGKey(0))
    *_, infos = env.step(jax.random.PRNGKey(0), state, _actions([1, 0, 1]))
    np.testing.assert_array_equal(infos["lead"], [1.0, 1.0, 1.0])  # episode-level: repeated
    np.testing.assert_array_equal(infos["position"], [1.0, 0.0, 1.0])  # per agent: as it is
    assert set(infos) == {"lead", "position", "terminated", "truncated", "active"}
    for value in infos.values():
        assert value.shape == (3,)


def test_available_actions_are_the_env_mask_or_every_action():
    race = to_jaxmarl(Race())
    _, state = race.reset(jax.random.PRNGKey(0))
    avail = race.get_avail_actions(state)
    assert set(avail) == set(AGENTS)
    np.testing.assert_array_equal(avail["agent_1"], [True, True])
    book = to_jaxmarl(parallax.make("LimitOrderBookMarket-v0"))
    _, state = book.reset(jax.random.PRNGKey(0))
    mask = state.parallax_state.agents.action_mask
    avail = book.get_avail_actions(state)
    for i, agent in enumerate(book.agents):
        jax.tree.map(lambda m, a, i=i: np.testing.assert_array_equal(m[i], a), mask, avail[agent])


@pytest.mark.slow  # compiles the order book market batched (`make test-slow`)
def test_the_order_book_market_runs_batched_under_jit():
    env = to_jaxmarl(parallax.make("LimitOrderBookMarket-v0"))
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    obs, state = jax.vmap(env.reset)(keys)
    space = env.action_space("agent_0")
    assert isinstance(space, jaxmarl_spaces.MultiDiscrete)

    def rollout(state, key):
        actions = {
            a: jax.vmap(space.sample)(jax.random.split(jax.random.fold_in(key, i), 4))
            for i, a in enumerate(env.agents)
        }
        _, state, rewards, _, _ = jax.vmap(env.step)(keys, state, actions)
        return state, rewards["agent_0"]

    _, rewards = jax.jit(lambda s: jax.lax.scan(rollout, s, jax.random.split(keys[0], 8)))(state)
    assert rewards.shape == (8, 4) and bool(jnp.isfinite(rewards).all())
    assert obs["agent_0"]["book"].shape == (4, 5, 4)


# -- JaxMARL's own wrappers and a JaxMARL-style trainer ---------------------------------------
def test_jaxmarls_log_wrapper_records_the_episode_returns(jaxmarl_numerics):
    env = LogWrapper(to_jaxmarl(TimeLimit(parallax.make("Race-v0"), 15)))
    _, state = env.reset(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    for t in range(10):
        _, state, _, dones, info = step(jax.random.PRNGKey(t), state, _actions([1, 1, 1]))
    assert bool(dones["__all__"])  # all three finished on step 10
    np.testing.assert_array_equal(info["returned_episode"], [True] * 3)
    np.testing.assert_array_equal(info["returned_episode_returns"], [1.0] * 3)
    np.testing.assert_array_equal(info["returned_episode_lengths"], [10] * 3)


def _mean_return(env, policy, episodes=64):
    """Mean per-agent return of `policy(obs, key)` over `episodes` episodes of the
    Parallax env (no auto-reset: each runs to its end)."""

    def episode(key):
        state = env.reset(key=key)

        def body(carry, k):
            state, total = carry
            state = env.step(state, policy(state.agents.observation, k))
            return (state, total + state.agents.reward), None

        (_, total), _ = jax.lax.scan(body, (state, jnp.zeros(3)), jax.random.split(key, 15))
        return total.mean()

    return float(jax.jit(jax.vmap(episode))(jax.random.split(jax.random.key(11), episodes)).mean())


def test_ippo_in_the_style_of_jaxmarls_baselines_learns_race(jaxmarl_numerics):
    base = TimeLimit(parallax.make("Race-v0"), 15)
    network, train = make_train(LogWrapper(to_jaxmarl(base)), num_updates=30)
    params, logged = jax.jit(train)(jax.random.PRNGKey(0))

    def greedy(obs, key):
        logits, _ = network.apply(params, obs[:, None])
        return jnp.argmax(logits, axis=-1)

    def uniform(obs, key):
        return jax.random.randint(key, (3,), 0, 2)

    learned, random = _mean_return(base, greedy), _mean_return(base, uniform)
    # advancing every step finishes in 10 of the 15 steps (return 1 per agent); a uniform
    # policy finishes with probability P(Binomial(15, 1/2) >= 10) ~ 0.15
    assert random < 0.3
    assert learned >= 0.95, (learned, random)
    assert float(logged[-5:].mean()) >= 0.9  # LogWrapper's returns during training agree


# -- what the export refuses ------------------------------------------------------------------
def test_the_export_refuses_what_jaxmarl_cannot_run():
    with pytest.raises(TypeError, match="multi-agent `MARLState`s"):
        to_jaxmarl(GridWorld())
    with pytest.raises(TypeError, match="single env"):
        to_jaxmarl(VmapWrapper(Race(), 2))
    with pytest.raises(TypeError, match="AutoResetWrapper"):
        to_jaxmarl(AutoResetWrapper(Race()))
    with pytest.raises(TypeError, match="without 'reset'"):
        to_jaxmarl(object())
    env = to_jaxmarl(Race())
    _, state = env.reset(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"missing \['agent_2'\], unknown \[\]"):
        env.step(jax.random.PRNGKey(0), state, {"agent_0": 1, "agent_1": 1})
    with pytest.raises(ValueError, match=r"unknown \['agent_9'\]"):
        env.step(jax.random.PRNGKey(0), state, {**_actions([1, 1, 1]), "agent_9": 0})
    with pytest.raises(TypeError, match="dict"):
        env.step(jax.random.PRNGKey(0), state, jnp.array([1, 1, 1]))
    with pytest.raises(TypeError, match=r"Race\.step"):  # the env's own trace-time check
        env.step(jax.random.PRNGKey(0), state, dict(zip(AGENTS, jnp.ones(3))))


def test_docstring_examples_run():
    import doctest

    from parallax.adapters import _agents, _to_jaxmarl

    for module in (_to_jaxmarl, _agents):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, module.__name__
