"""Checks that the finance env test files share (the sekai ports: execution, market making,
trading, portfolio); each test file keeps its tests, named for the contract they check.

Rollouts (each compiles once per env, x64 mode and action shape, as the files' own did):

- `noisy_rollout(env, key, actions)`: reset, then step through `actions` in one jitted scan
  (`env` static); returns the first state, each step's draws (`env.step_noise`) and the
  stacked states;
- `vec_noisy_rollout(vec, key, actions)`: the same for a `make_vec` stack, with each lane's
  draws (`step_noise` of the unwrapped env); the reset runs eagerly;
- `rollout_with_params(env, params, key, actions)`: `(first, states)` with per-call `params`
  (traced: new values reuse the program);
- `float32_and_x64(env, actions)`: one episode's stacked states in float32 and under x64.

Assertions:

- `assert_box_matches(mine, theirs)`, `assert_spaces_match_sekai(make_env, env_id, kwargs)`:
  a Box space (both spaces of an env) with sekai's shape, dtype and bounds;
- `assert_constructor_refuses_like_sekai(make_env, env_id, kwargs)`,
  `assert_constructor_accepts_like_sekai(make_env, env_id, kwargs, param_names, attributes)`;
- `assert_attributes_match(ours, theirs, names)`: our attributes against sekai's, by name;
- `assert_check_env_passes(env, num_steps=..., including=...)`: the `check_env` battery;
- `assert_batch_independent_under_x64(env, tolerance)`: `check_batch_independence`, 3 lanes;
- `assert_lanes_independent(env, params, keys, actions)`: the vmapped batch contract;
- `assert_float64_state(env, state, like, obs_shape)`: the dtypes of a state under x64;
- `assert_bad_actions_refused(env, state, size)`: actions of another size or dtype refused;
- `lengths_against_sekai(make_env, env_id, kwargs, sekai_kwargs, actions)`: the lengths of
  three x64 episodes run against sekai (`run_against_sekai`), seeds 0 to 2;
- `check_against_sekai_gym_reference(env, env_id, kwargs, sync, info_keys)`:
  `check_matches_reference` against sekai as a `GymReference` fed our draws by `sync`;
- `assert_matches_sekai_reference(make_env, env_id, kwargs)`: `check_matches_reference`
  against `SekaiReference`, 3 episodes of 12 steps;
- `compare_vector_step(state, out, lanes, where)`, `vector_episodes_match_sekai_native(...)`:
  a `make_vec` stack against sekai's native vector env.

Data: `FINITE` (Hypothesis floats without NaN or infinity), `PROPERTY_SETTINGS` (the property
tests' Hypothesis settings) and `CUSTOM_EXECUTION_MARKET` (the non-default execution market of
the execution and baseline tests).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sekai
from finance_support import (
    SekaiReference,
    assert_values_match,
    rollout,
    run_against_sekai,
    sekai_tolerance,
)
from hypothesis import HealthCheck, settings

import parallax
from parallax.testing import (
    GymReference,
    Tolerance,
    check_batch_independence,
    check_env,
    check_matches_reference,
)

FINITE = {"allow_nan": False, "allow_infinity": False}
PROPERTY_SETTINGS = settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

CUSTOM_EXECUTION_MARKET = {
    "initial_inventory": 5e4,
    "sigma": 0.3,
    "total_time": 1.0,
    "n_steps": 40,
    "permanent_impact": 1e-6,
    "temporary_impact": 1e-5,
    "fixed_cost": 0.01,
}


# ---------------------------------------------------------------------------- rollouts
def _steps_with_noise(
    step: Callable[..., Any], step_noise: Callable[..., Any], first: Any, actions: jax.Array
) -> tuple[Any, Any]:
    """Step `first` through `actions`; returns each step's draws and the stacked states."""

    def body(state: parallax.State, action: jax.Array) -> tuple[parallax.State, Any]:
        noise = step_noise(state)
        nxt = step(state, action)
        return nxt, (noise, nxt)

    _, (noise, states) = jax.lax.scan(body, first, actions)
    return noise, states


@functools.partial(jax.jit, static_argnums=0)
def noisy_rollout(env: Any, key: jax.Array, actions: jax.Array) -> tuple[Any, Any, Any]:
    first = env.reset(key=key)
    return (first, *_steps_with_noise(env.step, env.step_noise, first, actions))


def vec_noisy_rollout(vec: Any, key: jax.Array, actions: Any) -> tuple[Any, Any, Any]:
    lane_noise = jax.vmap(vec.unwrapped.step_noise)
    scan = jax.jit(functools.partial(_steps_with_noise, vec.step, lane_noise))
    first = vec.reset(key=key)
    return (first, *scan(first, jnp.asarray(actions)))


def rollout_with_params(
    env: Any, params: Any, key: jax.Array, actions: jax.Array
) -> tuple[parallax.State, parallax.State]:
    """`env` through `actions` with per-call `params` (traced: no retrace per value)."""

    def body(state: parallax.State, action: jax.Array) -> tuple[parallax.State, parallax.State]:
        nxt = env.step(state, action, params=params)
        return nxt, nxt

    first = env.reset(key=key, params=params)
    return first, jax.lax.scan(body, first, actions)[1]


def float32_and_x64(env: Any, actions: Any) -> list[Any]:
    """The stacked states of one episode in float32 and under x64 (same key and actions)."""
    out = []
    for x64 in (False, True):
        with jax.enable_x64(x64):
            out.append(rollout(env, jax.random.key(0), actions)[1])
    return out


def leaves(tree: Any) -> list[np.ndarray]:
    """The leaves of `tree` as NumPy arrays, typed PRNG keys as their raw data."""
    return [
        np.asarray(jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
        for x in jax.tree.leaves(tree)
    ]


# ---------------------------------------------------------------------- spaces, constructors
def assert_box_matches(mine: Any, theirs: Any) -> None:
    """The same shape, dtype and bounds (`np.array_equal`: the same shape, no NaN)."""
    assert (mine.shape, mine.dtype) == (theirs.shape, theirs.dtype)
    assert np.array_equal(mine.low, theirs.low), (mine.low, theirs.low)
    assert np.array_equal(mine.high, theirs.high), (mine.high, theirs.high)


def assert_spaces_match_sekai(
    make_env: Callable[..., Any], env_id: str, kwargs: dict[str, Any]
) -> None:
    """The observation and action spaces (both Boxes) of `make_env(**kwargs)` are those of
    sekai's `env_id` made with `kwargs`."""
    env, ref = make_env(**kwargs), sekai.make(env_id, **kwargs)
    assert_box_matches(env.observation_space, ref.observation_space)
    assert_box_matches(env.action_space, ref.action_space)


def assert_attributes_match(ours: Any, theirs: Any, names: dict[str, str]) -> None:
    """`ours.<name>` equals `theirs.<names[name]>` for every name of `names` (sekai's names)."""
    got = {name: getattr(ours, name) for name in names}
    assert got == {name: getattr(theirs, sekai_name) for name, sekai_name in names.items()}


def assert_constructor_accepts_like_sekai(
    make_env: Callable[..., Any],
    env_id: str,
    kwargs: dict[str, Any],
    param_names: dict[str, str],
    attributes: Iterable[str],
) -> None:
    """sekai makes `env_id` from `kwargs`; so does `make_env`, with sekai's values of our
    params (`param_names`: ours to sekai's names) and of the env `attributes` (same names)."""
    ref = sekai.make(env_id, **kwargs)
    env = make_env(**kwargs)
    assert_attributes_match(env.params, ref, param_names)
    assert_attributes_match(env, ref, {name: name for name in attributes})


def assert_constructor_refuses_like_sekai(
    make_env: Callable[..., Any], env_id: str, kwargs: dict[str, Any]
) -> None:
    """sekai refuses `kwargs`; so does `make_env`, with the same error type and a message
    naming the first keyword."""
    with pytest.raises((ValueError, TypeError)) as theirs:
        sekai.make(env_id, **kwargs)
    with pytest.raises(theirs.type) as ours:
        make_env(**kwargs)
    assert next(iter(kwargs)) in str(ours.value)


# ------------------------------------------------------------------------------- batteries
def assert_check_env_passes(
    env: Any, *, num_steps: int, including: Iterable[str], **options: Any
) -> None:
    """`check_env` (spaces, dtypes, flags, stable structure, eager = jit = vmap = scan, one
    compilation, determinism and key dependence) on 2 keys passes, `including` among the
    checks it reports passed."""
    report = check_env(env, num_steps=num_steps, num_keys=2, **options)
    assert set(including) <= set(report.passed), report.passed


def assert_batch_independent_under_x64(env: Any, tolerance: Any = None) -> None:
    """`check_batch_independence` under x64: each instance of `VmapWrapper(env, 3)` matches
    the same instance run alone for 8 steps (bit for bit unless `tolerance` is given)."""
    options = {} if tolerance is None else {"tolerance": tolerance}
    with jax.enable_x64(True):
        report = check_batch_independence(env, num_envs=3, num_steps=8, **options)
    assert report.stats["num_envs"] == 3


def assert_lanes_independent(env: Any, params: Any, keys: jax.Array, actions: np.ndarray) -> Any:
    """The batch contract of `rollout_with_params(env, params, key, actions)`, vmapped.

    - Lanes 0 and 2 are bit-identical whatever the other lanes hold (lanes 1 and 3 get other
      params, keys and actions), so a lane never reads its neighbours;
    - new parameter values reuse the compiled program (domain randomisation, no retrace).

    (A lane against its solo run is `check_batch_independence`'s job, see the battery test.)

    `params` leaves are NumPy arrays with a leading batch axis of 4. Returns the result of
    the first batched run, `(first, states)`.
    """
    chex.clear_trace_counter()

    @chex.assert_max_traces(n=1)  # the second batch (new values) reuses the program
    def traced(params: Any, key: jax.Array, actions: jax.Array) -> Any:
        return rollout_with_params(env, params, key, actions)

    odd = np.arange(4) % 2 == 1

    def swap(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """`y` in lanes 1 and 3, `x` in lanes 0 and 2."""
        return np.where(odd.reshape((-1,) + (1,) * (x.ndim - 1)), y, x)

    batched = jax.jit(jax.vmap(traced))
    lanes = batched(params, keys, actions)
    raw_keys = np.asarray(jax.random.key_data(keys))
    neighbours = batched(
        jax.tree.map(lambda x: swap(x, x[::-1] * 1.5), params),
        jax.random.wrap_key_data(swap(raw_keys, raw_keys[::-1])),
        swap(actions, actions[::-1] * 0.5),
    )
    for a, b in zip(leaves(lanes), leaves(neighbours)):
        np.testing.assert_array_equal(a[0::2], b[0::2])
    return lanes


def assert_float64_state(
    env: Any, state: parallax.State, like: parallax.State, obs_shape: tuple[int, ...]
) -> None:
    """A state under x64: the structure of `like`, float32 observations of `obs_shape` in
    the observation space, a float64 scalar reward, bool flags and an int32 step count."""
    assert jax.tree.structure(state) == jax.tree.structure(like)
    assert state.observation.dtype == jnp.float32 and state.observation.shape == obs_shape
    assert state.reward.dtype == jnp.float64 and state.reward.shape == ()
    assert state.termination.dtype == jnp.bool_ and state.truncation.dtype == jnp.bool_
    assert state.step_count.dtype == jnp.int32
    assert bool(env.observation_space.contains(state.observation))


def assert_bad_actions_refused(env: Any, state: parallax.State, size: int) -> None:
    """`env.step` refuses an action of `size + 1` elements and a bool one: at trace time
    (`check_actions`, on by default) and, with the check off, in the env's own conversion."""
    plural = "" if size == 1 else "s"
    wrong_size, wrong_dtype = jnp.zeros(size + 1), jnp.zeros(size, bool)
    shape_error = rf"another shape of {size} element{plural} .*got float32 \({size + 1},\)"
    with pytest.raises(ValueError, match=shape_error):
        env.step(state, wrong_size)
    with pytest.raises(TypeError, match=rf"float or integer dtype is fine\), got bool \({size},\)"):
        env.step(state, wrong_dtype)
    unchecked = copy.copy(env)
    unchecked.check_actions = False  # the env's own conversion still refuses them
    with pytest.raises(ValueError, match=f"{size} number{plural}"):
        unchecked.step(state, wrong_size)
    with pytest.raises(TypeError, match="numeric"):
        unchecked.step(state, wrong_dtype)


# ----------------------------------------------------------------------- against sekai
def lengths_against_sekai(
    make_env: Callable[..., Any],
    env_id: str,
    kwargs: dict[str, Any],
    sekai_kwargs: Callable[[dict[str, Any]], dict[str, Any]],
    actions: Callable[[Any, int], Any],
) -> list[int]:
    """Under x64, `make_env(**kwargs)` against sekai's `env_id` made with
    `sekai_kwargs(kwargs)` (`run_against_sekai`), one episode of `actions(env, seed)` per seed
    0, 1, 2: the episodes' lengths."""
    with jax.enable_x64(True):
        env = make_env(**kwargs)
        theirs = sekai.make(env_id, **sekai_kwargs(kwargs))
        return [
            run_against_sekai(env, theirs, jax.random.key(seed), actions(env, seed))
            for seed in range(3)
        ]


def check_against_sekai_gym_reference(
    env: Any,
    env_id: str,
    kwargs: dict[str, Any],
    sync: Callable[[Any, dict[str, Any]], None],
    info_keys: Iterable[str],
) -> Any:
    """`check_matches_reference` with sekai's `env_id` as a `GymReference` (reset with seed 0,
    then `sync` serves it our draws), 3 episodes of `env.n_steps` steps under the spec's rule
    (rtol 1e-9, atol 1e-12); returns the report. Call it under x64."""
    reference = GymReference(
        sekai.make(env_id, **kwargs), seed=lambda key: 0, sync=sync, info_keys=tuple(info_keys)
    )
    return check_matches_reference(
        env, reference, num_steps=env.n_steps, num_episodes=3,
        tolerance=Tolerance(rtol=1e-9, atol=1e-12),
    )  # fmt: skip


def assert_matches_sekai_reference(
    make_env: Callable[..., Any], env_id: str, kwargs: dict[str, Any]
) -> None:
    """`check_matches_reference` under x64 against sekai (`SekaiReference`, fed our draws):
    3 episodes of 12 steps from key 7, every step compared under the spec's rule."""
    with jax.enable_x64(True):
        env = make_env(**kwargs)
        reference = SekaiReference(env, sekai.make(env_id, **kwargs))
        report = check_matches_reference(
            env, reference, key=jax.random.key(7), num_steps=12, num_episodes=3,
            tolerance=sekai_tolerance(),
        )  # fmt: skip
    assert report.stats["steps_compared"] == 36


def compare_vector_step(state: Any, out: Any, lanes: int, where: str) -> int:
    """Compare one batched step with sekai's native result; returns how many lanes ended.

    sekai keeps the finished step's info at the top level and the new episode's in
    `reset_info`; ours has the new episode's info at the top level and the finished step's
    in `final_info` (both have the terminal observation in `final_observation`).
    """
    assert_values_match(state.observation, out.observations, f"{where} observation")
    assert_values_match(state.reward, out.rewards, f"{where} reward")
    assert np.array_equal(state.termination, out.terminated), where
    assert np.array_equal(state.truncation, out.truncated), where
    finished = 0
    for i in range(lanes):
        info = out.infos[i]
        ours = {k: v[i] for k, v in state.info.items() if not k.startswith("final_")}
        if out.dones[i]:
            finished += 1
            final_obs = jax.tree.map(lambda x, i=i: x[i], state.info["final_observation"])
            assert_values_match(final_obs, info["final_observation"], where)
            for name, value in state.info["final_info"].items():
                assert_values_match(value[i], info["final_info"][name], f"{where} final {name}")
            info = info["reset_info"]
        for name, value in ours.items():
            assert_values_match(value, info[name], f"{where} lane {i} info {name}")
    return finished


def vector_episodes_match_sekai_native(
    env_id: str,
    kwargs: dict[str, Any],
    actions: np.ndarray,
    limit: int,
    at_reset: Callable[[Any], Any] = lambda observation: observation,
) -> int:
    """`parallax.make_vec(env_id, lanes, max_episode_steps=limit)` against sekai's native
    vector env, under x64: `at_reset` of the reset observations match, then every step
    (`compare_vector_step`) of `actions` `(steps, lanes, ...)`. Returns how many lane
    episodes ended."""
    lanes = actions.shape[1]
    ref = sekai.make_vec(
        env_id, lanes, vectorization_mode="native", max_episode_steps=limit, **kwargs
    )
    finished = 0
    with jax.enable_x64(True):
        vec = parallax.make_vec(env_id, lanes, max_episode_steps=limit, **kwargs)
        state = vec.reset(key=jax.random.key(0))
        out = ref.reset(seed=0)
        assert_values_match(at_reset(state.observation), at_reset(out.observations), "reset")
        step = jax.jit(vec.step)
        for t, action in enumerate(actions):
            state = jax.device_get(step(state, action))
            out = ref.step(action)
            finished += compare_vector_step(state, out, lanes, f"step {t + 1}")
    ref.close()
    return finished
