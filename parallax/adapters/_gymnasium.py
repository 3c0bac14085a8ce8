"""Parallax environments for Gymnasium users (this module imports `gymnasium`).

- `GymnasiumEnv`: any Parallax environment as a `gymnasium.Env`.
- `GymnasiumVectorEnv`: any `VmapWrapper`-ed environment as a `gymnasium.vector.VectorEnv`.
- `to_gymnasium_space`: a Parallax space as the equivalent Gymnasium space.

Both exports compile the environment's `reset` and `step` with `jax.jit` once, when they
are built, and hand NumPy arrays to the caller: observations with the dtypes of the
Gymnasium observation space, rewards as floats, flags as bools, `info` as NumPy.

Seeds. `reset(seed=s)` starts from `jax.random.key(s)` (seeds of 2**32 and above are first
hashed to 32 bits with NumPy's `SeedSequence`), so a Gymnasium user and a Parallax user who
use the same seed see the same episode. `reset()` without a seed draws the key from the
env's `np_random`, which `reset(seed=s)` (or the constructor's `seed`) seeds, so a seeded
sequence of resets is reproducible, as Gymnasium's checker requires.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces as gym_spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from .._core import MARLState, State
from .._spaces import Box, Discrete, MultiBinary, MultiDiscrete, PyTreeSpace, Space
from .._wrappers.autoreset import FINAL_INFO, FINAL_OBSERVATION, AutoResetWrapper
from .._wrappers.base import is_vector_env, unwrap_layers

__all__ = ["GymnasiumEnv", "GymnasiumVectorEnv", "to_gymnasium_space"]


# -- spaces -----------------------------------------------------------------------------------
def _leaf_to_gymnasium(space: Any) -> gym_spaces.Space[Any]:
    if isinstance(space, Discrete):
        if space.shape == ():
            # Gymnasium's convention (and its checker's): scalar discrete values are int64
            return gym_spaces.Discrete(space.n, dtype=np.int64)
        return gym_spaces.MultiDiscrete(np.full(space.shape, space.n), dtype=str(space.dtype))
    if isinstance(space, Box):
        # Bounds in the space's own dtype, as Gymnasium stores them (no precision warning).
        low = np.asarray(space.low).astype(space.dtype)
        high = np.asarray(space.high).astype(space.dtype)
        dtype: Any = space.dtype.type
        return gym_spaces.Box(low, high, space.shape, dtype)
    if isinstance(space, MultiDiscrete):
        return gym_spaces.MultiDiscrete(np.asarray(space.nvec), dtype=str(space.dtype))
    if isinstance(space, MultiBinary):
        shape = space.shape
        return gym_spaces.MultiBinary(shape[0] if len(shape) == 1 else list(shape))
    if isinstance(space, PyTreeSpace):
        return _container_to_gymnasium(space.spaces)
    raise TypeError(
        "to_gymnasium_space: expected a Discrete, Box, MultiDiscrete, MultiBinary or "
        f"PyTreeSpace, got {type(space).__name__}"
    )


def _container_to_gymnasium(tree: Any) -> gym_spaces.Space[Any]:
    if isinstance(tree, dict):
        return gym_spaces.Dict({str(k): _container_to_gymnasium(v) for k, v in tree.items()})
    if isinstance(tree, tuple | list):
        return gym_spaces.Tuple(tuple(_container_to_gymnasium(v) for v in tree))
    return _leaf_to_gymnasium(tree)


def to_gymnasium_space(space: Space) -> gym_spaces.Space[Any]:
    """The Gymnasium space equivalent to a Parallax space (bounds and dtypes kept).

    Args:
        space: `Discrete` (int64 in Gymnasium, its convention; with a shape:
            `MultiDiscrete`), `Box`, `MultiDiscrete`, `MultiBinary`, or a `PyTreeSpace` of
            dicts (`Dict`) and tuples/lists (`Tuple`).

    Returns:
        The Gymnasium space.

    Raises:
        TypeError: any other space.

    Example:
        >>> from parallax import spaces
        >>> from parallax.adapters import to_gymnasium_space
        >>> to_gymnasium_space(spaces.Box(0.0, 4.0, (4,)))
        Box(0.0, 4.0, (4,), float32)
    """
    return _leaf_to_gymnasium(space)


# -- values -----------------------------------------------------------------------------------
def _to_numpy(value: Any, space: Any) -> Any:
    """A JAX observation as NumPy, following the Parallax space's containers."""
    if isinstance(space, PyTreeSpace):
        return _to_numpy(value, space.spaces)
    if isinstance(space, dict):
        return {str(k): _to_numpy(value[k], s) for k, s in space.items()}
    if isinstance(space, tuple | list):
        return tuple(_to_numpy(v, s) for v, s in zip(value, space))
    if isinstance(space, Discrete) and space.shape == ():
        return np.int64(value)  # what Gymnasium's checker expects of a Discrete value
    return np.asarray(value, dtype=_leaf_to_gymnasium(space).dtype)


def _to_jax(value: Any, space: Any) -> Any:
    """A Gymnasium action as JAX arrays in the structure and dtypes the env expects."""
    if isinstance(space, PyTreeSpace):
        return _to_jax(value, space.spaces)
    if isinstance(space, dict):
        return {k: _to_jax(value[str(k)], s) for k, s in space.items()}
    if isinstance(space, tuple | list):
        items = [_to_jax(v, s) for v, s in zip(value, space)]
        if hasattr(space, "_fields"):  # a NamedTuple of spaces
            return type(space)(*items)
        return type(space)(items)
    return jnp.asarray(value, dtype=jax.dtypes.canonicalize_dtype(np.dtype(space.dtype)))


def _info_to_numpy(info: Any) -> Any:
    return jax.tree.map(np.asarray, info)


def _seed_to_int(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be None or a non-negative int, got {seed!r}")
    seed = int(seed)
    if seed < 2**32:
        return seed
    return int(np.random.SeedSequence(seed).generate_state(1, dtype=np.uint32)[0])


def _check_options(options: Any, allowed: tuple[str, ...], owner: str) -> dict[str, Any]:
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"{owner}.reset: options must be a dict or None, got {options!r}")
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(
            f"{owner}.reset: unsupported options {unknown}; supported: {list(allowed)}"
        )
    return options


def _check_env(env: Any, owner: str) -> None:
    for name in ("reset", "step"):
        if not callable(getattr(env, name, None)):
            raise TypeError(
                f"{owner}: env must be a Parallax environment with a callable `{name}`, got "
                f"{type(env).__name__}"
            )
    for name in ("action_space", "observation_space"):
        if getattr(env, name, None) is None:
            raise TypeError(f"{owner}: env must have an `{name}`, got {type(env).__name__}")


# -- single environment -----------------------------------------------------------------------
class GymnasiumEnv(gymnasium.Env):  # type: ignore[type-arg]
    """A Parallax environment as a `gymnasium.Env` (passes Gymnasium's `check_env`).

    Gymnasium's single-environment API has no auto-reset: after `terminated` or
    `truncated`, call `reset()`. Wrap the env in `TimeLimit` for a time limit.

    Args:
        env: a single (not vectorised) Parallax environment whose states are `State`s.
        seed: optional non-negative int seeding `np_random`, which draws the keys of
            unseeded resets.

    Attributes:
        env: the Parallax environment.
        observation_space, action_space: the Gymnasium equivalents of the env's spaces.
        state: the current Parallax `State` (`None` before the first `reset`).

    Example:
        >>> from parallax import TimeLimit
        >>> from parallax.envs import GridWorld
        >>> from parallax.adapters import GymnasiumEnv
        >>> env = GymnasiumEnv(TimeLimit(GridWorld(), max_steps=10))
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> obs.dtype, type(reward), type(terminated)
        (dtype('float32'), <class 'float'>, <class 'bool'>)
    """

    metadata = {"render_modes": []}  # noqa: RUF012 (Gymnasium's own convention)

    def __init__(self, env: Any, seed: int | None = None) -> None:
        _check_env(env, "GymnasiumEnv")
        if is_vector_env(env):
            raise TypeError(
                "GymnasiumEnv: env is a vector env (it has num_envs); use GymnasiumVectorEnv"
            )
        shapes = jax.eval_shape(lambda k: env.reset(key=k), jax.random.key(0))
        if isinstance(shapes, MARLState) or not isinstance(shapes, State):
            raise TypeError(
                f"GymnasiumEnv: env must return single-agent `State`s, got {type(shapes).__name__}"
            )
        self.env = env
        self._observation_spec = env.observation_space
        self._action_spec = env.action_space
        self.observation_space = to_gymnasium_space(env.observation_space)
        self.action_space = to_gymnasium_space(env.action_space)
        self.render_mode = None
        self.state: State | None = None
        self._reset_fn: Callable[..., State] = jax.jit(lambda key: env.reset(key=key))
        self._step_fn: Callable[..., State] = jax.jit(env.step)
        if seed is not None:
            self._np_random, self._np_random_seed = gymnasium.utils.seeding.np_random(
                _seed_to_int(seed)
            )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode from `jax.random.key(seed)` (or a key drawn from `np_random`).

        Args:
            seed: optional non-negative int.
            options: must be `None` or empty (the env takes no reset options).

        Returns:
            `(observation, info)` as NumPy.
        """
        _check_options(options, (), "GymnasiumEnv")
        if seed is not None:
            seed = _seed_to_int(seed)
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(0, 2**32, dtype=np.uint64))
        self.state = self._reset_fn(jax.random.key(seed))
        return (
            _to_numpy(self.state.observation, self._observation_spec),
            _info_to_numpy(self.state.info),
        )

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Advance one step.

        Args:
            action: an element of `action_space`.

        Returns:
            `(observation, reward, terminated, truncated, info)`.
        """
        if self.state is None:
            raise gymnasium.error.ResetNeeded("GymnasiumEnv: call reset() before step()")
        self.state = self._step_fn(self.state, _to_jax(action, self._action_spec))
        state = self.state
        return (
            _to_numpy(state.observation, self._observation_spec),
            float(state.reward),
            bool(state.termination),
            bool(state.truncation),
            _info_to_numpy(state.info),
        )

    def render(self) -> None:
        """No rendering (`render_mode` is `None`)."""
        return None

    def __repr__(self) -> str:
        return f"GymnasiumEnv({self.env!r})"


# -- vector environment -----------------------------------------------------------------------
_MODES = {
    "same-step": AutoresetMode.SAME_STEP,
    "next-step": AutoresetMode.NEXT_STEP,
    "off": AutoresetMode.DISABLED,
}


def _autoreset_mode(env: Any) -> str | None:
    """The mode of the outermost `AutoResetWrapper` in the stack, or `None` if there is none."""
    for layer in unwrap_layers(env):
        if isinstance(layer, AutoResetWrapper):
            return layer.mode
    return None


def _vector_info(info: dict[str, Any], num_envs: int) -> dict[str, Any]:
    """Gymnasium's vector `info`: each key's batch plus a `_key` mask (all present)."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        out[key] = _vector_info(value, num_envs) if isinstance(value, dict) else np.asarray(value)
        out[f"_{key}"] = np.ones(num_envs, dtype=np.bool_)
    return out


def _masked_info(info: dict[str, Any], mask: np.ndarray) -> dict[str, Any]:
    """Vector `info` whose entries count only where `mask` (Gymnasium's `final_info`)."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, dict):
            out[key] = _masked_info(value, mask)
        else:
            arr = np.asarray(value)
            m = mask.reshape(mask.shape + (1,) * (arr.ndim - 1))
            out[key] = np.where(m, arr, np.zeros_like(arr))
        out[f"_{key}"] = mask.copy()
    return out


class GymnasiumVectorEnv(gymnasium.vector.VectorEnv):  # type: ignore[type-arg]
    """A `VmapWrapper`-ed Parallax environment as a `gymnasium.vector.VectorEnv`.

    Auto-reset follows Gymnasium's conventions, declared in `metadata["autoreset_mode"]`:

    - the stack has an `AutoResetWrapper` (e.g. `parallax.make_vec`): its mode is kept,
      `"same-step"` -> `AutoresetMode.SAME_STEP` (the terminal observation in
      `info["final_obs"]`, an object array with `None` where no episode ended, and the
      terminal info in `info["final_info"]`, masked by `info["_final_obs"]` /
      `info["_final_info"]`), `"next-step"` -> `NEXT_STEP`, `"off"` -> `DISABLED`;
    - otherwise an `AutoResetWrapper(mode="next-step")` is added: `NEXT_STEP`, Gymnasium's
      default (the step after an episode ends ignores its action and returns the reset
      observation with reward 0 and both flags False).

    With `DISABLED`, reset finished envs with `reset(options={"reset_mask": mask})`, which
    is `VmapWrapper`'s selective reset (also available in the other modes).

    Args:
        vector_env: a Parallax vector environment (`VmapWrapper(...)`, or wrappers over one).
        seed: optional non-negative int seeding `np_random` (keys of unseeded resets).

    Attributes:
        env: the (possibly auto-reset-wrapped) Parallax vector environment.
        num_envs: the batch size.
        single_observation_space, single_action_space: one env's Gymnasium spaces.
        observation_space, action_space: the batched spaces.
        state: the current batched Parallax `State`.

    Example:
        >>> import numpy as np
        >>> import parallax
        >>> from parallax.adapters import GymnasiumVectorEnv
        >>> envs = GymnasiumVectorEnv(parallax.make_vec("GridWorld-v0", 4, max_episode_steps=5))
        >>> envs.metadata["autoreset_mode"]
        <AutoresetMode.SAME_STEP: 'SameStep'>
        >>> obs, info = envs.reset(seed=0)
        >>> obs, rewards, terminations, truncations, info = envs.step(np.zeros(4, np.int64))
        >>> obs.shape, rewards.dtype, terminations.dtype
        ((4, 4), dtype('float32'), dtype('bool'))
    """

    def __init__(self, vector_env: Any, seed: int | None = None) -> None:
        _check_env(vector_env, "GymnasiumVectorEnv")
        if not is_vector_env(vector_env):
            raise TypeError(
                "GymnasiumVectorEnv: vector_env must be a vector env such as "
                f"VmapWrapper(env, num_envs), got {type(vector_env).__name__}; use "
                "GymnasiumEnv for a single env"
            )
        mode = _autoreset_mode(vector_env)
        if mode is None:
            vector_env = AutoResetWrapper(vector_env, mode="next-step")
            mode = "next-step"
        self._mode = mode
        self.env = vector_env
        self.num_envs = int(vector_env.num_envs)
        self._observation_spec = vector_env.observation_space
        self._action_spec = vector_env.action_space
        self.single_observation_space = to_gymnasium_space(vector_env.observation_space)
        self.single_action_space = to_gymnasium_space(vector_env.action_space)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": _MODES[mode], "render_modes": []}
        self.render_mode = None
        self.state: State | None = None
        env = vector_env
        self._reset_fn: Callable[..., State] = jax.jit(lambda key: env.reset(key=key))
        self._reset_where_fn: Callable[..., State] = jax.jit(
            lambda key, state, done: env.reset(key=key, state=state, done=done)
        )
        self._step_fn: Callable[..., State] = jax.jit(env.step)
        if seed is not None:
            self._np_random, self._np_random_seed = gymnasium.utils.seeding.np_random(
                _seed_to_int(seed)
            )

    def _draw_seed(self) -> int:
        return int(self.np_random.integers(0, 2**32, dtype=np.uint64))

    def _keys(self, seed: Any) -> Any:
        """One key (split by `VmapWrapper`) for an int seed, one per env for a list."""
        if seed is None:
            return jax.random.key(self._draw_seed())
        if isinstance(seed, list | tuple):
            if len(seed) != self.num_envs:
                raise ValueError(
                    f"GymnasiumVectorEnv.reset: a list of seeds needs num_envs={self.num_envs} "
                    f"entries, got {len(seed)}"
                )
            ints = [self._draw_seed() if s is None else _seed_to_int(s) for s in seed]
            return jax.vmap(jax.random.key)(jnp.asarray(ints, dtype=jnp.uint32))
        return jax.random.key(_seed_to_int(seed))

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env, or with `options={"reset_mask": mask}` only where `mask`.

        Args:
            seed: `None`, an int (one key, split across the envs) or a list of `num_envs`
                ints or `None`s (one key per env).
            options: `None`, or `{"reset_mask": bool array of shape (num_envs,)}`.

        Returns:
            `(observations, infos)` in Gymnasium's vector format.
        """
        options = _check_options(options, ("reset_mask",), "GymnasiumVectorEnv")
        if isinstance(seed, int | np.integer) and not isinstance(seed, bool):
            self._np_random, self._np_random_seed = gymnasium.utils.seeding.np_random(
                _seed_to_int(seed)
            )
        keys = self._keys(seed)
        if "reset_mask" in options:
            mask = np.asarray(options["reset_mask"])
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(
                    "GymnasiumVectorEnv.reset: reset_mask must be a bool array of shape "
                    f"({self.num_envs},), got {mask.dtype} {mask.shape}"
                )
            if self.state is None:
                raise gymnasium.error.ResetNeeded(
                    "GymnasiumVectorEnv: reset() without reset_mask first"
                )
            self.state = self._reset_where_fn(keys, self.state, jnp.asarray(mask))
        else:
            self.state = self._reset_fn(keys)
        info = {
            k: v for k, v in self.state.info.items() if k not in (FINAL_OBSERVATION, FINAL_INFO)
        }
        return _to_numpy(self.state.observation, self._observation_spec), _vector_info(
            info, self.num_envs
        )

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every env (auto-resetting as `metadata["autoreset_mode"]` says).

        Args:
            actions: an element of `action_space` (leading dimension `num_envs`).

        Returns:
            `(observations, rewards, terminations, truncations, infos)`; rewards float32,
            flags bool, all of shape `(num_envs,)`.
        """
        if self.state is None:
            raise gymnasium.error.ResetNeeded("GymnasiumVectorEnv: call reset() before step()")
        self.state = self._step_fn(self.state, _to_jax(actions, self._action_spec))
        state = self.state
        terminations = np.asarray(state.termination)
        truncations = np.asarray(state.truncation)
        info = dict(state.info)
        final_observation = info.pop(FINAL_OBSERVATION, None)
        final_info = info.pop(FINAL_INFO, None)
        infos = _vector_info(info, self.num_envs)
        if self._mode == "same-step" and final_observation is not None:
            done = terminations | truncations
            if done.any():
                final_obs = np.full(self.num_envs, None, dtype=object)
                for i in np.flatnonzero(done):
                    final_obs[i] = _to_numpy(
                        jax.tree.map(lambda x, i=i: x[i], final_observation),
                        self._observation_spec,
                    )
                infos["final_obs"] = final_obs
                infos["_final_obs"] = done.copy()
                infos["final_info"] = _masked_info(final_info or {}, done)
                infos["_final_info"] = done.copy()
        return (
            _to_numpy(state.observation, self._observation_spec),
            np.asarray(state.reward),
            terminations,
            truncations,
            infos,
        )

    def render(self) -> None:
        """No rendering (`render_mode` is `None`)."""
        return None

    def __repr__(self) -> str:
        return f"GymnasiumVectorEnv({self.env!r})"
