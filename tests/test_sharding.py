"""`parallax.shard_rollout`: the env batch split over 4 fake CPU devices gives exactly the
unsharded rollout (XLA_FLAGS=--xla_force_host_platform_device_count=4, set in conftest)."""

from __future__ import annotations

import chex
import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import parallax
from parallax import (
    NormalizeObservation,
    RecordEpisodeStatistics,
    batch_mesh,
    rollout,
    shard_batch,
    shard_rollout,
)

NUM_ENVS = 8


def _policy(key, state):
    return jax.random.randint(key, (NUM_ENVS,), 0, 4)


def test_four_fake_devices_are_visible():
    assert len(jax.devices()) == 4, "conftest sets XLA_FLAGS for 4 fake CPU devices"


def test_sharded_rollout_equals_unsharded(x64):
    env = parallax.make_vec("MaskedGridWorld-v0", NUM_ENVS, max_episode_steps=4)
    key = jax.random.key(0)
    state, traj = shard_rollout(env, _policy, key, 10)
    ref_state, ref_traj = jax.jit(rollout, static_argnums=(0, 1, 3))(env, _policy, key, 10)
    chex.assert_trees_all_equal(traj, ref_traj, strict=True)
    chex.assert_trees_all_equal(state, ref_state, strict=True)
    assert traj.reward.sharding.spec == P(None, "batch")
    assert state.observation.sharding.spec == P("batch")
    assert len(traj.reward.sharding.device_set) == 4
    assert {s.data.shape for s in traj.observation.addressable_shards} == {(10, 2, 4)}
    assert bool(traj.done.any())
    # continue from the sharded state: still equal
    state2, traj2 = shard_rollout(env, _policy, jax.random.key(1), 5, state=state)
    ref2_state, ref2 = rollout(env, _policy, jax.random.key(1), 5, state=ref_state)
    chex.assert_trees_all_equal(traj2, ref2, strict=True)
    chex.assert_trees_all_equal(state2, ref2_state, strict=True)


def test_sharded_rollout_with_shared_statistics_and_inside_jit():
    base = parallax.make_vec("GridWorld-v0", NUM_ENVS, max_episode_steps=3)
    env = NormalizeObservation(RecordEpisodeStatistics(base))
    key = jax.random.key(2)

    @jax.jit
    def sharded(k):
        return shard_rollout(env, _policy, k, 6)

    state, traj = sharded(key)
    ref_state, ref_traj = rollout(env, _policy, key, 6)
    # the batch mean becomes a cross-device all-reduce: equal up to summation order
    np.testing.assert_allclose(
        np.asarray(traj.observation), np.asarray(ref_traj.observation), rtol=1e-5, atol=1e-5
    )
    stats = state.info["observation_statistics"].statistics
    np.testing.assert_allclose(
        np.asarray(stats.mean),
        np.asarray(ref_state.info["observation_statistics"].statistics.mean),
        rtol=1e-6,
    )
    np.testing.assert_array_equal(
        np.asarray(stats.mean), np.broadcast_to(stats.mean[0], stats.mean.shape)
    )
    summary = RecordEpisodeStatistics.summary(state)
    assert (
        int(summary["num_episodes"])
        == int(RecordEpisodeStatistics.summary(ref_state)["num_episodes"])
        == 16
    )


def test_shard_batch_and_mesh():
    mesh = batch_mesh()
    assert mesh.axis_names == ("batch",) and mesh.size == 4
    env = parallax.make_vec("GridWorld-v0", NUM_ENVS)
    state = shard_batch(env.reset(key=jax.random.key(0)), mesh)
    assert state.observation.sharding.spec == P("batch")
    two = batch_mesh(jax.devices()[:2], axis_name="envs")
    _, traj = shard_rollout(env, _policy, jax.random.key(0), 3, mesh=two, axis_name="envs")
    assert len(traj.reward.sharding.device_set) == 2


def test_shard_rollout_validates_arguments():
    with pytest.raises(ValueError, match="divisible"):
        shard_rollout(parallax.make_vec("GridWorld-v0", 6), _policy, jax.random.key(0), 2)
    with pytest.raises(TypeError, match="vector env"):
        shard_rollout(parallax.make("GridWorld-v0"), _policy, jax.random.key(0), 2)
    with pytest.raises(ValueError, match="axis_name"):
        shard_rollout(
            parallax.make_vec("GridWorld-v0", 8),
            _policy,
            jax.random.key(0),
            2,
            mesh=batch_mesh(),
            axis_name="x",
        )
    with pytest.raises(ValueError, match="num_steps"):
        shard_rollout(parallax.make_vec("GridWorld-v0", 8), _policy, jax.random.key(0), 0)
    with pytest.raises(ValueError, match="devices"):
        batch_mesh([])
