"""Stateless transformation wrappers, and the helpers the statistics wrappers share.

- `TransformObservation`: apply a function to every observation (and terminal observation).
- `TransformReward`: apply a function to every step reward.
- `TransformAction`: apply a function to every action before the wrapped env sees it.
- `ClipAction`: clip actions into a `Box` action space.
- `FlattenObservation`: a `Box` or `PyTreeSpace` observation as one flat `Box`.

The functions map *one* environment's value: over a vector env (a `VmapWrapper` below the
wrapper) they are `jax.vmap`-ed over the batch axes, so the same wrapper works inside and
outside `VmapWrapper`. Observation wrappers also transform `info["final_observation"]`
(left by `AutoResetWrapper`), so a value function bootstrapping from the terminal
observation sees what the policy sees.

Observation wrappers hand the wrapped env's `step` the state as they returned it (with the
transformed observation): Parallax envs compute a step from `env_state`, never from
`state.observation`. An env whose `step` reads `state.observation` must sit outside them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from .. import _spaces as spaces
from .._core import Env, KeyArray, MARLState, StateT
from .autoreset import FINAL_OBSERVATION, AutoResetMode
from .base import Wrapper, batch_depth, step_env

__all__ = [
    "ClipAction",
    "FlattenObservation",
    "TransformAction",
    "TransformObservation",
    "TransformReward",
]


# -- helpers shared by the training wrappers ---------------------------------------------------
def autoreset_mode(env: Any) -> AutoResetMode:
    """How episodes restart below `env` (its `autoreset_mode`; `"off"` when it declares none).

    `AutoResetWrapper` declares its mode, every `Wrapper` forwards the one below, and a
    native vector env that resets itself declares it as an attribute.
    """
    declared = getattr(env, "autoreset_mode", "off")
    return cast(AutoResetMode, declared if declared in ("same-step", "next-step", "off") else "off")


def batched(fn: Callable[..., Any], depth: int) -> Callable[..., Any]:
    """`fn` vmapped `depth` times (over the leading batch axes)."""
    for _ in range(depth):
        fn = jax.vmap(fn)
    return fn


def where_batch(mask: Array, new: PyTree, old: PyTree) -> PyTree:
    """Per-env select: `new` where `mask` (shape = the batch shape), else `old`, leaf by leaf."""

    def pick(n: Array, o: Array) -> Array:
        m = jnp.reshape(mask, jnp.shape(mask) + (1,) * (jnp.ndim(o) - jnp.ndim(mask)))
        return jnp.where(m, n, o)

    return jax.tree.map(pick, new, old)


def strip_info(state: StateT, keys: tuple[str, ...]) -> StateT:
    """`state` without the info entries in `keys` (a wrapper's own keys)."""
    info = {k: v for k, v in state.info.items() if k not in keys}
    return replace(state, info=info)


def check_single_agent(state: Any, owner: str) -> None:
    """Raise a TypeError naming `owner` when `state` is a multi-agent state."""
    if isinstance(state, MARLState):
        raise TypeError(
            f"{owner} supports single-agent states (parallax.State and subclasses), got a MARLState"
        )
    if not isinstance(state.info, dict):
        raise TypeError(
            f"{owner} needs the env's `info` to be a dict, got {type(state.info).__name__}"
        )


def selective_reset(
    env: Any, key: KeyArray, state: Any, done: Array, own_keys: tuple[str, ...], **kwargs: Any
) -> Any:
    """Selective reset of the env below an observation wrapper.

    The wrapper's `state` holds a transformed observation; the env below expects its own
    observation structure for the rows it keeps. Those rows are discarded afterwards (the
    wrapper keeps its own copy), so they are handed down as zeros of the right structure.
    """
    template = jax.eval_shape(lambda k: env.reset(key=k).observation, key)
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), template)
    inner = replace(strip_info(state, own_keys), observation=zeros)
    return env.reset(key=key, state=inner, done=done, **kwargs)


def observation_reset(
    env: Any, decorate: Callable[[Any], Any], key: KeyArray, kwargs: dict[str, Any]
) -> Any:
    """`env.reset(key=key, **kwargs)` with `decorate` (an observation rewrite) applied.

    A selective reset (`state=` and `done=` given) decorates the reset rows and keeps the
    other rows' observations (and their `info["final_observation"]`) as they were.
    """
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    state, done = kwargs.pop("state", None), kwargs.pop("done", None)
    if state is None or done is None:
        if state is not None:
            kwargs["state"] = state
        if done is not None:
            kwargs["done"] = done
        return decorate(env.reset(key=key, **kwargs))
    out: Any = decorate(selective_reset(env, key, state, done, (), **kwargs))
    observation = where_batch(done, out.observation, state.observation)
    info = out.info
    if FINAL_OBSERVATION in info:
        info = {**info, FINAL_OBSERVATION: observation}
    return replace(out, observation=observation, info=info)


def _check_callable(fn: Any, name: str, owner: str) -> None:
    if not callable(fn):
        raise TypeError(f"{owner}: {name} must be callable, got {type(fn).__name__}")


def _check_space(space: Any, name: str, owner: str) -> None:
    if space is not None and not isinstance(space, spaces.Space):
        raise TypeError(
            f"{owner}: {name} must be a parallax space (or None), got {type(space).__name__}"
        )


def _checked_fn_and_space(fn: Any, space: Any, space_name: str, owner: str) -> tuple[Any, Any]:
    """`(fn, space)` once `fn` is callable and `space` (argument `space_name`) a space or None."""
    _check_callable(fn, "fn", owner)
    _check_space(space, space_name, owner)
    return fn, space


def _fn_repr(fn: Any) -> str:
    """`fn=<its name>` (or its repr, for a nameless callable), for a wrapper's repr."""
    return f"fn={getattr(fn, '__name__', repr(fn))}"


def _space_of(shape_dtype: Any) -> Any:
    """An unbounded `Box` (or `PyTreeSpace` of them) describing `jax.eval_shape` output."""

    def box(s: Any) -> spaces.Box:
        if not (jnp.issubdtype(s.dtype, jnp.floating) or jnp.issubdtype(s.dtype, jnp.integer)):
            raise TypeError(
                f"cannot describe an observation leaf of dtype {s.dtype} with a Box; pass "
                "observation_space= explicitly"
            )
        return spaces.Box(-np.inf, np.inf, s.shape, s.dtype)

    leaves, treedef = jax.tree.flatten(shape_dtype)
    boxes = [box(s) for s in leaves]
    if treedef == jax.tree.structure(0):  # type: ignore[operator]
        return boxes[0]
    return spaces.PyTreeSpace(jax.tree.unflatten(treedef, boxes))


# -- observation wrappers ----------------------------------------------------------------------
class _ObservationMap(Wrapper[StateT]):
    """Base of the stateless observation wrappers: `_map(obs)` maps one env's observation."""

    _owner = "ObservationWrapper"

    def __init__(self, env: Env[StateT]) -> None:
        super().__init__(env)
        self._depth = batch_depth(env)

    def _map(self, observation: PyTree) -> PyTree:  # pragma: no cover - abstract
        raise NotImplementedError

    def _apply(self, observation: PyTree) -> PyTree:
        return batched(self._map, self._depth)(observation)

    def _decorate(self, state: Any) -> Any:
        check_single_agent(state, self._owner)
        info = state.info
        if FINAL_OBSERVATION in info:
            info = {**info, FINAL_OBSERVATION: self._apply(info[FINAL_OBSERVATION])}
        return replace(state, observation=self._apply(state.observation), info=info)

    def reset(self, *, key: KeyArray, **kwargs: Any) -> StateT:
        """Reset and transform the observation (a selective reset keeps the other rows)."""
        return observation_reset(self.env, self._decorate, key, kwargs)

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Step and transform the observation and `info["final_observation"]`."""
        return self._decorate(step_env(self.env, state, action, params))


class TransformObservation(_ObservationMap[StateT]):
    """Apply `fn` to every observation, including `info["final_observation"]`.

    Args:
        env: a single or vector environment (then `fn` is vmapped over the batch).
        fn: maps one environment's observation to the new observation (jit-able).
        observation_space: the space of the new observations; when None, an unbounded
            `Box` (or `PyTreeSpace` of them) with `fn`'s output shapes and dtypes.

    Returns:
        A wrapper whose states carry `fn(observation)`; the state type is kept.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import TransformObservation
        >>> from parallax.envs import GridWorld
        >>> env = TransformObservation(GridWorld(), lambda obs: obs[:2] / 4.0)
        >>> env.reset(key=jax.random.key(0)).observation.tolist(), env.observation_space
        ([0.0, 0.0], Box(-inf, inf, (2,), float32))
    """

    _owner = "TransformObservation"

    def __init__(
        self,
        env: Env[StateT],
        fn: Callable[[PyTree], PyTree],
        observation_space: Any = None,
    ) -> None:
        super().__init__(env)
        self.fn, self._space = _checked_fn_and_space(
            fn, observation_space, "observation_space", "TransformObservation"
        )

    @property
    def observation_space(self) -> Any:
        """The given space, or one inferred from `fn`'s output (unbounded `Box`)."""
        if self._space is None:
            inner = self.env.observation_space
            out = jax.eval_shape(lambda k: self.fn(inner.sample(key=k)), jax.random.key(0))
            self._space = _space_of(out)
        return self._space

    def _map(self, observation: PyTree) -> PyTree:
        return self.fn(observation)

    def _repr_args(self) -> str:
        return _fn_repr(self.fn)


def _float_dtype(dtypes: list[Any]) -> np.dtype:
    """The widest floating dtype among `dtypes` (float32 when none), canonical for JAX."""
    floats = [np.dtype(d) for d in dtypes if np.issubdtype(np.dtype(d), np.floating)]
    wide = max(floats, key=lambda d: d.itemsize) if floats else np.dtype(np.float32)
    return np.dtype(jax.dtypes.canonicalize_dtype(wide))


class FlattenObservation(_ObservationMap[StateT]):
    """A `Box` or `PyTreeSpace` observation as one flat float `Box`.

    `Box` leaves are raveled, `Discrete` and `MultiDiscrete` leaves one-hot encoded (as in
    Gymnasium's `flatten`), `MultiBinary` leaves raveled as 0/1; the pieces are
    concatenated in pytree order (dict keys sorted). The dtype is the widest float dtype of
    the `Box` leaves (float32 when there is none). `info["final_observation"]` is flattened
    too.

    Args:
        env: a single or vector environment whose observation space is a `Box`,
            `Discrete`, `MultiDiscrete`, `MultiBinary` or a `PyTreeSpace` of them.

    Returns:
        A wrapper with a flat `Box` observation space of shape `(size,)`.

    Example:
        >>> import jax
        >>> from parallax import FlattenObservation, TransformObservation, spaces
        >>> from parallax.envs import GridWorld
        >>> space = spaces.PyTreeSpace({"pos": spaces.Box(0.0, 4.0, (2,)),
        ...                             "goal": spaces.Box(0.0, 4.0, (2,))})
        >>> env = TransformObservation(
        ...     GridWorld(), lambda o: {"pos": o[:2], "goal": o[2:]}, space)
        >>> env = FlattenObservation(env)
        >>> env.observation_space.shape, env.reset(key=jax.random.key(0)).observation.shape
        ((4,), (4,))
    """

    _owner = "FlattenObservation"

    def __init__(self, env: Env[StateT]) -> None:
        super().__init__(env)
        space = env.observation_space
        leaves = space._leaves if isinstance(space, spaces.PyTreeSpace) else (space,)
        self._treedef = (
            space._treedef if isinstance(space, spaces.PyTreeSpace) else jax.tree.structure(0)
        )
        lows: list[np.ndarray] = []
        highs: list[np.ndarray] = []
        for leaf in leaves:
            if isinstance(leaf, spaces.Box):
                lows.append(np.ravel(leaf.low).astype(np.float64))
                highs.append(np.ravel(leaf.high).astype(np.float64))
            elif isinstance(leaf, spaces.Discrete):
                size = int(np.prod(leaf.shape, dtype=np.int64)) * leaf.n
                lows.append(np.zeros(size))
                highs.append(np.ones(size))
            elif isinstance(leaf, spaces.MultiDiscrete):
                size = int(np.sum(leaf.nvec))
                lows.append(np.zeros(size))
                highs.append(np.ones(size))
            elif isinstance(leaf, spaces.MultiBinary):
                size = int(np.prod(leaf.shape, dtype=np.int64))
                lows.append(np.zeros(size))
                highs.append(np.ones(size))
            else:
                raise TypeError(
                    "FlattenObservation: env.observation_space must be a Box, Discrete, "
                    "MultiDiscrete, MultiBinary or a PyTreeSpace of them, got a leaf "
                    f"{leaf!r}"
                )
        self._leaves = tuple(leaves)
        self._dtype = _float_dtype([leaf.dtype for leaf in leaves if isinstance(leaf, spaces.Box)])
        low, high = np.concatenate(lows), np.concatenate(highs)
        self._space = spaces.Box(low, high, low.shape, self._dtype)

    @property
    def observation_space(self) -> spaces.Box:
        """The flat `Box`: concatenated bounds of the leaves (one-hot parts in [0, 1])."""
        return self._space

    def _map(self, observation: PyTree) -> Array:
        values = self._treedef.flatten_up_to(observation)  # type: ignore[attr-defined]
        parts = []
        for space, value in zip(self._leaves, values):
            value = jnp.asarray(value)
            if isinstance(space, spaces.Discrete):
                part = jax.nn.one_hot(jnp.ravel(value), space.n, dtype=self._dtype)
            elif isinstance(space, spaces.MultiDiscrete):
                flat_n = np.ravel(space.nvec)
                flat_v = jnp.ravel(value)
                part = jnp.concatenate(
                    [
                        jax.nn.one_hot(flat_v[i], int(n), dtype=self._dtype)
                        for i, n in enumerate(flat_n)
                    ]
                )
            else:
                part = jnp.ravel(value).astype(self._dtype)
            parts.append(jnp.ravel(part))
        return jnp.concatenate(parts)


# -- reward and action wrappers ------------------------------------------------------------------
class TransformReward(Wrapper[StateT]):
    """Apply `fn` to the reward of every step (reset rewards are left as they are).

    The result is cast back to the wrapped env's reward dtype, so the dtype contract holds.
    With a same-step `AutoResetWrapper` below, the reward of the step that ended an episode
    is transformed like any other.

    Args:
        env: a single or vector environment (then `fn` is vmapped over the batch).
        fn: maps one scalar reward to a scalar (jit-able), e.g. `jnp.sign`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import TransformReward
        >>> from parallax.envs import GridWorld
        >>> env = TransformReward(GridWorld(), lambda r: 10.0 * r)
        >>> s = env.step(env.reset(key=jax.random.key(0)), 2)
        >>> round(float(s.reward), 4)  # 10 * exp(-distance to the goal)
        0.2717
    """

    def __init__(self, env: Env[StateT], fn: Callable[[Array], Array]) -> None:
        super().__init__(env)
        _check_callable(fn, "fn", "TransformReward")
        self.fn = fn
        self._depth = batch_depth(env)

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Step and transform the reward."""
        out: Any = step_env(self.env, state, action, params)
        check_single_agent(out, "TransformReward")
        reward = jnp.asarray(batched(self.fn, self._depth)(out.reward))
        if reward.shape != jnp.shape(out.reward):
            raise ValueError(
                "TransformReward: fn must map a scalar reward to a scalar, got shape "
                f"{reward.shape[self._depth :]}"
            )
        return replace(out, reward=reward.astype(jnp.result_type(out.reward)))

    def _repr_args(self) -> str:
        return _fn_repr(self.fn)


class TransformAction(Wrapper[StateT]):
    """Apply `fn` to every action before the wrapped env steps with it.

    Args:
        env: a single or vector environment (then `fn` is vmapped over the batch).
        fn: maps one action of `action_space` to an action of `env.action_space`.
        action_space: the space of the actions this wrapper accepts; None keeps
            `env.action_space`.

    Example:
        >>> import jax
        >>> from parallax import TransformAction, spaces
        >>> from parallax.envs import GridWorld
        >>> env = TransformAction(GridWorld(), lambda a: 3 - a, spaces.Discrete(4))
        >>> s = env.step(env.reset(key=jax.random.key(0)), 1)  # 1 -> 2 (right)
        >>> s.observation[:2].tolist()
        [1.0, 0.0]
    """

    def __init__(
        self,
        env: Env[StateT],
        fn: Callable[[PyTree], PyTree],
        action_space: Any = None,
    ) -> None:
        super().__init__(env)
        self.fn, self._space = _checked_fn_and_space(
            fn, action_space, "action_space", "TransformAction"
        )
        self._depth = batch_depth(env)

    @property
    def action_space(self) -> Any:
        """The accepted action space (`env.action_space` unless given)."""
        return self.env.action_space if self._space is None else self._space

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Step with `fn(action)`."""
        return step_env(self.env, state, batched(self.fn, self._depth)(action), params)

    def _repr_args(self) -> str:
        return _fn_repr(self.fn)


class ClipAction(Wrapper[StateT]):
    """Clip actions into the wrapped env's `Box` action space before stepping.

    The wrapper accepts any real action: its `action_space` is an unbounded `Box` of the
    same shape and dtype (a Gaussian policy can sample freely; the env sees a legal action).

    Args:
        env: a single or vector environment with a `Box` action space.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import ClipAction, spaces
        >>> class Echo:  # an env whose observation is the last action
        ...     action_space = spaces.Box(-1.0, 1.0, (2,))
        ...     observation_space = spaces.Box(-1.0, 1.0, (2,))
        ...     def reset(self, *, key):
        ...         from parallax import State
        ...         return State(None, jnp.zeros(2), jnp.float32(0), jnp.bool_(False),
        ...                      jnp.bool_(False), {}, jnp.int32(0), key)
        ...     def step(self, state, action):
        ...         import dataclasses
        ...         return dataclasses.replace(state, observation=action)
        >>> env = ClipAction(Echo())
        >>> env.step(env.reset(key=jax.random.key(0)), jnp.array([3.0, -0.5])).observation
        Array([ 1. , -0.5], dtype=float32)
    """

    def __init__(self, env: Env[StateT]) -> None:
        super().__init__(env)
        space = env.action_space
        if not isinstance(space, spaces.Box):
            raise TypeError(
                f"ClipAction: env.action_space must be a Box, got {type(space).__name__} "
                f"({space!r})"
            )
        self._low, self._high, self._dtype = space.low, space.high, space.dtype
        self._space = spaces.Box(-np.inf, np.inf, space.shape, space.dtype)
        self._depth = batch_depth(env)

    @property
    def action_space(self) -> spaces.Box:
        """An unbounded `Box` with the wrapped space's shape and dtype."""
        return self._space

    def _clip(self, action: Array) -> Array:
        action = jnp.asarray(action)
        dtype = jnp.result_type(action)
        if not jnp.issubdtype(dtype, jnp.floating):
            dtype = jax.dtypes.canonicalize_dtype(self._dtype)
            action = action.astype(dtype)
        low = jnp.asarray(self._low, dtype)
        high = jnp.asarray(self._high, dtype)
        return jnp.clip(action, low, high)

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Step with `clip(action, low, high)`."""
        return step_env(self.env, state, batched(self._clip, self._depth)(action), params)
