"""The multi-agent contract of the Race example holds through TimeLimit, AutoReset and VmapWrapper."""

import jax
import jax.numpy as jnp
import numpy as np

from parallax import MARLState, TimeLimit, VmapAutoResetWrapper, VmapWrapper
from parallax.envs import Race

N = 4


def test_race_spaces_lead_with_num_agents():
    env = Race()
    assert env.action_space.shape == (3,) and env.observation_space.shape == (3,)
    assert VmapWrapper(TimeLimit(env, 5), 2).num_agents == 3


def test_timing_contract_holds_under_time_limit_and_vmap(x64):
    """Rewards in a state pair with the active mask of the state before it."""
    env = VmapWrapper(TimeLimit(Race(), 30), N)
    state = env.reset(key=jax.random.key(0))
    # agent a advances with probability p_a, so agents finish on different steps
    keys = jax.random.split(jax.random.key(1), 30)
    probs = jnp.broadcast_to(jnp.array([0.9, 0.6, 0.4]), (N, 3))
    step = jax.jit(env.step)
    for k in keys:
        action = jax.random.bernoulli(k, probs, (N, 3)).astype(jnp.int32)
        nxt = step(state, action)
        active_before, reward = state.agents.active, nxt.agents.reward
        # a reward can only be earned by an agent active in the previous state...
        assert bool(jnp.all(jnp.where(~active_before, reward == 0.0, True)))
        # ... and is earned exactly when that agent leaves the active set
        finished_now = active_before & ~nxt.agents.active
        np.testing.assert_array_equal(reward, jnp.where(finished_now, 1.0, 0.0))
        # inactive slots observe zeros; termination is set by the env when all finished
        assert bool(jnp.all(jnp.where(~nxt.agents.active, nxt.agents.observation == 0.0, True)))
        np.testing.assert_array_equal(nxt.termination, ~nxt.agents.active.any(axis=-1))
        assert nxt.agents.reward.shape == (N, 3)
        state = jax.tree.map(lambda x: x, nxt)
        if bool(state.done.all()):
            break


def test_inactive_actions_are_ignored():
    env = Race()
    state = env.reset(key=jax.random.key(0))
    for _ in range(10):
        state = env.step(state, jnp.array([1, 0, 0]))
    assert state.agents.active.tolist() == [False, True, True]
    a = env.step(state, jnp.array([0, 1, 0]))
    b = env.step(state, jnp.array([1, 1, 0]))  # agent 0 is inactive: its action is ignored
    for x, y in zip(jax.tree.leaves(a.agents), jax.tree.leaves(b.agents)):
        np.testing.assert_array_equal(x, y)


def test_auto_reset_on_marl_keeps_the_final_agent_rewards():
    env = VmapAutoResetWrapper(TimeLimit(Race(), 50), 2)
    state = env.reset(key=jax.random.key(0))
    step = jax.jit(env.step)
    for _ in range(10):
        state = step(state, jnp.ones((2, 3), jnp.int32))
    assert isinstance(state, MARLState)
    assert state.termination.tolist() == [True, True]
    assert state.agents.reward.tolist() == [[1.0, 1.0, 1.0]] * 2  # the finishing step pays
    assert state.agents.active.all() and int(state.step_count.sum()) == 0  # already restarted
    np.testing.assert_array_equal(state.info["final_observation"], jnp.zeros((2, 3)))


def test_time_limit_truncates_marl_episodes():
    env = TimeLimit(Race(), 3)
    state = env.reset(key=jax.random.key(0))
    for _ in range(3):
        state = env.step(state, jnp.zeros(3, jnp.int32))
    assert bool(state.truncation) and not bool(state.termination)
