"""`TimeAwareObservation`, `make_vec(..., wrappers=[...])` and the batched spaces of vector
envs, compared with sekai where sekai defines the behaviour."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import parallax
from parallax import (
    AutoResetWrapper,
    TimeAwareObservation,
    TimeLimit,
    TransformObservation,
    VmapWrapper,
    spaces,
)
from parallax.envs import GridWorld

ZERO = jnp.int32(0)


def _times(env, steps, batch=None):
    state = env.reset(key=jax.random.key(0))
    action = ZERO if batch is None else jnp.zeros(batch, jnp.int32)
    out = [np.asarray(state.observation)[..., -1]]
    for _ in range(steps):
        state = env.step(state, action)
        out.append(np.asarray(state.observation)[..., -1])
    return np.stack(out)


def test_time_is_appended_and_normalised_by_the_time_limit():
    env = TimeAwareObservation(TimeLimit(GridWorld(), 4))
    assert env.max_episode_steps == 4
    space = env.observation_space
    assert space.shape == (5,) and space.dtype == np.float32
    assert float(space.low[-1]) == 0.0 and float(space.high[-1]) == 1.0
    np.testing.assert_allclose(_times(env, 4), [0.0, 0.25, 0.5, 0.75, 1.0])
    state = env.reset(key=jax.random.key(1))
    inner = GridWorld().reset(key=jax.random.key(1))
    np.testing.assert_array_equal(state.observation[:4], inner.observation)
    assert bool(space.contains(state.observation))


def test_time_matches_sekai_time_aware_observation():
    sekai = pytest.importorskip("sekai")
    theirs_env = sekai.TimeAwareObservation(sekai.make("CartPole-v1", max_episode_steps=3))
    theirs = [float(theirs_env.reset(seed=0).observation[-1])]
    for _ in range(3):
        theirs.append(float(theirs_env.step(0).observation[-1]))
    ours = TimeAwareObservation(TimeLimit(GridWorld(), 3))
    np.testing.assert_allclose(_times(ours, 3), theirs, rtol=1e-6)
    assert ours.observation_space.shape[0] - 4 == theirs_env.observation_space.shape[0] - 4


def test_time_is_clipped_at_one_and_raw_without_normalisation():
    clipped = TimeAwareObservation(GridWorld(), max_episode_steps=2)
    np.testing.assert_allclose(_times(clipped, 3), [0.0, 0.5, 1.0, 1.0])
    raw = TimeAwareObservation(GridWorld(), normalize_time=False)
    assert raw.max_episode_steps is None and np.isinf(raw.observation_space.high[-1])
    np.testing.assert_allclose(_times(raw, 3), [0.0, 1.0, 2.0, 3.0])


def test_dict_observations_get_a_time_entry():
    box = spaces.Box(0.0, 4.0, (2,))
    space = spaces.PyTreeSpace({"pos": box, "goal": box})
    env = TransformObservation(GridWorld(), lambda o: {"pos": o[:2], "goal": o[2:]}, space)
    env = TimeAwareObservation(env, max_episode_steps=4, dict_key="clock")
    assert sorted(env.observation_space.spaces) == ["clock", "goal", "pos"]
    state = env.step(env.reset(key=jax.random.key(0)), ZERO)
    assert state.observation["clock"].shape == (1,)
    assert float(state.observation["clock"][0]) == 0.25
    with pytest.raises(KeyError, match="clock"):
        TimeAwareObservation(env, max_episode_steps=4, dict_key="clock")


def test_constructor_validates_its_arguments():
    with pytest.raises(ValueError, match="max_episode_steps"):
        TimeAwareObservation(GridWorld())
    with pytest.raises(ValueError, match="max_episode_steps"):
        TimeAwareObservation(GridWorld(), max_episode_steps=0)
    with pytest.raises(TypeError, match="normalize_time"):
        TimeAwareObservation(GridWorld(), 3, normalize_time="yes")
    square = TransformObservation(GridWorld(), lambda o: o.reshape(2, 2))
    with pytest.raises(TypeError, match="1-D Box"):
        TimeAwareObservation(square, 3)


def test_batched_env_gives_each_env_its_own_time(x64):
    single = TimeAwareObservation(TimeLimit(GridWorld(), 4))
    batched = TimeAwareObservation(VmapWrapper(TimeLimit(GridWorld(), 4), 3))
    times = _times(batched, 4, batch=3)
    assert times.shape == (5, 3)
    np.testing.assert_allclose(times, np.repeat(_times(single, 4)[:, None], 3, axis=1))
    dtype = jnp.float32
    assert batched.reset(key=jax.random.key(0)).observation.dtype == dtype


def test_terminal_observation_keeps_the_terminal_time():
    env = TimeAwareObservation(AutoResetWrapper(TimeLimit(GridWorld(), 2)))
    state = env.reset(key=jax.random.key(0))
    assert float(state.info["final_observation"][-1]) == 0.0
    state = env.step(env.step(state, ZERO), ZERO)
    assert bool(state.truncation)
    assert float(state.info["final_observation"][-1]) == 1.0
    assert float(state.observation[-1]) == 0.0  # the new episode starts at time 0


def test_selective_reset_restarts_only_the_done_envs():
    env = TimeAwareObservation(VmapWrapper(TimeLimit(GridWorld(), 4), 2))
    state = env.step(env.reset(key=jax.random.key(0)), jnp.zeros(2, jnp.int32))
    state = env.reset(key=jax.random.key(1), state=state, done=jnp.array([True, False]))
    np.testing.assert_allclose(np.asarray(state.observation)[:, -1], [0.0, 0.25])


def test_make_vec_applies_per_env_wrappers_before_vectorising():
    vec = parallax.make_vec(
        "GridWorld-v0", 4, max_episode_steps=3, wrappers=[lambda env: TimeAwareObservation(env)]
    )
    layers = [type(layer).__name__ for layer in parallax._wrappers.base.unwrap_layers(vec)]
    assert layers == [
        "VmapAutoResetWrapper",
        "VmapWrapper",
        "TimeAwareObservation",
        "TimeLimit",
        "GridWorld",
    ]
    assert vec.observation_space.shape == (5,)

    @jax.jit
    def run(key):
        policy = lambda k, s: jnp.zeros(4, jnp.int32)  # noqa: E731
        return parallax.rollout(vec, policy, key, 4)[1]

    traj = run(jax.random.key(0))
    np.testing.assert_allclose(
        np.asarray(traj.observation)[:, 0, -1], [0.0, 1 / 3, 2 / 3, 0.0], rtol=1e-6
    )
    np.testing.assert_allclose(np.asarray(traj.next_observation)[2, :, -1], 1.0)


def test_make_vec_wrappers_apply_in_order():
    seen = []

    def record(tag):
        def wrap(env):
            seen.append((tag, type(env).__name__))
            return env

        return wrap

    parallax.make_vec("GridWorld-v0", 2, max_episode_steps=5, wrappers=(record("a"), record("b")))
    assert seen == [("a", "TimeLimit"), ("b", "TimeLimit")]


@pytest.mark.parametrize(
    ("wrappers", "message"),
    [
        (TimeAwareObservation, "list of callables"),
        ([TimeAwareObservation, 3], r"wrappers\[1\]"),
        ([lambda env: 5], r"wrappers\[0\] must return an environment"),
        (7, "list of callables"),
    ],
)
def test_make_vec_validates_wrappers(wrappers, message):
    with pytest.raises(TypeError, match=message):
        parallax.make_vec("GridWorld-v0", 2, max_episode_steps=5, wrappers=wrappers)


def test_make_vec_keyword_error_lists_wrappers():
    with pytest.raises(TypeError, match="wrappers"):
        parallax.make_vec("GridWorld-v0", 2, wrapper=[TimeAwareObservation])


def test_batch_spaces_of_vector_envs():
    vec = parallax.make_vec("GridWorld-v0", 3, max_episode_steps=5)
    assert vec.batch_action_space == spaces.Discrete(4, (3,))
    assert vec.batch_observation_space.shape == (3, 4)
    state = vec.reset(key=jax.random.key(0))
    assert bool(vec.batch_observation_space.contains(state.observation))
    actions = vec.batch_action_space.sample(key=jax.random.key(1))
    assert actions.shape == (3,)
    assert vec.step(state, actions).observation.shape == (3, 4)
    plain = VmapWrapper(GridWorld(), 2)
    assert plain.batch_observation_space == spaces.Box(0.0, 4.0, (2, 4))
    assert plain.observation_space == GridWorld().observation_space  # still per env


@pytest.mark.parametrize("name", ["parallax._wrappers.time_aware", "parallax._registry"])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_float64_observations_stay_float64_under_x64(x64):
    box = spaces.Box(0.0, 4.0, (4,), jnp.float64)
    wide = jax.dtypes.canonicalize_dtype(jnp.float64)
    env = TransformObservation(GridWorld(), lambda o: o.astype(wide), box)
    env = TimeAwareObservation(env, 4)
    state = env.step(env.reset(key=jax.random.key(0)), ZERO)
    assert state.observation.dtype == (jnp.float64 if x64 else jnp.float32)
    assert float(state.observation[-1]) == 0.25
