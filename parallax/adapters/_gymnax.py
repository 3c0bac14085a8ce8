"""`GymnaxAdapter`: a gymnax (>= 1.0.1) environment as a Parallax environment.

- `GymnaxAdapter`: the adapter.
- `GymnaxEnvState`: its `env_state`, gymnax's own state plus the `params` of the episode.
- `from_gymnax_space`: convert a gymnax space (Discrete, Box, Dict, Tuple) to a Parallax one.

How a step is computed. gymnax's public `env.step(k, state, action, params)` splits `k`
into a step key and a reset key, calls `step_env` with the step key, and replaces the
outcome by a fresh reset when the episode ended (auto-reset). The adapter computes the same
transition without the auto-reset: with `k = jax.random.fold_in(state.key, t | 2**31)` (`t`
the step count as uint32) it calls `step_env(jax.random.split(k)[0], ...)`, exactly the call gymnax's `step(k, ...)`
makes, and returns its outcome as is, so the observation of the last step is the true
terminal one. Restarting episodes is the job of `AutoResetWrapper`.

Keys. `state.key` is the episode's key: `reset(key=key)` keeps `jax.random.split(key)[0]`
and gives gymnax `jax.random.split(key)[1]`; no step changes it. Step `t` derives its key
from `(state.key, t)` with one `fold_in`, as Parallax's own environments derive their draws
from the episode key and the step. The top bit of the folded-in word is set, so no step key
can equal the next episode's key, which `AutoResetWrapper` folds in from the same episode
key with a small constant. No key is split and carried per step, so a deterministic
env (CartPole, Acrobot, ...), whose `step_env` ignores its key, computes no random numbers
at all: XLA removes the unused derivation.

Termination and truncation. In gymnax 1.0.1 `step_env` returns the natural termination
(`is_terminal` is an alias of `is_terminated` and no longer includes the time limit) and
`is_truncated(state, params)` is the time limit `state.time >= params.max_steps_in_episode`.
The adapter reports

- `termination` = `step_env`'s terminated flag;
- `truncation` = `is_truncated(next_state, params) & ~termination`: the time limit was
  reached and the step did not end the MDP on its own. gymnax's `step` returns both flags
  True on a step that does both; Parallax reports it as a termination only, because a value
  target must not bootstrap there. This matters for one built-in env: DeepSea-bsuite always
  reaches its bottom row at `time == size == max_steps_in_episode`, which gymnax reports as
  terminated *and* truncated, the adapter as terminated.

gymnax's `step` also keeps DeepSea's cumulative bsuite metrics (`total_bad_episodes`,
`denoised_return`) across its auto-reset; a fresh `reset` starts them at zero.

Params. gymnax keeps numeric parameters in an `EnvParams` pytree. The adapter keeps the
episode's params in the state (`state.env_state.params`), so a batch of environments can
carry a batch of params (domain randomisation) through `jit`, `vmap`, `VmapWrapper.step` and
`lax.scan` without a retrace: `reset(key=k, params=p)` starts an episode with `p`, every
`step` uses the params stored in the state. A reset that does not pass `params` (for
example the auto-reset of `AutoResetWrapper`, or `VmapWrapper`'s selective reset) uses the
adapter's `params`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PyTree

from .._action_check import check_action
from .._core import KeyArray, State
from .._spaces import Box, Discrete, PyTreeSpace, Space
from .._validate import check_key
from ._common import cast_to_space, foreign_numerics, like, strong
from ._imports import require

__all__ = ["GymnaxAdapter", "GymnaxEnvState", "from_gymnax_space"]


_STEP_BIT = np.uint32(1 << 31)


def step_key_of(episode_key: Any, step_count: Any) -> Any:
    """The `k` of gymnax's `step(k, ...)` at step `step_count` of the episode keyed `episode_key`.

    `fold_in(episode_key, t | 2**31)`: the top bit keeps every step key apart from the
    next-episode key `AutoResetWrapper` derives from the same episode key (a `fold_in` of a
    small constant).
    """
    data = jnp.asarray(step_count).astype(jnp.uint32) | _STEP_BIT
    return jax.random.fold_in(episode_key, data)


def _gymnax(needed_by: str = "GymnaxAdapter") -> Any:
    return require("gymnax", extra="gymnax", needed_by=needed_by)


@jax.tree_util.register_dataclass
@dataclass
class GymnaxEnvState:
    """The `env_state` of a `GymnaxAdapter`: gymnax's state and the episode's params."""

    gymnax_state: PyTree
    """gymnax's own `EnvState` (its `time` is the step count)."""

    params: PyTree
    """gymnax's `EnvParams` used by this episode (a pytree, batched under `vmap`)."""


def from_gymnax_space(space: Any) -> Space:
    """Convert a gymnax space to the equivalent Parallax space, keeping bounds and dtypes.

    Args:
        space: a gymnax `Discrete`, `Box`, `Dict` or `Tuple` space (nested freely).

    Returns:
        `Discrete(n, dtype=...)`, `Box(low, high, shape, dtype)` with the per-dimension
        bounds, or one `PyTreeSpace` whose tree nests dicts (for `Dict`) and tuples (for
        `Tuple`) like the gymnax space.

    Raises:
        TypeError: for any other space, or a `Box` whose dtype is neither float nor int.
        ValueError: for a `Discrete` space with no element.

    Example:
        >>> import gymnax
        >>> from parallax.adapters import from_gymnax_space
        >>> env, params = gymnax.make("Acrobot-v1")
        >>> space = from_gymnax_space(env.observation_space(params))
        >>> space.shape, space.high.round(2).tolist()
        ((6,), [1.0, 1.0, 1.0, 1.0, 12.57, 28.27])
    """
    tree = _convert(space, _gymnax("from_gymnax_space").environments.spaces)
    return tree if isinstance(tree, Space) else PyTreeSpace(tree)


def _convert(space: Any, spaces: Any) -> Any:
    """A leaf Parallax space, or a dict / tuple of them for gymnax's `Dict` / `Tuple`."""
    if isinstance(space, spaces.Discrete):
        n = int(space.n)
        if n < 1:
            raise ValueError(f"from_gymnax_space: Discrete space has n={n}, needs n >= 1")
        return Discrete(n, dtype=np.dtype(space.dtype))
    if isinstance(space, spaces.Box):
        shape = (space.shape,) if isinstance(space.shape, int) else tuple(space.shape)
        dtype = np.dtype(space.dtype)
        if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)):
            raise TypeError(
                f"from_gymnax_space: Box dtype must be a float or integer dtype, got {dtype}"
            )
        low = np.broadcast_to(np.asarray(space.low, dtype=np.float64), shape)
        high = np.broadcast_to(np.asarray(space.high, dtype=np.float64), shape)
        return Box(low, high, shape, dtype)
    if isinstance(space, spaces.Dict):
        return {str(k): _convert(v, spaces) for k, v in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_convert(s, spaces) for s in space.spaces)
    raise TypeError(
        "from_gymnax_space: expected a gymnax Discrete, Box, Dict or Tuple space, got "
        f"{type(space).__name__}"
    )


def _abstract(space: Space) -> PyTree:
    """`ShapeDtypeStruct`s describing one element of `space`."""
    if isinstance(space, PyTreeSpace):
        return jax.tree.map(_abstract, space.spaces)
    dtype = jax.dtypes.canonicalize_dtype(np.dtype(space.dtype))
    return jax.ShapeDtypeStruct(tuple(space.shape), dtype)


def _same_structure(a: PyTree, b: PyTree) -> bool:
    structure: Any = jax.tree.structure(a)
    return bool(structure == jax.tree.structure(b))


def _scalar(x: Any, dtype: Any) -> Any:
    """`x` as a scalar of `dtype` (gymnax returns some flags and rewards with shape (1,))."""
    return jnp.reshape(jnp.asarray(x), ()).astype(dtype)


def _like_info(info: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """`info` with each entry cast to the dtype of the same key in `previous` (if there)."""
    return {k: like(v, previous[k]) if k in previous else v for k, v in info.items()}


class GymnaxAdapter:
    """A gymnax environment as a Parallax environment (see the module docstring).

    Args:
        env: a gymnax `Environment`, e.g. `gymnax.make("CartPole-v1")[0]`.
        params: its `EnvParams`, or `None` for `env.default_params`. Must have the tree
            structure of `env.default_params`.

    Attributes:
        env: the wrapped gymnax environment.
        params: the params used by resets that do not pass their own.
        action_space, observation_space: the converted gymnax spaces (for `params`).
        check_actions: whether `step` refuses, at trace time, an action of the wrong shape
            or dtype kind (a float for a `Discrete` env, a batch of actions; see
            `parallax.check_action`); `True` unless set to `False`.

    The state: `observation` is cast to the observation space's dtypes, `reward` is float32,
    `termination` / `truncation` are bool, `step_count` is gymnax's `time` as int32, `info`
    holds gymnax's step info (e.g. `discount`) with the same keys and dtypes on reset, where
    every entry is zero except `discount`, which is 1 (no transition has ended the MDP).

    Example:
        >>> import gymnax, jax
        >>> from parallax import VmapAutoResetWrapper
        >>> from parallax.adapters import GymnaxAdapter
        >>> env = GymnaxAdapter(gymnax.make("CartPole-v1")[0])
        >>> state = env.reset(key=jax.random.key(0))
        >>> state = env.step(state, 1)
        >>> state.observation.shape, int(state.step_count), state.reward.dtype
        ((4,), 1, dtype('float32'))
        >>> vec = VmapAutoResetWrapper(env, num_envs=4)
        >>> vec.reset(key=jax.random.key(1)).observation.shape
        (4, 4)
    """

    check_actions: bool = True

    def __init__(self, env: Any, params: PyTree | None = None) -> None:
        gymnax = _gymnax()
        if not isinstance(env, gymnax.environments.environment.Environment):
            raise TypeError(
                "GymnaxAdapter: env must be a gymnax Environment (e.g. "
                f"gymnax.make('CartPole-v1')[0]), got {type(env).__name__}"
            )
        with foreign_numerics():
            default = env.default_params
        if params is None:
            params = default
        elif not _same_structure(params, default):
            raise ValueError(
                "GymnaxAdapter: params must have the tree structure of env.default_params "
                f"({type(default).__name__}), got {type(params).__name__} with structure "
                f"{jax.tree.structure(params)}"
            )
        self.env = env
        self.params = params
        with foreign_numerics():
            action_space, observation_space = (
                env.action_space(params),
                env.observation_space(params),
            )
        self.action_space: Space = from_gymnax_space(action_space)
        self.observation_space: Space = from_gymnax_space(observation_space)
        if jax.config.read("jax_enable_x64"):
            self._check_x64()

    def _check_x64(self) -> None:
        """Trace one reset and step (no compile); refuse an env that cannot run under x64.

        Some gymnax envs (Freeway-MinAtar, DiscountingChain-bsuite, MetaMaze-misc, Pong-misc
        with gymnax 1.0.1) mix int32 and int64 in `lax.select` or change their state's dtypes
        between reset and step once x64 is on; they would fail deep inside a traced step.
        """

        def first_step(key: Any) -> tuple[State, State]:
            state = self.reset(key=key)
            return state, self.step(state, self.action_space.sample(key=key))

        problem = ""
        try:
            with warnings.catch_warnings():  # gymnax's own x64 FutureWarnings: the outcome counts
                warnings.simplefilter("ignore")
                reset, stepped = jax.eval_shape(first_step, jax.random.key(0))
        except TypeError as error:
            problem = str(error).splitlines()[0].split(" (Tip")[0].rstrip(".")
        else:
            before = jax.tree.map(lambda x: x.dtype, reset.env_state)
            after = jax.tree.map(lambda x: x.dtype, stepped.env_state)
            if before != after:
                problem = "its state changes dtypes between reset and step"
        if problem:
            raise ValueError(
                f"GymnaxAdapter: gymnax's {self.name} cannot run with x64 enabled "
                f"(jax.config.jax_enable_x64 is True): {problem}. Build and run it with x64 "
                "off (jax.config.update('jax_enable_x64', False))"
            )

    @property
    def name(self) -> str:
        """gymnax's name of the environment."""
        return str(self.env.name)

    @property
    def episode_length(self) -> int | None:
        """gymnax's `max_steps_in_episode` of the default params (the env truncates there),
        or None where the params have none or it is not a concrete int."""
        limit = getattr(self.params, "max_steps_in_episode", None)
        try:
            return int(limit) if limit is not None else None
        except (TypeError, jax.errors.ConcretizationTypeError):
            return None

    def _reset_info(self, key: KeyArray, gymnax_state: PyTree, params: PyTree) -> dict[str, Any]:
        """Zeros shaped like `step_env`'s info (its keys and dtypes), `discount` = 1."""

        def step_env(k: Any, s: Any, a: Any, p: Any) -> Any:
            with foreign_numerics():
                return self.env.step_env(k, s, a, p)

        abstract = jax.eval_shape(
            step_env, key, gymnax_state, _abstract(self.action_space), params
        )[4]
        info = {k: jnp.zeros(v.shape, v.dtype) for k, v in dict(abstract).items()}
        if "discount" in info:
            info["discount"] = jnp.ones_like(info["discount"])
        return info

    def reset(self, *, key: KeyArray, params: PyTree | None = None) -> State:
        """Start an episode (gymnax's `reset_env` with `jax.random.split(key)[1]`).

        Args:
            key: a PRNG key (typed or raw).
            params: the episode's `EnvParams`; `None` for the adapter's `params`.

        Returns:
            The first `State` of the episode (reward 0, both flags False, step_count 0).
        """
        check_key(key, "GymnaxAdapter.reset")
        params = strong(self.params if params is None else params)
        key, reset_key = jax.random.split(key)
        with foreign_numerics():
            obs, gymnax_state = self.env.reset_env(reset_key, params)
        gymnax_state = strong(gymnax_state)
        return State(
            env_state=GymnaxEnvState(gymnax_state=gymnax_state, params=params),
            observation=cast_to_space(obs, self.observation_space),
            reward=jnp.float32(0.0),
            termination=jnp.bool_(False),
            truncation=jnp.bool_(False),
            info=self._reset_info(reset_key, gymnax_state, params),
            step_count=jnp.asarray(gymnax_state.time).astype(jnp.int32),
            key=key,
        )

    def step(self, state: State, action: PyTree) -> State:
        """One gymnax transition (`step_env`), without gymnax's auto-reset.

        Args:
            state: the current state (from `reset` or `step`).
            action: an element of `action_space` (e.g. an int32 scalar for `Discrete`).
                A `Discrete` action outside `[0, n)` is clipped into it before gymnax sees
                it (the rule of every Parallax env; see "Out-of-range actions"). Its shape
                and dtype kind are checked at trace time (`check_actions`).

        Returns:
            The next `State`; on the last step of an episode it holds the terminal
            observation and `termination` or `truncation` (never both).
        """
        if self.check_actions:
            check_action(self.action_space, action, f"{self!r}.step")
        env_state = state.env_state
        params = env_state.params
        if isinstance(self.action_space, Discrete):
            # out-of-range actions clip into the space (gymnax would compute with them:
            # CartPole's force is `force_mag * (2 * action - 1)`, so action 5 pushes 9x)
            action = jnp.clip(action, 0, self.action_space.n - 1)
        # the `k` of gymnax's `step(k, ...)` for this step; `step` gives `step_env` its first half
        gymnax_key = step_key_of(state.key, state.step_count)
        step_key, _ = jax.random.split(gymnax_key)
        with foreign_numerics():
            obs, gymnax_state, reward, terminated, info = self.env.step_env(
                step_key, env_state.gymnax_state, action, params
            )
            time_limit = self.env.is_truncated(gymnax_state, params)
        gymnax_state = like(gymnax_state, env_state.gymnax_state)
        termination = _scalar(terminated, jnp.bool_)
        return State(
            env_state=GymnaxEnvState(gymnax_state=gymnax_state, params=params),
            observation=cast_to_space(obs, self.observation_space),
            reward=_scalar(reward, jnp.float32),
            termination=termination,
            truncation=_scalar(time_limit, jnp.bool_) & ~termination,
            info=_like_info(dict(info), state.info),
            step_count=jnp.asarray(gymnax_state.time).astype(jnp.int32),
            key=state.key,
        )

    def __repr__(self) -> str:
        return f"GymnaxAdapter({self.name})"
