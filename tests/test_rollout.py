"""`parallax.rollout`: the trajectory matches a step-by-step loop, with true terminal
observations, for single and vector envs, with and without auto-reset, inside `jit`."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import parallax
from parallax import AutoResetWrapper, TimeLimit, Trajectory, VmapWrapper, rollout
from parallax.envs import GridWorld, MaskedState


def _cycle_policy(key, state):
    """Deterministic: right, right, up, ... from the step count (batched or not); the first
    two positions, (1, 0) and (2, 0), are never a goal (goals have y >= 1)."""
    return jnp.where(state.step_count % 3 == 2, 0, 2).astype(jnp.int32)


def _manual(env, state, num_steps):
    """The reference: a Python loop of `env.step` collecting the same fields."""
    rows = []
    step = jax.jit(env.step)
    for _ in range(num_steps):
        action = _cycle_policy(None, state)
        nxt = step(state, action)
        rows.append(
            {
                "observation": state.observation,
                "action": action,
                "reward": nxt.reward,
                "termination": nxt.termination,
                "truncation": nxt.truncation,
                "next_observation": parallax.final_observation(nxt),
            }
        )
        state = nxt
    return state, {k: np.stack([np.asarray(r[k]) for r in rows]) for k in rows[0]}


@pytest.mark.parametrize(
    ("vector", "x64"),
    [(False, False), (True, False), (True, True)],
    ids=["single", "vector", "vector-x64"],
)
def test_rollout_matches_a_step_loop_with_true_terminal_observations(vector, x64):
    with jax.enable_x64(x64):
        _check_rollout_matches_a_step_loop(vector)


def _check_rollout_matches_a_step_loop(vector):
    env = AutoResetWrapper(TimeLimit(GridWorld(), 3))
    if vector:
        env = VmapWrapper(env, 4)
    state = env.reset(key=jax.random.key(0))
    final, traj = jax.jit(rollout, static_argnums=(0, 1, 3))(
        env, _cycle_policy, jax.random.key(1), 7, state=state
    )
    ref_final, ref = _manual(env, state, 7)
    assert isinstance(traj, Trajectory)
    for name, expected in ref.items():
        np.testing.assert_array_equal(np.asarray(getattr(traj, name)), expected, err_msg=name)
    np.testing.assert_array_equal(np.asarray(final.observation), np.asarray(ref_final.observation))
    batch = (4,) if vector else ()
    assert traj.observation.shape == (7, *batch, 4)
    assert traj.reward.shape == (7, *batch) and traj.reward.dtype == jnp.float32
    # episodes end at t = 2 and 5: the next row starts a fresh episode at the origin, while
    # next_observation holds the true terminal position (after right, right, up)
    done = np.asarray(traj.done).reshape(7, -1)
    assert done[:, 0].tolist() == [False, False, True, False, False, True, False]
    terminal = np.asarray(traj.next_observation).reshape(7, -1, 4)[2, :, :2]
    np.testing.assert_array_equal(terminal, np.tile([2.0, 1.0], (terminal.shape[0], 1)))
    nxt = np.asarray(traj.observation).reshape(7, -1, 4)[3, :, :2]
    np.testing.assert_array_equal(nxt, np.zeros_like(nxt))
    # where no episode ended, next_observation is the following observation
    same = ~done[:-1, 0]
    obs = np.asarray(traj.observation).reshape(7, -1, 4)
    nobs = np.asarray(traj.next_observation).reshape(7, -1, 4)
    np.testing.assert_array_equal(nobs[:-1][same], obs[1:][same])
    assert "final_observation" not in traj.info and "final_info" in traj.info


def test_rollout_without_autoreset_and_continuation():
    env = VmapWrapper(TimeLimit(GridWorld(), 2), 3)
    state, traj = rollout(env, _cycle_policy, jax.random.key(0), 2)
    assert traj.truncation[-1].tolist() == [True, True, True]
    np.testing.assert_array_equal(
        np.asarray(traj.next_observation[-1]), np.asarray(state.observation)
    )
    assert traj.info == {}
    again, _ = rollout(env, _cycle_policy, jax.random.key(0), 2, state=state)
    assert again.step_count.tolist() == [4, 4, 4]  # continued, not reset


def test_rollout_resets_with_the_key_and_is_reproducible():
    env = parallax.make_vec("GridWorld-v0", 4, max_episode_steps=5)

    def policy(key, state):
        return jax.random.randint(key, (4,), 0, 4)

    run = jax.jit(lambda key: rollout(env, policy, key, 6)[1])
    a, b, c = run(jax.random.key(3)), run(jax.random.key(3)), run(jax.random.key(4))
    chex.assert_trees_all_equal(a, b, strict=True)
    assert not bool(jnp.all(a.action == c.action))


def test_rollout_policy_sees_the_state_and_aux_is_stacked():
    env = parallax.make_vec("MaskedGridWorld-v0", 5, max_episode_steps=4)

    def masked_policy(key, state: MaskedState):
        logits = jnp.where(state.action_mask, 0.0, -jnp.inf)
        action = jax.random.categorical(key, logits).astype(jnp.int32)
        return action, {"legal": jnp.take_along_axis(state.action_mask, action[:, None], 1)[:, 0]}

    _, traj = jax.jit(rollout, static_argnums=(0, 1, 3), static_argnames=("has_aux", "keep_info"))(
        env, masked_policy, jax.random.key(0), 12, has_aux=True, keep_info=False
    )
    assert traj.aux["legal"].shape == (12, 5)
    assert bool(traj.aux["legal"].all())
    assert traj.info == {}


def test_rollout_inside_a_jitted_training_step():
    env = parallax.make_vec("GridWorld-v0", 4, max_episode_steps=5)

    @jax.jit
    def train_step(weights, key):
        def policy(k, state):
            logits = state.observation @ weights
            return jax.random.categorical(k, logits).astype(jnp.int32)

        _, traj = rollout(env, policy, key, 8)
        return jnp.mean(traj.reward)

    value = train_step(jnp.zeros((4, 4), jnp.float32), jax.random.key(0))
    assert value.shape == () and 0.0 < float(value) < 1.0


def test_rollout_validates_arguments():
    env = GridWorld()
    with pytest.raises(ValueError, match="num_steps"):
        rollout(env, _cycle_policy, jax.random.key(0), 0)
    with pytest.raises(TypeError, match="num_steps"):
        rollout(env, _cycle_policy, jax.random.key(0), 2.5)
    with pytest.raises(TypeError, match="policy"):
        rollout(env, None, jax.random.key(0), 3)


@pytest.mark.parametrize(
    "module",
    [
        "parallax._rollout",
        "parallax._sharding",
        "parallax._wrappers.stats",
        "parallax._wrappers.normalize",
        "parallax._wrappers.transform",
    ],
)
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result
