"""JaxMARLAdapter: a JaxMARL env (MPE) as a multi-agent Parallax env.

Step by step it equals JaxMARL's own `step` (same keys, same numbers), keeps the Parallax
contract and the six multi-agent rules (the battery), and goes back out through
`to_jaxmarl` unchanged.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jaxmarl = pytest.importorskip("jaxmarl")

from parallax import AutoResetWrapper, VmapAutoResetWrapper  # noqa: E402
from parallax.adapters import JaxMARLAdapter, from_jaxmarl_space, to_jaxmarl  # noqa: E402
from parallax.adapters._common import foreign_numerics  # noqa: E402
from parallax.adapters._gymnax import step_key_of  # noqa: E402
from parallax.spaces import Box, Discrete, MultiDiscrete  # noqa: E402
from parallax.testing import (  # noqa: E402
    TRANSFORM_TOLERANCE,
    check_env,
    check_marl_env,
    ulp_distance,
)

pytestmark = pytest.mark.xdist_group("adapters_jaxmarl")

SPREAD = "MPE_simple_spread_v3"


@pytest.fixture
def jaxmarl_numerics():
    """JaxMARL's own code run directly (not through the adapter) needs JAX's default
    promotion rules; the suite runs with strict ones (tests/conftest.py)."""
    with foreign_numerics():
        yield


def assert_close(got, want):
    """Equal up to XLA's rounding, the battery's rule for one computation compiled into two
    programs (`TRANSFORM_TOLERANCE`: 16 ulp or 1e-6): JaxMARL's jitted `step` and the
    adapter's step inside another jit may round an observation's last bits differently
    (a fused multiply-add in one of them). Rewards and flags are compared exactly."""
    got, want = np.asarray(got), np.asarray(want)
    close = TRANSFORM_TOLERANCE.close("observation", got, want)
    assert bool(np.all(close)), f"max {int(ulp_distance(got, want).max())} ulp apart"


@pytest.fixture(scope="module")
def spread():
    return JaxMARLAdapter(jaxmarl.make(SPREAD))


def _their_rollout(env, key, actions):
    """JaxMARL's own `reset` and `step`, with the keys the adapter derives (see
    `parallax.adapters._jaxmarl`), and its observations and rewards stacked."""
    episode_key, reset_key = jax.random.split(key)
    with foreign_numerics():
        obs, state = env.reset(jax.random.key_data(reset_key))
        out = []
        for t, action in enumerate(actions):
            k = jax.random.key_data(step_key_of(episode_key, jnp.int32(t)))
            obs, state, rewards, dones, _ = env.step(
                k, state, {a: action[i] for i, a in enumerate(env.agents)}
            )
            out.append(
                (
                    jnp.stack([obs[a] for a in env.agents]),
                    jnp.stack([rewards[a] for a in env.agents]),
                    dones["__all__"],
                )
            )
    return out


@pytest.mark.parametrize("name", [SPREAD, "MPE_simple_reference_v3"])
def test_steps_equal_jaxmarls_own(name):
    theirs = jaxmarl.make(name)
    ours = JaxMARLAdapter(theirs)
    key = jax.random.key(5)
    num = ours.action_space.shape[0]
    actions = jax.random.randint(jax.random.key(6), (theirs.max_steps + 1, num), 0, 5)
    if isinstance(ours.action_space, MultiDiscrete):
        high = jnp.asarray(ours.action_space.nvec)
        actions = jax.random.randint(
            jax.random.key(6), (theirs.max_steps + 1, *high.shape), 0, high
        )
    want = _their_rollout(theirs, key, actions)
    state = ours.reset(key=key)
    step = jax.jit(ours.step)
    for t, action in enumerate(actions):
        state = step(state, action)
        obs, reward, done = want[t]
        np.testing.assert_array_equal(state.agents.reward, reward)
        assert bool(state.done) == bool(done)
        if not bool(done):  # JaxMARL's step has replaced the last one by a reset
            assert_close(state.agents.observation, obs)
    assert bool(state.truncation) and not bool(state.termination)  # MPE ends at max_steps
    assert int(state.step_count) == theirs.max_steps + 1


def test_spaces_and_state(spread):
    assert spread.observation_space == Box(-np.inf, np.inf, (3, 18))
    assert spread.action_space == Discrete(5, (3,))
    state = spread.reset(key=jax.random.key(0))
    assert state.agents.active.tolist() == [True] * 3
    assert state.agents.reward.dtype == jnp.float32 and state.info == {}
    assert state.agents.action_mask is None  # MPE does not implement get_avail_actions
    assert spread.episode_length == 25 and repr(spread) == "JaxMARLAdapter(SimpleSpreadMPE)"
    assert from_jaxmarl_space(jaxmarl.environments.spaces.MultiDiscrete([3, 4])) == (
        MultiDiscrete(np.array([3, 4]))
    )


def test_the_adapter_keeps_the_contract_and_the_multi_agent_rules(spread):
    check_marl_env(spread, num_steps=40)
    check_env(spread, num_steps=8, num_keys=2)


def test_batched_with_autoreset(spread):
    vec = VmapAutoResetWrapper(spread, num_envs=4)
    state = vec.reset(key=jax.random.key(0))

    def body(state, key):
        state = vec.step(state, jax.random.randint(key, (4, 3), 0, 5))
        return state, state.done

    _, done = jax.jit(lambda s: jax.lax.scan(body, s, jax.random.split(jax.random.key(1), 60)))(
        state
    )
    assert int(done.sum()) == 8  # every env ended twice (26 steps each)


def test_the_round_trip_through_to_jaxmarl_equals_the_adapter(spread):
    back = to_jaxmarl(spread)
    reference = AutoResetWrapper(spread)
    key = jax.random.key(2)
    actions = jax.random.randint(jax.random.key(3), (30, 3), 0, 5)
    _, exported = back.reset(jax.random.key_data(key))
    state = reference.reset(key=key)
    for action in actions:
        obs, exported, rewards, dones, _ = back.step(
            jax.random.PRNGKey(0), exported, dict(zip(back.agents, action))
        )
        state = reference.step(state, action)
        assert_close(jnp.stack([obs[a] for a in back.agents]), state.agents.observation)
        np.testing.assert_array_equal(
            jnp.stack([rewards[a] for a in back.agents]), state.agents.reward
        )
        assert bool(dones["__all__"]) == bool(state.done)
    assert back.agents == spread.agent_names


def test_x64(x64, spread):
    state = spread.reset(key=jax.random.key(0))
    state = jax.jit(spread.step)(state, jnp.array([1, 2, 3]))
    assert state.agents.observation.dtype == jnp.float32  # the space's dtype, either way
    assert bool(jnp.isfinite(state.agents.observation).all())


def test_envs_whose_agents_differ_are_refused_by_name():
    with pytest.raises(TypeError, match=r"'adversary_0' has Box.*'agent_0' has Box"):
        JaxMARLAdapter(jaxmarl.make("MPE_simple_tag_v3"))
    with pytest.raises(TypeError, match="must be a JaxMARL MultiAgentEnv"):
        JaxMARLAdapter(object())
    with pytest.raises(TypeError, match="no Parallax equivalent"):
        from_jaxmarl_space(object())


def test_docstring_examples_run(jaxmarl_numerics):
    import doctest

    from parallax.adapters import _jaxmarl

    result = doctest.testmod(_jaxmarl, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
