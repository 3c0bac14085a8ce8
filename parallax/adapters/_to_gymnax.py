"""`to_gymnax`: any Parallax environment as a gymnax (1.0.1) environment.

- `to_gymnax(env)`: the export, a `GymnaxEnv`.
- `GymnaxEnv`: a subclass of gymnax's `Environment` that runs a Parallax env.
- `GymnaxExportState`: its gymnax state, the Parallax `State` (with gymnax's `time`).
- `GymnaxParams`: its params, gymnax's convention: the env's own params and
  `max_steps_in_episode`.
- `NoParams`: the empty params pytree of envs that take no params.
- `to_gymnax_space`: a Parallax space as a gymnax space (Discrete, Box, Dict, Tuple).

The interface is that of the gymnax installed: 1.0.x (the `gymnax` extra's pin) or
0.0.x (what rejax 0.1.3 and other gymnax 0.0.x code is written for). Under 0.0.x `step`
returns gymnax 0.0.x's five values, `(obs, state, reward, done, info)` with `done =
terminated | truncated`, and `step_env` returns `done` as its fourth value; everything
else below holds for both. Under 1.0.x:

- `reset(key, params=None) -> (obs, state)`;
- `step(key, state, action, params=None) -> (obs, state, reward, terminated, truncated,
  info)`, with gymnax's auto-reset: on the step an episode ends, `obs` and `state` are the
  next episode's first, `reward` and the flags are the finished step's, and
  `info["final_observation"]` holds the terminal observation;
- `step_env` / `reset_env` (one transition, no auto-reset), `is_truncated`,
  `is_terminal`, `observation_space(params)`, `action_space(params)`, `num_actions`,
  `name`, `default_params`.

`info` holds the env's own info entries, then `discount` (0.0 on a termination only, 1.0
otherwise, truncation included), `termination` and `truncation` (Parallax's flags), and
from `step` gymnax's `terminated`, `truncated` and `final_observation`. Bootstrap with
`reward + gamma * info["discount"] * V(info["final_observation"])`.

Keys. A Parallax env keeps its own key in its `State`, so `step` and `step_env` ignore
gymnax's step key: the env's draws are the same whatever key gymnax passes. `reset_env(key,
params)` is the env's `reset(key=key)`; the auto-reset of `step` starts the next episode
with `next_episode_key` of the finished episode's key, the rule of Parallax's
`AutoResetWrapper`, so `to_gymnax(env)` runs exactly the episodes of `make_vec` (tested bit
for bit), and a training loop's per-step `jax.random.split(rng, num_envs)` feeds nothing and
is compiled away (splitting a threefry key per env and step cost the export about half its
speed). The state's `key` is stored as a raw uint32 key (`jax.random.key_data` of a typed
one), gymnax's convention, so gymnax code that maps casts over its state works.

Params. `default_params` is a `GymnaxParams`: `env_params`, the env's own params where its
`reset` and `step` accept `params=` (the finance envs; `NoParams()` for any other env), and
`max_steps_in_episode`, the field every gymnax `EnvParams` has (rejax, gymnax's evaluation
helpers and PureJaxRL-style code read it): the episode length the stack declares (a
`TimeLimit`'s `max_steps`, a finance env's `episode_length` / `n_steps`, a gymnax env's
own), or `None` where none is declared (wrap the env in `TimeLimit`). It is static (pytree
metadata), so a `vmap` over params never batches it. The env's params read through
(`params.sigma`) and `params.replace(sigma=...)` replaces them. `reset(key, p)` /
`step(key, s, a, p)` take a `GymnaxParams` or the env's own params and pass them on, so
`jax.vmap` over a batch of params works (pass the same params to `step` as to `reset`).

A finance env walking a history sequentially (`reset_uses_previous`) gets the finished
episode's state in the auto-reset of `step`, so the walk continues as under Parallax's
`AutoResetWrapper`.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import inspect
from dataclasses import dataclass, field, replace
from functools import cache, partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from .._core import State
from .._spaces import Discrete, PyTreeSpace, Space
from .._wrappers.autoreset import next_episode_key, reset_uses_previous
from .._wrappers.base import episode_length, unwrap_layers
from ._common import gymnax_style_space, lazy_module_getattr, module_class, raw_key, select_tree
from ._imports import require

__all__ = [
    "GymnaxEnv",
    "GymnaxExportState",
    "GymnaxParams",
    "NoParams",
    "to_gymnax",
    "to_gymnax_space",
]

_EXPORT_KEYS = (
    "discount",
    "termination",
    "truncation",
    "terminated",
    "truncated",
    "final_observation",
)


def _gymnax(needed_by: str) -> Any:
    return require("gymnax", extra="gymnax", needed_by=needed_by)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class NoParams:
    """The params of an exported env that takes none: an empty pytree (vmaps as nothing)."""


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class GymnaxParams:
    """The gymnax params of an exported env: the env's own params and gymnax's
    `max_steps_in_episode` (static: never traced, never batched).

    Attribute reads that are not its own go to `env_params` (`params.sigma`), and
    `replace` takes either kind of field: `params.replace(sigma=0.5)` replaces the env's
    `sigma`, `params.replace(max_steps_in_episode=10)` the limit.
    """

    env_params: PyTree = field(default_factory=NoParams)
    """The env's own params (`env.params`), or `NoParams()` for an env that takes none."""
    max_steps_in_episode: int | None = field(default=None, metadata={"static": True})
    """The longest an episode can run (`None`: the env declares no limit)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "env_params" not in self.__dict__:
            raise AttributeError(name)
        try:
            return getattr(self.__dict__["env_params"], name)
        except AttributeError:
            raise AttributeError(
                f"GymnaxParams has no attribute {name!r} (nor do its env_params, "
                f"{type(self.__dict__['env_params']).__name__})"
            ) from None

    def replace(self, **changes: Any) -> GymnaxParams:
        """A copy with `changes`: its own fields, and the env params' fields."""
        own = {k: changes.pop(k) for k in ("env_params", "max_steps_in_episode") if k in changes}
        inner = own.pop("env_params", self.env_params)
        if changes:
            if hasattr(inner, "replace"):
                inner = inner.replace(**changes)
            elif dataclasses.is_dataclass(inner) and not isinstance(inner, type):
                inner = dataclasses.replace(inner, **changes)
            else:
                raise TypeError(
                    f"GymnaxParams.replace: {sorted(changes)} are not fields of "
                    f"{type(inner).__name__}"
                )
        return dataclasses.replace(self, env_params=inner, **own)


def _env_params(params: Any) -> Any:
    """The env's own params, from a `GymnaxParams` or as given."""
    return params.env_params if isinstance(params, GymnaxParams) else params


@cache
def _legacy_step_api() -> bool:
    """Whether the installed gymnax is a 0.0.x (a five-value `step` with one `done`)."""
    try:
        version = importlib.metadata.version("gymnax")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - gymnax from source
        return False
    return version.split(".")[0] == "0"


@jax.tree_util.register_dataclass
@dataclass
class GymnaxExportState:
    """The gymnax state of a `GymnaxEnv`: the Parallax `State` of the wrapped env."""

    parallax_state: State
    """The wrapped env's `State` (its `key` raw uint32)."""

    @property
    def time(self) -> Array:
        """gymnax's step counter: the Parallax `step_count` (int32)."""
        return self.parallax_state.step_count


# -- spaces -----------------------------------------------------------------------------------
def to_gymnax_space(space: Space) -> Any:
    """The gymnax space equivalent to a Parallax space (bounds and dtypes kept).

    Args:
        space: a scalar `Discrete` of dtype int32 or int64, a `Box`, or a `PyTreeSpace` of
            them nested in dicts (gymnax `Dict`) and tuples (gymnax `Tuple`).

    Returns:
        A `gymnax.environments.spaces` `Discrete`, `Box`, `Dict` or `Tuple`.

    Raises:
        TypeError: a space gymnax has no equivalent for (`MultiDiscrete`, `MultiBinary`, a
            `Discrete` with a shape, a tree with lists or other containers).
        ValueError: a `Discrete` whose dtype gymnax refuses (only int32 and int64).

    Example:
        >>> from parallax import spaces
        >>> from parallax.adapters._to_gymnax import to_gymnax_space
        >>> to_gymnax_space(spaces.Discrete(4))
        Discrete(4, dtype=int32)
        >>> to_gymnax_space(spaces.Box(0.0, 4.0, (2,))).shape
        (2,)
    """
    gymnax_spaces = _gymnax("to_gymnax_space").environments.spaces
    tree = space.spaces if isinstance(space, PyTreeSpace) else space
    return _convert(tree, gymnax_spaces, "space")


def _convert(space: Any, gymnax_spaces: Any, where: str) -> Any:
    if isinstance(space, Discrete):
        if space.shape != ():
            raise TypeError(
                f"to_gymnax: {where} is Discrete({space.n}) with shape {space.shape}; gymnax's "
                "Discrete is a scalar, and gymnax has no multi-discrete space"
            )
        dtype = np.dtype(space.dtype)
        if dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise ValueError(
                f"to_gymnax: {where} is Discrete({space.n}) of dtype {dtype}; gymnax's "
                "Discrete takes int32 or int64 only"
            )
        if _legacy_step_api():  # gymnax 0.0.x's Discrete takes no dtype (it holds jnp.int_)
            return gymnax_spaces.Discrete(space.n)
        return gymnax_spaces.Discrete(space.n, dtype=dtype)
    converted = gymnax_style_space(
        space, gymnax_spaces, where, lambda s, w: _convert(s, gymnax_spaces, w)
    )
    if converted is not None:
        return converted
    raise TypeError(
        f"to_gymnax: {where} is a {type(space).__name__}, which has no gymnax equivalent "
        "(gymnax has Discrete, Box, and Dict / Tuple of them)"
    )


# -- the environment --------------------------------------------------------------------------
def _accepts(method: Any, name: str, *, forwarded: bool = False) -> bool:
    """Whether `method` takes the keyword `name` (or, with `forwarded`, any keyword)."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    if forwarded and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return True
    return name in parameters


def _takes_params(env: Any) -> bool:
    """Whether `params=` reaches the innermost env: it takes them, and every wrapper above
    it passes them on (a wrapper's `reset(*, key, **kwargs)` forwards them)."""
    layers = unwrap_layers(env)
    inner = layers[-1]
    if getattr(env, "params", None) is None:
        return False
    if not (_accepts(inner.reset, "params") and _accepts(inner.step, "params")):
        return False
    return all(
        _accepts(layer.reset, "params", forwarded=True)
        and _accepts(layer.step, "params", forwarded=True)
        for layer in layers[:-1]
    )


def _discount(termination: Array) -> Array:
    return jnp.where(termination, jnp.float32(0.0), jnp.float32(1.0))


def _make_environment_class() -> type:
    """Build `GymnaxEnv` on gymnax's `Environment` (imported only when first needed)."""
    base = _gymnax("to_gymnax").environments.environment.Environment

    class GymnaxEnv(base):  # type: ignore[misc, valid-type]
        """A Parallax environment as a gymnax `Environment` (see `to_gymnax`).

        Attributes:
            env: the wrapped Parallax environment.
            takes_params: whether `env.reset` / `env.step` receive gymnax's params.
        """

        def __init__(self, env: Any) -> None:
            for attribute in ("reset", "step", "observation_space", "action_space"):
                if not hasattr(env, attribute):
                    raise TypeError(
                        f"to_gymnax: env must be a Parallax environment (reset, step and "
                        f"spaces), got {type(env).__name__} without {attribute!r}"
                    )
            inner = unwrap_layers(env)[-1]
            if getattr(inner, "num_agents", None) is not None:
                raise TypeError(
                    f"to_gymnax: env must be a single-agent environment, got the multi-agent "
                    f"{type(inner).__name__} (gymnax has no multi-agent interface)"
                )
            self.env = env
            self.takes_params = _takes_params(env)
            self._reads_previous = reset_uses_previous(env)
            self._legacy = _legacy_step_api()
            self._max_steps = episode_length(env)
            self._observation_space = _convert_named(env.observation_space, "observation_space")
            self._action_space = _convert_named(env.action_space, "action_space")

        # -- gymnax's interface --------------------------------------------------------------
        @property
        def default_params(self) -> GymnaxParams:
            """`GymnaxParams(env.params or NoParams(), max_steps_in_episode)` (see the
            module)."""
            own = self.env.params if self.takes_params else NoParams()
            return GymnaxParams(env_params=own, max_steps_in_episode=self._max_steps)

        @property
        def name(self) -> str:
            """The wrapped env's class name."""
            return type(self.env).__name__

        @property
        def num_actions(self) -> int:
            """`n` of a `Discrete` action space; the number of elements of a `Box` one."""
            space = self._action_space
            if isinstance(space, _gymnax("to_gymnax").environments.spaces.Discrete):
                return int(space.n)
            if isinstance(space, _gymnax("to_gymnax").environments.spaces.Box):
                return int(np.prod(space.shape))
            raise NotImplementedError(
                f"to_gymnax: num_actions is defined for a Discrete or Box action space, "
                f"not {type(space).__name__}"
            )

        def observation_space(self, params: Any = None) -> Any:
            """The gymnax observation space (the same for every params)."""
            return self._observation_space

        def action_space(self, params: Any = None) -> Any:
            """The gymnax action space (the same for every params)."""
            return self._action_space

        def reset_env(self, key: Any, params: Any) -> tuple[PyTree, GymnaxExportState]:
            """The env's `reset(key=key)` (with `params=params` where it takes params)."""
            state = self._reset(key, params, previous=None)
            return state.observation, GymnaxExportState(parallax_state=state)

        def step_env(
            self, key: Any, state: GymnaxExportState, action: Any, params: Any
        ) -> tuple[PyTree, GymnaxExportState, Array, Array, dict[str, Any]]:
            """One transition of the env (no auto-reset); `key` is unused (see the module)."""
            del key  # the env draws from the key in its own state
            if self.takes_params:
                stepped = self.env.step(state.parallax_state, action, params=_env_params(params))
            else:
                stepped = self.env.step(state.parallax_state, action)
            clash = sorted(set(stepped.info) & set(_EXPORT_KEYS))
            if clash:
                raise ValueError(
                    f"to_gymnax: the env's info already has {clash}, which the export sets "
                    "(do not wrap the env in AutoResetWrapper: gymnax's step auto-resets)"
                )
            info = {
                **stepped.info,
                "discount": _discount(stepped.termination),
                "termination": stepped.termination,
                "truncation": stepped.truncation,
            }
            next_state = GymnaxExportState(parallax_state=self._raw(stepped))
            ended = stepped.termination
            if self._legacy:  # gymnax 0.0.x: one `done`, truncation included
                ended = jnp.logical_or(stepped.termination, stepped.truncation)
            return stepped.observation, next_state, stepped.reward, ended, info

        @partial(jax.jit, static_argnames=("self",))
        def step(
            self, key: Any, state: GymnaxExportState, action: Any, params: Any = None
        ) -> tuple[Any, ...]:
            """gymnax's `step`: one transition, then gymnax's auto-reset when it ended.

            `key` is unused: the next episode's key is `next_episode_key` of the finished
            one (see the module). Returns `(obs, state, reward, terminated, truncated,
            info)`, or under gymnax 0.0.x `(obs, state, reward, done, info)`.
            """
            if params is None:
                params = self.default_params
            obs_step, state_step, reward, _, info = self.step_env(key, state, action, params)
            terminated = state_step.parallax_state.termination
            truncated = self.is_truncated(state_step, params)
            done = jnp.logical_or(terminated, truncated)
            finished = state_step.parallax_state
            key_reset = next_episode_key(finished.key)  # raw in, raw out
            fresh = self._reset(key_reset, params, previous=finished)
            next_state = select_tree(done, GymnaxExportState(parallax_state=fresh), state_step)
            obs = select_tree(done, fresh.observation, obs_step)
            info = {
                **info,
                "terminated": terminated,
                "truncated": truncated,
                "final_observation": obs_step,
            }
            if self._legacy:
                return obs, next_state, reward, done, info
            return obs, next_state, reward, terminated, truncated, info

        def is_truncated(self, state: GymnaxExportState, params: Any) -> Array:
            """The Parallax `truncation` flag of the state."""
            return state.parallax_state.truncation

        def is_terminated(self, state: GymnaxExportState, params: Any) -> Array:
            """The Parallax `termination` flag of the state."""
            return state.parallax_state.termination

        def discount(self, state: GymnaxExportState, params: Any) -> Array:
            """0.0 after a termination, else 1.0 (float32)."""
            return _discount(state.parallax_state.termination)

        # -- helpers -------------------------------------------------------------------------
        @staticmethod
        def _raw(state: State) -> State:
            return replace(state, key=raw_key(state.key))

        def _reset(self, key: Any, params: Any, previous: State | None) -> State:
            kwargs: dict[str, Any] = {}
            if self.takes_params:
                kwargs["params"] = _env_params(params)
            if previous is not None and self._reads_previous:
                kwargs["previous"] = previous
            return self._raw(self.env.reset(key=key, **kwargs))

        def __repr__(self) -> str:
            return f"to_gymnax({self.env!r})"

    return module_class(GymnaxEnv, __name__)


def _convert_named(space: Any, what: str) -> Any:
    gymnax_spaces = _gymnax("to_gymnax").environments.spaces
    tree = space.spaces if isinstance(space, PyTreeSpace) else space
    return _convert(tree, gymnax_spaces, f"env.{what} ({space!r})")


GymnaxEnv: type
"""The class of `to_gymnax`'s result, built on gymnax's `Environment` on first access."""

# built once, on first use: the class subclasses gymnax's, so it needs gymnax imported
_environment_class = cache(_make_environment_class)


__getattr__ = lazy_module_getattr(__name__, "GymnaxEnv", _environment_class)


def to_gymnax(env: Any) -> Any:
    """Export a Parallax environment as a gymnax `Environment` (1.0.x, or 0.0.x where that
    is installed; see the module).

    Args:
        env: any single-agent Parallax environment (a `reset` / `step` pair and spaces),
            unwrapped or wrapped (`TimeLimit`, ...), but not in `AutoResetWrapper`:
            gymnax's `step` auto-resets.

    Returns:
        A `GymnaxEnv`, a subclass of `gymnax.environments.environment.Environment`.

    Raises:
        ImportError: gymnax is not installed (the message names the extra).
        TypeError: `env` is not an environment, or one of its spaces has no gymnax
            equivalent (the message names the space).
        ValueError: a `Discrete` space of a dtype gymnax refuses.

    Example:
        >>> import jax
        >>> import parallax
        >>> from parallax.adapters._to_gymnax import to_gymnax
        >>> env = to_gymnax(parallax.make("OptimalExecution-v0", n_steps=5))
        >>> params = env.default_params
        >>> obs, state = env.reset(jax.random.PRNGKey(0), params)
        >>> obs, state, reward, terminated, truncated, info = env.step(
        ...     jax.random.PRNGKey(1), state, jax.numpy.array([0.2]), params)
        >>> obs.shape, bool(terminated), float(info["discount"])
        ((3,), False, 1.0)
        >>> env.action_space(params).shape
        (1,)
    """
    return _environment_class()(env)
