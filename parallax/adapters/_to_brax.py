"""`to_brax`: a Parallax environment as a brax `Env`, for brax's training stack.

- `to_brax(env)`: the export; a `BraxEnv` (a subclass of `brax.envs.Env`).
- `BraxEnv`: its class, built on first use (it subclasses brax's `Env`, and importing this
  module must not import brax).
- `BraxPipelineState`: the exported state's `pipeline_state`: the Parallax `State`, the
  episode index and the key the episodes' keys derive from.

Conventions the export follows (brax's, not Parallax's):

- Actions are float vectors in `[-1, 1]` (what brax's policies emit, tanh-squashed). They
  are clipped to `[-1, 1]` and mapped affinely onto the env's `Box` action space:
  `-1 -> low`, `+1 -> high` (`BraxEnv.env_action`).
- Observations are flat float32 vectors: every leaf of the Parallax observation, raveled and
  concatenated in pytree order (dict keys sorted).
- `done` is float32 `termination | truncation`; `info["truncation"]` is float32
  `truncation`; `metrics` are the scalar numeric entries of the Parallax `info` as float32
  (nested dict keys joined with `/`).

Episode keys. brax's `AutoResetWrapper` does not reset: when an episode ends it restores the
episode's *first* state (`info["first_pipeline_state"]`, `info["first_obs"]`), so an
exported env that did nothing about it would replay the first episode's randomness forever.
The exported state therefore carries an episode index, and while that wrapper is present
`step` keeps the stored first state one episode ahead: the first step of every episode
replaces it with a fresh reset of the next episode, keyed `jax.random.fold_in(key, i)` for
episode `i >= 1` (episode 0 uses `key` itself, so `to_brax(env).reset(key)` starts exactly
where `env.reset(key=key)` does). The restored observation is that episode's own. Under
`vmap` (brax's `VmapWrapper`) the batch computes those resets only on the steps where some
env starts an episode (a batching rule, `BraxEnv._advance`), instead of on every step.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from .._core import MARLState, State
from .._spaces import Box
from .._wrappers.base import is_vector_env
from ._common import lazy_module_getattr, module_class
from ._imports import require

__all__ = ["BraxPipelineState", "to_brax"]

FIRST_STATE = "first_pipeline_state"
"""The `info` key where brax's `AutoResetWrapper` keeps the state it restores on done."""

FIRST_OBS = "first_obs"
"""The `info` key where brax's `AutoResetWrapper` keeps the observation it restores."""

BACKEND = "parallax"
"""What `BraxEnv.backend` answers (brax's physics backends are `generalized`, `mjx`, ...)."""


@jax.tree_util.register_dataclass
@dataclass
class BraxPipelineState:
    """The `pipeline_state` of an exported env's brax `State`.

    Attributes:
        state: the Parallax `State`.
        episode: int32, which episode of `key` this is (0 for the one `reset` started).
        key: the key given to `reset`; episode `i >= 1` starts from
            `env.reset(key=jax.random.fold_in(key, i))`.
    """

    state: State
    episode: Array
    key: Array


# -- checks ---------------------------------------------------------------------------------
def _check_action_space(space: Any) -> Box:
    if not isinstance(space, Box):
        raise ValueError(
            f"to_brax: env.action_space must be a Box, got {space!r}; brax has no equivalent "
            "of it (brax policies emit float vectors in [-1, 1])"
        )
    if not np.issubdtype(space.dtype, np.floating):
        raise ValueError(
            f"to_brax: env.action_space must be a float Box, got {space!r}; brax has no "
            "equivalent of integer actions"
        )
    if not space.is_bounded():
        raise ValueError(
            f"to_brax: env.action_space must be bounded, got {space!r}; brax's actions in "
            "[-1, 1] are mapped onto [low, high], so give the env finite bounds (e.g. a "
            "TransformAction wrapper)"
        )
    return space


def _is_number(dtype: Any) -> bool:
    """Whether `dtype` is a bool, integer or floating dtype (not a PRNG key)."""
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return False
    return np.dtype(dtype) == np.bool_ or np.issubdtype(np.dtype(dtype), np.number)


def _observation_size(observation: PyTree) -> int:
    leaves = jax.tree.leaves(observation)
    if not leaves:
        raise ValueError("to_brax: env's observation has no arrays to flatten")
    for leaf in leaves:
        if not _is_number(leaf.dtype):
            raise ValueError(
                "to_brax: env's observation must hold numbers (flattened to one float32 "
                f"vector for brax), got a leaf of dtype {leaf.dtype}"
            )
    return sum(math.prod(leaf.shape) for leaf in leaves)


def _metric_paths(info: PyTree, prefix: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], ...]:
    """The paths (dict keys) of the scalar numeric entries of an `info` of shapes."""
    if not isinstance(info, dict):
        return ()
    paths: list[tuple[Any, ...]] = []
    for name in sorted(info, key=str):
        value = info[name]
        if isinstance(value, dict):
            paths.extend(_metric_paths(value, (*prefix, name)))
        elif (
            isinstance(value, jax.ShapeDtypeStruct)
            and value.shape == ()
            and _is_number(value.dtype)
        ):
            paths.append((*prefix, name))
    return tuple(paths)


# -- pure helpers ---------------------------------------------------------------------------
def flatten_observation(observation: PyTree) -> Array:
    """Every leaf of `observation`, raveled, cast to float32 and concatenated (pytree order)."""
    parts = [
        jnp.ravel(jnp.asarray(leaf)).astype(jnp.float32) for leaf in jax.tree.leaves(observation)
    ]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts)


def rescale_action(action: Any, space: Box) -> Array:
    """A brax action in `[-1, 1]` (clipped first) mapped affinely onto `space`'s bounds.

    `-1 -> low`, `+1 -> high` exactly (computed as `low * (1 - t) + high * t` with
    `t = (a + 1) / 2`), reshaped to `space.shape`, in `space.dtype` (canonicalised).
    """
    dtype = jax.dtypes.canonicalize_dtype(space.dtype)
    a = jnp.reshape(jnp.asarray(action).astype(dtype), space.shape)
    t = (jnp.clip(a, -1.0, 1.0) + 1.0) * 0.5
    low = jnp.asarray(space.low, dtype)
    high = jnp.asarray(space.high, dtype)
    return low * (1.0 - t) + high * t


def _metrics(info: dict[Any, Any], paths: tuple[tuple[Any, ...], ...]) -> dict[str, Array]:
    """The entries of `info` at `paths` as float32 scalars, named by their joined keys."""
    out: dict[str, Array] = {}
    for path in paths:
        value: Any = info
        for name in path:
            value = value[name]
        out["/".join(str(name) for name in path)] = jnp.asarray(value).astype(jnp.float32)
    return out


def _where(condition: Array, x: PyTree, y: PyTree) -> PyTree:
    return jax.tree.map(lambda a, b: jnp.where(condition, a, b), x, y)


def _where_rows(condition: Array, x: PyTree, y: PyTree) -> PyTree:
    """`x` where `condition` (shape `(batch,)`) holds, else `y`, row by row of every leaf."""

    def pick(a: Array, b: Array) -> Array:
        return jnp.where(jnp.reshape(condition, (-1,) + (1,) * (jnp.ndim(a) - 1)), a, b)

    return jax.tree.map(pick, x, y)


# -- the brax class, built on first use -----------------------------------------------------
@functools.cache
def _brax_env_class() -> type:
    envs = require("brax.envs", extra="brax", needed_by="to_brax")
    brax_state = envs.State

    class BraxEnv(envs.Env):  # type: ignore[misc,name-defined]
        """A Parallax environment as a brax `Env` (see `to_brax`)."""

        def __init__(self, env: Any) -> None:
            for name in ("reset", "step"):
                if not callable(getattr(env, name, None)):
                    raise TypeError(
                        f"to_brax: env must be a Parallax environment with a callable "
                        f"`{name}`, got {type(env).__name__}"
                    )
            if is_vector_env(env):
                raise TypeError(
                    "to_brax: env is a vector env (it has num_envs); export the single env "
                    "and let brax's VmapWrapper (brax.envs.training.wrap) batch it"
                )
            self.action_space = _check_action_space(getattr(env, "action_space", None))
            shapes = jax.eval_shape(lambda k: env.reset(key=k), jax.random.PRNGKey(0))
            if isinstance(shapes, MARLState) or not isinstance(shapes, State):
                raise TypeError(
                    f"to_brax: env must return single-agent `State`s, got {type(shapes).__name__}"
                )
            self.env = env
            self.observation_space = getattr(env, "observation_space", None)
            self._observation_size = _observation_size(shapes.observation)
            self._action_size = math.prod(self.action_space.shape)
            self._metric_paths = _metric_paths(shapes.info)

        # -- brax's interface ---------------------------------------------------------------
        @property
        def observation_size(self) -> int:
            """Length of the flat float32 observation."""
            return self._observation_size

        @property
        def action_size(self) -> int:
            """Length of the action vector (the action space's size)."""
            return self._action_size

        @property
        def backend(self) -> str:
            """`"parallax"`: no brax physics pipeline runs underneath."""
            return BACKEND

        def env_action(self, action: Any) -> Array:
            """The env's action for a brax action: clipped to `[-1, 1]`, mapped onto the Box."""
            return rescale_action(action, self.action_space)

        def reset(self, rng: Any) -> Any:
            """Episode 0 of `rng`: `env.reset(key=rng)` as a brax `State`."""
            key = jnp.asarray(rng) if not isinstance(rng, jax.Array) else rng
            start = self.env.reset(key=key)
            pipeline = BraxPipelineState(state=start, episode=jnp.int32(0), key=key)
            info = {"truncation": start.truncation.astype(jnp.float32)}
            return self._brax_state(pipeline, start, jnp.float32(0.0), info)

        def step(self, state: Any, action: Any) -> Any:
            """One step of the Parallax env; a finished episode stays finished (reward 0).

            Under brax's `AutoResetWrapper` it also keeps that wrapper's stored first state
            one episode ahead (see the module docstring), so every episode is a new one.
            """
            info = dict(state.info)
            pipeline: BraxPipelineState = state.pipeline_state
            previous, episode, base_key = pipeline.state, pipeline.episode, pipeline.key
            first = info.get(FIRST_STATE)
            if isinstance(first, BraxPipelineState) and FIRST_OBS in info:
                info[FIRST_STATE], info[FIRST_OBS] = self._advance(
                    first, info[FIRST_OBS], base_key, episode
                )
            stepped = self.env.step(previous, self.env_action(action))
            ended = previous.done
            current: State = _where(ended, previous, stepped)
            reward = jnp.where(ended, jnp.zeros_like(stepped.reward), stepped.reward)
            info["truncation"] = current.truncation.astype(jnp.float32)
            pipeline = BraxPipelineState(state=current, episode=episode, key=base_key)
            # brax's wrappers add their own metrics (EvalWrapper: "reward"); keep them
            return self._brax_state(
                pipeline, current, reward.astype(jnp.float32), info, state.metrics
            )

        # -- helpers ------------------------------------------------------------------------
        def _start(self, key: Array, episode: Array) -> tuple[BraxPipelineState, Array]:
            """Episode `episode` of `key` and its flat observation."""
            episode_key = jax.random.fold_in(key, episode)
            state = self.env.reset(key=episode_key)
            return (
                BraxPipelineState(state=state, episode=episode, key=key),
                flatten_observation(state.observation),
            )

        @functools.cached_property
        def _advance(self) -> Any:
            """`(first, first_obs, key, episode) -> (first, first_obs)`, one episode ahead.

            The stored first state is replaced by episode `episode + 1` of `key` when it is
            not ahead of the running episode (on the first step of every episode). Under
            `vmap` (brax's `VmapWrapper`) a per-env `lax.cond` becomes a select that
            computes a reset for every env on every step; the batching rule below skips the
            resets batch-wide on the steps where no env starts an episode (`jnp.any`), as
            Parallax's own `VmapWrapper` does, and otherwise selects per env, so every env
            gets exactly its unbatched result. (Resetting only the envs that need it,
            gathered and scattered back, cost more than it saved on a CPU: a gather and a
            scatter per leaf of the state.)
            """

            def one(first: BraxPipelineState, first_obs: Array, key: Array, episode: Array) -> Any:
                return jax.lax.cond(
                    first.episode <= episode,
                    lambda: self._start(key, episode + 1),
                    lambda: (first, first_obs),
                )

            advance = jax.custom_batching.custom_vmap(one)

            @advance.def_vmap
            def _batched(axis_size: int, in_batched: Any, *args: Any) -> Any:
                first, first_obs, key, episode = jax.tree.map(
                    lambda x, b: x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x))),
                    args,
                    tuple(in_batched),
                )
                old = (first, first_obs)
                need = first.episode <= episode

                def all_rows() -> Any:
                    return _where_rows(need, jax.vmap(self._start)(key, episode + 1), old)

                out = jax.lax.cond(jnp.any(need), all_rows, lambda: old)
                return out, jax.tree.map(lambda _: True, out)

            def advance_without_gradient(*args: Any) -> Any:
                # custom_vmap has no reverse-mode rule; the next episode's first state is a
                # fresh reset, which no gradient flows into anyway
                return advance(*jax.lax.stop_gradient(args))

            return advance_without_gradient

        def _brax_state(
            self,
            pipeline: BraxPipelineState,
            current: State,
            reward: Array,
            info: dict[str, Any],
            metrics: dict[str, Any] | None = None,
        ) -> Any:
            metrics = {**(metrics or {}), **_metrics(current.info, self._metric_paths)}
            return brax_state(
                pipeline_state=pipeline,
                obs=flatten_observation(current.observation),
                reward=reward,
                done=current.done.astype(jnp.float32),
                metrics=metrics,
                info=info,
            )

        def __repr__(self) -> str:
            return f"to_brax({self.env!r})"

    return module_class(BraxEnv, __name__)


__getattr__ = lazy_module_getattr(__name__, "BraxEnv", _brax_env_class)


def to_brax(env: Any) -> Any:
    """A Parallax environment as a brax `Env`, ready for brax's training wrappers.

    Args:
        env: a single-agent, unbatched Parallax environment with a bounded float `Box`
            action space (any shape) and a numeric observation (any pytree; flattened).

    Returns:
        A `BraxEnv`, a subclass of `brax.envs.Env`:

        - `reset(rng) -> brax State`: `env.reset(key=rng)`; raw (`jax.random.PRNGKey`) keys,
          as brax passes them, or typed keys.
        - `step(state, action) -> brax State`: `action` in `[-1, 1]`, clipped and mapped
          affinely onto the env's `[low, high]` (`env_action(action)` shows the mapping);
          stepping a finished episode changes nothing and rewards 0.
        - `observation_size` (flat float32 length), `action_size`, `backend` (`"parallax"`).
        - The brax `State`: `obs` (flat float32), `reward` (float32), `done` (float32,
          `termination | truncation`), `metrics` (the scalar numeric `info` entries,
          float32), `info["truncation"]` (float32), `pipeline_state` (a
          `BraxPipelineState` holding the Parallax `State`).

        Episode `i` of a key starts from `env.reset(key=jax.random.fold_in(key, i))` for
        `i >= 1`, also under brax's `AutoResetWrapper` (which restores the first state of
        the episode on done; the export keeps that state one episode ahead).

    Raises:
        ImportError: brax is not installed (the message names the `brax` extra).
        ValueError: an action space that is not a bounded float `Box` (`Discrete`,
            `MultiDiscrete`, `MultiBinary`, `PyTreeSpace`, ...: brax has no equivalent), or
            an observation that is not numeric.
        TypeError: `env` is not a Parallax environment, is batched (export the single env;
            brax's `VmapWrapper` batches it) or is multi-agent.

    Note: brax's `EpisodeWrapper` (in `brax.envs.training.wrap`) recomputes
    `info["truncation"]` from its own step limit, so a truncation by the Parallax env itself
    reaches a brax trainer as a termination there; leave the time limit to brax's wrapper.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import parallax
        >>> from parallax.adapters._to_brax import to_brax
        >>> env = to_brax(parallax.make("OptimalExecution-v0", n_steps=5))
        >>> env.observation_size, env.action_size, env.backend
        (3, 1, 'parallax')
        >>> float(env.env_action(jnp.array([-1.0]))[0]), float(env.env_action(jnp.array([0.0]))[0])
        (0.0, 0.5)
        >>> state = env.reset(jax.random.PRNGKey(0))
        >>> state = env.step(state, jnp.array([0.0]))  # sells half of the inventory
        >>> float(state.pipeline_state.state.observation[0]), float(state.done)
        (0.5, 0.0)
    """
    return _brax_env_class()(env)
