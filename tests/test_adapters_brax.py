"""BraxAdapter against the real brax 0.14.

Reference: brax's own training wrappers, `EpisodeWrapper(VmapWrapper(env))` (the time limit
and action repeat, terminal observation intact) and `training.wrap(env, ...)` (the same plus
brax's auto-reset), driven with the raw keys the adapter documents and the same actions.
Both sides run the same brax `step` on the same inputs inside one program, so observations,
rewards and flags must match exactly.
"""

from __future__ import annotations

import brax.envs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax.envs import fast as brax_fast
from brax.envs.wrappers import training

import parallax
from parallax import TimeLimit, VmapAutoResetWrapper, VmapWrapper
from parallax.adapters import BraxAdapter
from parallax.spaces import Box
from parallax.testing import check_batch_independence, check_env

# one worker runs this file, so the compiled brax comparison (a module fixture) is computed once
pytestmark = pytest.mark.xdist_group("adapters_brax")

NUM_ENVS = 4


class FastWithMetrics(brax_fast.Fast):
    """brax's `fast` env with two metrics (brax's `fast` has none)."""

    def reset(self, rng):
        state = super().reset(rng)
        return state.replace(metrics={"speed": jnp.zeros(()), "moves": jnp.zeros((), jnp.int32)})

    def step(self, state, action):
        out = super().step(state, action)
        return out.replace(metrics={"speed": out.obs[1], "moves": state.metrics["moves"] + 1})


@pytest.fixture(scope="module")
def pendulum():
    # the generalized backend compiles fastest of brax's physics pipelines on a CPU
    with jax.numpy_dtype_promotion("standard"):
        return brax.envs.get_environment("inverted_pendulum", backend="generalized")


@pytest.fixture(scope="module")
def pendulum_run(pendulum):
    """One compiled comparison run, shared by the tests that inspect it."""
    # env 0 holds still (the pole stays up: truncation), the others push (termination)
    push = jnp.array([0.0, 1.0, -1.0, 0.5], jnp.float32)[:, None]
    actions = jnp.broadcast_to(push, (8, NUM_ENVS, 1))
    # brax's auto-reset chain is compared on `fast` only: one physics program less to compile
    return _check_against_brax(
        pendulum, episode_length=12, action_repeat=2, actions=actions, with_autoreset=False
    )


def _brax_keys(keys):
    """The raw keys the adapter hands brax for a batch of reset keys."""
    return jax.vmap(lambda k: jax.random.key_data(jax.random.split(k)[1]))(keys)


def _rollouts(env, episode_length, action_repeat, keys, actions, with_autoreset):
    """Ours, brax's EpisodeWrapper(VmapWrapper) and (if asked) brax's training.wrap, in one
    program."""
    ours = VmapWrapper(BraxAdapter(env, episode_length, action_repeat), keys.shape[0])
    episode = training.EpisodeWrapper(training.VmapWrapper(env), episode_length, action_repeat)
    auto = training.wrap(env, episode_length=episode_length, action_repeat=action_repeat)

    def run(keys, actions):
        with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
            raw = _brax_keys(keys)
            first_brax = episode.reset(raw)
            first_auto = auto.reset(raw) if with_autoreset else None
        first = ours.reset(key=keys)
        first_raw = ours.reset(key=jax.random.key_data(keys))  # raw keys: the same episodes

        def body(carry, action):
            state, brax_state, auto_state = carry
            with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
                brax_state = episode.step(brax_state, action)
                if with_autoreset:
                    auto_state = auto.step(auto_state, action)
            state = ours.step(state, action)
            return (state, brax_state, auto_state), (state, brax_state, auto_state)

        _, out = jax.lax.scan(body, (first, first_brax, first_auto), actions)
        return first, first_raw, first_brax, out

    return jax.jit(run)(keys, actions)


def _until_first_done(done):
    """Mask of the steps up to and including each env's first done (time leads)."""
    ended_before = np.cumsum(done, axis=0) - done
    return ended_before == 0


def _check_against_brax(env, episode_length, action_repeat, actions, with_autoreset=True):
    """Compare with brax step by step; returns our states and the two reset states."""
    keys = jax.random.split(jax.random.key(3), NUM_ENVS)
    first, first_raw, first_brax, (ours, theirs, auto) = _rollouts(
        env, episode_length, action_repeat, keys, actions, with_autoreset
    )
    dtype = first.observation.dtype
    np.testing.assert_array_equal(first.observation, first_brax.obs.astype(dtype))
    done = np.asarray(ours.done)
    valid = _until_first_done(done)
    brax_done = np.asarray(theirs.done) > 0
    brax_truncation = np.asarray(theirs.info["truncation"]) > 0
    np.testing.assert_array_equal(ours.observation[valid], theirs.obs.astype(dtype)[valid])
    np.testing.assert_array_equal(ours.reward[valid], theirs.reward.astype(np.float32)[valid])
    np.testing.assert_array_equal(done[valid], brax_done[valid])
    np.testing.assert_array_equal(ours.truncation[valid], brax_truncation[valid])
    np.testing.assert_array_equal(ours.termination[valid], (brax_done & ~brax_truncation)[valid])
    for name, value in theirs.metrics.items():
        np.testing.assert_array_equal(
            np.asarray(ours.info["metrics"][name])[valid], np.asarray(value)[valid]
        )
    ended = valid & done
    assert ended.any(), "the test must end some episodes"
    if with_autoreset:
        # brax's auto-reset returns the first observation where an episode ended; we keep
        # the terminal one (and agree with brax's auto-reset chain everywhere before that)
        auto_done = np.asarray(auto.done) > 0
        np.testing.assert_array_equal(auto_done[valid], done[valid])
        first_obs = np.broadcast_to(np.asarray(first_brax.obs), np.shape(auto.obs))
        np.testing.assert_array_equal(np.asarray(auto.obs)[ended], first_obs[ended])
        assert not np.array_equal(np.asarray(ours.observation)[ended], first_obs[ended])
    # reward, flags and step_count dtypes are fixed whatever x64 says; the observation has
    # the dtype brax returns (float64 under x64), which the observation space declares
    assert ours.reward.dtype == jnp.float32 and ours.step_count.dtype == jnp.int32
    assert ours.termination.dtype == ours.truncation.dtype == jnp.bool_
    assert ours.observation.dtype == first.observation.dtype == first_raw.observation.dtype
    return ours, first, first_raw


def test_fast_matches_brax_training_wrappers(x64):
    env = FastWithMetrics()
    actions = jnp.ones((7, NUM_ENVS, 1), jnp.float32)
    ours, _, _ = _check_against_brax(env, episode_length=5, action_repeat=2, actions=actions)
    # 5 env steps at 2 per agent step: the episode ends on the 3rd agent step, by truncation
    assert np.asarray(ours.truncation)[:, 0].tolist() == [False, False, True] + [True] * 4
    assert not np.asarray(ours.termination).any()
    assert np.asarray(ours.info["metrics"]["moves"])[2].tolist() == [6] * NUM_ENVS


def test_inverted_pendulum_matches_brax_training_wrappers(pendulum_run):
    ours, _, _ = pendulum_run  # compared with brax inside the fixture
    done = np.asarray(ours.done)
    first_end = np.argmax(done, axis=0)
    assert bool(ours.truncation[first_end[0], 0]) and int(ours.step_count[first_end[0], 0]) == 6
    assert all(bool(ours.termination[first_end[i], i]) for i in (1, 2))


def test_typed_and_raw_keys_work_batched(pendulum_run):
    _, typed, raw = pendulum_run  # VmapWrapper(BraxAdapter) reset with typed / raw key batches
    np.testing.assert_array_equal(typed.observation, raw.observation)
    assert (
        jax.dtypes.issubdtype(typed.key.dtype, jax.dtypes.prng_key) and raw.key.dtype == jnp.uint32
    )
    assert len({tuple(np.round(o, 6)) for o in np.asarray(typed.observation)}) == NUM_ENVS


def test_passes_the_parallax_battery():
    env = BraxAdapter(brax.envs.create("fast", episode_length=5, action_repeat=2))
    check_env(env, num_steps=8, num_keys=2, deterministic=True)  # `fast` uses no randomness
    check_batch_independence(env, num_envs=3, num_steps=8)


def test_training_wrappers_are_stripped_and_their_settings_kept():
    # brax.envs.create with batch_size: AutoReset(Vmap(Episode(env))); parallax-rl 0.4.0
    # stopped at the VmapWrapper and fell back to episode_length=1000, action_repeat=1
    created = BraxAdapter(brax.envs.create("fast", episode_length=7, action_repeat=3, batch_size=2))
    assert (created.episode_length, created.action_repeat) == (7, 3)
    assert type(created.env) is brax_fast.Fast
    wrapped = BraxAdapter(training.wrap(brax_fast.Fast(), episode_length=9, action_repeat=2))
    assert (wrapped.episode_length, wrapped.action_repeat) == (9, 2)
    assert type(wrapped.env) is brax_fast.Fast
    override = BraxAdapter(brax.envs.create("fast", episode_length=7), episode_length=3)
    assert (override.episode_length, override.action_repeat) == (3, 1)


def test_plain_env_has_no_hidden_time_limit():
    env = BraxAdapter(brax_fast.Fast())
    assert (env.episode_length, env.action_repeat) == (None, 1)
    state = env.reset(key=jax.random.key(0))
    step = jax.jit(env.step)
    for _ in range(12):
        state = step(state, jnp.ones(1))
        assert not bool(state.done)
    limited = TimeLimit(env, 12)
    assert bool(jax.jit(limited.step)(state, jnp.ones(1)).truncation)


def test_spaces_and_protocol():
    env = BraxAdapter(FastWithMetrics())
    assert isinstance(env, parallax.Env)
    assert env.action_space == Box(-1.0, 1.0, (1,))
    assert env.observation_space == Box(-np.inf, np.inf, (2,), np.float32)
    state = env.reset(key=jax.random.key(0))
    assert set(state.info) == {"metrics"} and set(state.info["metrics"]) == {"speed", "moves"}
    stepped = env.step(state, jnp.ones(1))
    assert jax.tree.structure(stepped) == jax.tree.structure(state)
    sig = lambda s: jax.tree.map(lambda x: (jnp.shape(x), jnp.result_type(x)), s)  # noqa: E731
    assert sig(stepped) == sig(state)
    dict_obs = BraxAdapter(brax_fast.Fast(obs_mode="dict_state", asymmetric_obs=True))
    assert dict_obs.observation_space.shape == {"privileged_state": (4,), "state": (2,)}
    s = dict_obs.reset(key=jax.random.key(0))
    assert bool(dict_obs.observation_space.contains(s.observation))


def test_autoreset_wrapper_keeps_terminal_observation():
    env = VmapAutoResetWrapper(BraxAdapter(brax.envs.create("fast", episode_length=2)), 2)
    state = env.reset(key=jax.random.key(0))
    step = jax.jit(env.step)
    state = step(step(state, jnp.ones((2, 1))), jnp.ones((2, 1)))
    assert np.asarray(state.truncation).all() and np.asarray(state.step_count).tolist() == [0, 0]
    final = np.asarray(parallax.final_observation(state))
    assert (final[:, 0] > 0).all() and (np.asarray(state.observation) == 0).all()


def test_constructor_checks_its_arguments():
    with pytest.raises(TypeError, match=r"env must be a brax Env.*got GridWorld"):
        BraxAdapter(parallax.make("GridWorld-v0"))
    with pytest.raises(ValueError, match=r"episode_length must be a positive int.*got 0"):
        BraxAdapter(brax_fast.Fast(), episode_length=0)
    with pytest.raises(TypeError, match=r"action_repeat must be a positive int.*got 1.5"):
        BraxAdapter(brax_fast.Fast(), action_repeat=1.5)
    with pytest.raises(TypeError, match=r"episode_length must be a positive int.*got True"):
        BraxAdapter(brax_fast.Fast(), episode_length=True)

    class Custom(brax.envs.Wrapper):
        pass

    with pytest.raises(ValueError, match="cannot remove EpisodeWrapper from below Custom"):
        BraxAdapter(Custom(training.EpisodeWrapper(brax_fast.Fast(), 5, 1)))
    with pytest.raises(ValueError, match="two EpisodeWrappers"):
        BraxAdapter(training.EpisodeWrapper(training.EpisodeWrapper(brax_fast.Fast(), 5, 1), 5, 1))


def test_registry_namespace():
    from parallax.adapters import _registry

    assert {"fast", "ant", "inverted_pendulum"} <= set(_registry.brax_names())
    env = parallax.make("brax/fast", episode_length=3, action_repeat=2)
    assert isinstance(env, BraxAdapter) and (env.episode_length, env.action_repeat) == (3, 2)


def test_docstring_examples_run():
    import doctest

    from parallax.adapters import _brax, _registry

    for module in (
        _brax,
        _registry,
    ):
        result = doctest.testmod(
            module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        )
        assert result.attempted > 0 and result.failed == 0, module.__name__
