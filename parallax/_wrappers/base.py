"""The `Wrapper` base class and helpers to walk a wrapper stack.

- `Wrapper`: forwards `reset`, `step`, the spaces and unknown attributes to the wrapped env.
- `unwrap_layers`: the list of layers from the outermost wrapper to the innermost env.
- `is_vector_env`: whether an env (or wrapper stack) is batched (has `num_envs`).
- `check_positive_int`: the constructor check shared by the wrappers.
- `step_env`: `env.step(state, action)`, with `params=` passed only when given.
- `episode_length`: the longest an episode of a stack can run, where a layer declares it.

Per-call params (domain randomisation): `reset(key=..., params=p)` and
`step(state, action, params=p)` reach the env through every wrapper, and are passed on only
when given, so envs whose `reset`/`step` take no `params` keep working unchanged.

What a stack is, each layer answers for itself: `Wrapper` forwards `num_envs`,
`autoreset_mode` and `reset_uses_previous` from the layer below as properties (a layer
that changes one overrides it, or sets it in `__init__`), so code that needs to know reads
one attribute of the outermost layer instead of walking the stack with `isinstance`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Generic

from jaxtyping import PyTree

from .._core import Env, KeyArray, StateT
from .._validate import closest, positive_int

check_positive_int = positive_int
"""`parallax._validate.positive_int` under its historical name (the wrappers import it)."""


def step_env(env: Any, state: Any, action: PyTree, params: PyTree = None) -> Any:
    """`env.step(state, action)`, or `env.step(state, action, params=params)` when given.

    The one place a wrapper calls the layer below: params go down only when there are
    some, so an env (or user wrapper) whose `step` takes no `params` is called as before.
    """
    if params is None:
        return env.step(state, action)
    return env.step(state, action, params=params)


def unwrap_layers(env: Any) -> list[Any]:
    """Every layer of a wrapper stack, outermost first, ending with the base env."""
    layers = [env]
    while isinstance(layers[-1], Wrapper):
        layers.append(layers[-1].env)
    return layers


def is_vector_env(env: Any) -> bool:
    """Whether `env` runs a batch of environments (its `num_envs` is not None)."""
    return getattr(env, "num_envs", None) is not None


def batch_depth(env: Any) -> int:
    """How many batch axes lead every leaf of `env`'s states: one per layer that batches
    (a `VmapWrapper`, or a native vector env at the bottom)."""
    return sum(1 for layer in unwrap_layers(env) if _batches(layer))


def _batches(layer: Any) -> bool:
    if isinstance(layer, Wrapper):
        own = "_own_num_envs" in layer.__dict__ or type(layer).num_envs is not Wrapper.num_envs
        return own and layer.num_envs is not None
    return getattr(layer, "num_envs", None) is not None


def _forwarded(name: str, default: Any, doc: str) -> property:
    """A property that reads `name` from the wrapped env (`default` when it has none), unless
    the layer set its own value (in `__init__`, say)."""
    slot = f"_own_{name}"

    def get(self: Any) -> Any:
        own = self.__dict__.get(slot, _UNSET)
        return getattr(self.env, name, default) if own is _UNSET else own

    def set_(self: Any, value: Any) -> None:
        self.__dict__[slot] = value

    return property(get, set_, doc=doc)


_UNSET = object()


def env_parameters(env: Any) -> tuple[str, ...]:
    """The parameter names `env` (or the stack below a wrapper) exposes as attributes.

    An env declares them with `attribute_params` (settable, e.g. `sigma`) and
    `static_params` (read-only, e.g. `lookback`), as the finance envs do; the fields of its
    `params` dataclass count too. Setting one of these names on a wrapper sets it on the
    env (never a dead attribute on the wrapper).
    """
    names = [*getattr(env, "attribute_params", ()), *getattr(env, "static_params", ())]
    params = getattr(env, "params", None)
    if dataclasses.is_dataclass(params):
        names += [f.name for f in dataclasses.fields(params)]
    return tuple(names)


def _describe(env: Any) -> str:
    return type(env).__name__


class Wrapper(Generic[StateT]):
    """Base class for wrappers: forwards everything to the wrapped `env`.

    Subclasses override `reset`, `step` or the spaces. Unknown attributes are looked up on
    the wrapped env at run time; when no layer has the name, the `AttributeError` names the
    whole stack.

    Example:
        >>> import jax
        >>> from parallax import Wrapper
        >>> from parallax.envs import GridWorld
        >>> class Scaled(Wrapper):
        ...     def step(self, state, action):
        ...         state = self.env.step(state, action)
        ...         return state.__class__(**{**vars(state), "reward": 2 * state.reward})
        >>> env = Scaled(GridWorld())
        >>> env.action_space
        Discrete(4)
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Mark the time spent in a constructor, so that `__setattr__` forwards a name to the
        # env (or refuses a near miss) only for assignments made after construction: a
        # wrapper's own attributes, set in `__init__`, may share a name with the env below.
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def constructing(self: Any, *args: Any, **kw: Any) -> None:
            depth = self.__dict__.get("_constructing", 0)
            object.__setattr__(self, "_constructing", depth + 1)
            try:
                init(self, *args, **kw)
            finally:
                if depth:
                    object.__setattr__(self, "_constructing", depth)
                else:
                    del self.__dict__["_constructing"]

        cls.__init__ = constructing  # type: ignore[method-assign]

    def __init__(self, env: Env[StateT]) -> None:
        if env is None:
            raise TypeError(f"{type(self).__name__}: env must be an environment, got None")
        for name in ("reset", "step"):
            if not callable(getattr(env, name, None)):
                raise TypeError(
                    f"{type(self).__name__}: env must have a callable `{name}`, got "
                    f"{type(env).__name__}"
                )
        self.env = env

    @property
    def action_space(self) -> Any:
        """The wrapped env's action space (unbatched)."""
        return self.env.action_space

    @property
    def observation_space(self) -> Any:
        """The wrapped env's observation space (unbatched)."""
        return self.env.observation_space

    num_envs = _forwarded(
        "num_envs", None, "The batch size of the stack below (`None` for a single env)."
    )
    autoreset_mode = _forwarded(
        "autoreset_mode",
        "off",
        "How episodes restart below this layer: `'same-step'`, `'next-step'` or `'off'`.",
    )
    reset_uses_previous = _forwarded(
        "reset_uses_previous",
        False,
        "Whether the env below reads `reset(key=..., previous=state)` (state surviving resets).",
    )

    @property
    def check_actions(self) -> bool:
        """Whether the stack below checks each action's shape and dtype kind at trace time
        (`parallax.check_action`). Setting it sets it on the layer that checks (the
        innermost env, or a `StaticActionCheck`), so `vec.check_actions = False` turns the
        checks of a whole `make_vec` stack off."""
        return bool(getattr(self.env, "check_actions", False))

    @check_actions.setter
    def check_actions(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(
                f"{type(self).__name__}: check_actions must be True or False, got {value!r}"
            )
        if not (isinstance(self.env, Wrapper) or hasattr(self.env, "check_actions")):
            stack = " -> ".join(_describe(layer) for layer in unwrap_layers(self))
            raise AttributeError(
                f"no layer of the wrapper stack {stack} checks actions ({_describe(self.env)} "
                "has no check_actions attribute); wrap it in StaticActionCheck to check them"
            )
        self.env.check_actions = value

    @property
    def num_agents(self) -> int:
        """The wrapped env's number of agent slots (1 for single-agent envs)."""
        return int(getattr(self.env, "num_agents", 1))

    @property
    def unwrapped(self) -> Any:
        """The innermost environment."""
        return unwrap_layers(self)[-1]

    def reset(self, *, key: KeyArray, **kwargs: Any) -> StateT:
        """Reset the wrapped env (keyword arguments such as `state=`/`done=`/`params=` pass
        through; `params=None` is dropped)."""
        if kwargs.get("params", _UNSET) is None:
            del kwargs["params"]
        return self.env.reset(key=key, **kwargs)

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Step the wrapped env (`params=`, when given, is passed on)."""
        return step_env(self.env, state, action, params)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails. Guard against recursion before `env` is set
        # (copy, pickle) and against dunder probes.
        if name.startswith("__") or "env" not in self.__dict__:
            raise AttributeError(name)
        layers = unwrap_layers(self)
        for layer in layers[1:]:
            if isinstance(layer, Wrapper):
                if name in layer.__dict__ or hasattr(type(layer), name):
                    return getattr(layer, name)
            else:
                try:
                    return getattr(layer, name)
                except AttributeError:
                    break
        stack = " -> ".join(_describe(layer) for layer in layers)
        raise AttributeError(f"no layer of the wrapper stack {stack} has an attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        # A parameter of the env below (`vec.sigma = 0.3`) is set there, where reset/step
        # read it; a near miss of one (`vec.sigmaa`) is refused with a did-you-mean. The
        # wrapper's own attributes (set in `__init__`, or already present) are plain.
        env = self.__dict__.get("env")
        if (
            env is not None
            and not self.__dict__.get("_constructing", 0)
            and not name.startswith("_")
            and name not in self.__dict__
            and not hasattr(type(self), name)
        ):
            owned = env_parameters(env)
            if name in owned:
                setattr(env, name, value)
                return
            hint = closest(name, owned)
            if hint:
                stack = " -> ".join(_describe(layer) for layer in unwrap_layers(self))
                raise AttributeError(
                    f"no layer of the wrapper stack {stack} has an attribute {name!r}{hint}"
                )
        object.__setattr__(self, name, value)

    def _repr_args(self) -> str:
        return ""

    def __repr__(self) -> str:
        extra = self._repr_args()
        return f"{type(self).__name__}({self.env!r}{', ' + extra if extra else ''})"


def episode_length(env: Any) -> int | None:
    """The longest an episode of `env` can run: the smallest of a `TimeLimit`'s `max_steps`
    and the env's own `episode_length` / `n_steps`, or None when none is declared."""
    limits: list[int] = []
    for layer in unwrap_layers(env):
        for name in ("max_steps", "episode_length", "n_steps"):
            value = layer.__dict__.get(name, None)
            if value is None:
                value = getattr(type(layer), name, None)
                value = getattr(layer, name, None) if isinstance(value, property) else None
            if isinstance(value, int) and not isinstance(value, bool):
                limits.append(value)
    return min(limits) if limits else None
