"""`StaticActionCheck`: the trace-time action check, as a layer over an env without its own.

Every bundled env and adapter checks its actions itself (`check_actions`, see
`parallax.check_action`); `make` puts this layer over any other env it builds, as
Gymnasium's `make` puts its checker over every env. It reads shapes and dtypes only, so
the compiled step is the same with and without it.

- `StaticActionCheck(env)`: the layer.
- `checks_actions(env)`: whether a stack checks its actions already (a layer of it is a
  `StaticActionCheck`, or its innermost env declares `check_actions`).
- `with_action_checks(env, on, owner)`: what `make(..., check_actions=on)` returns.
"""

from __future__ import annotations

from typing import Any

from jaxtyping import PyTree

from .._action_check import check_action
from .._core import Env, StateT
from .base import Wrapper, batch_depth, is_vector_env, step_env, unwrap_layers

__all__ = ["StaticActionCheck", "checks_actions", "with_action_checks"]


def checks_actions(env: Any) -> bool:
    """Whether some layer of `env` checks the actions' shapes and dtypes (on or off)."""
    layers = unwrap_layers(env)
    if any(isinstance(layer, StaticActionCheck) for layer in layers):
        return True
    return hasattr(layers[-1], "check_actions")


def with_action_checks(env: Any, on: Any, owner: str) -> Any:
    """`env` with the action checks on (`on=True`: a `StaticActionCheck` over an env that
    has none of its own) or off (`on=False`: the env's own checks turned off)."""
    if not isinstance(on, bool):
        raise TypeError(f"{owner}: check_actions must be True or False, got {on!r}")
    if not (callable(getattr(env, "reset", None)) and callable(getattr(env, "step", None))):
        return env  # not an environment: nothing to check (and nothing to wrap)
    if checks_actions(env):
        if not on:
            env.check_actions = False
        return env
    return StaticActionCheck(env) if on else env


class StaticActionCheck(Wrapper[StateT]):
    """Refuse, at trace time, an action of the wrong shape or dtype kind for `action_space`.

    A `TypeError` (no action, not an array, a float for an integer space, ...) or a
    `ValueError` (the wrong shape, a batch given to one env, ...) names the env, the space,
    the expected and the given shape and dtype (see `parallax.check_action`). Nothing is
    added to the compiled program: the check reads shapes and dtypes only. Over a vector
    env the action must lead with `num_envs`.

    `make` puts it over the envs that do not check their own actions (the bundled envs and
    adapters do); `make(id, check_actions=False)` leaves it out, and setting
    `check_actions = False` on it (or on any wrapper above it) turns it off.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import StaticActionCheck, State
        >>> from parallax.envs import GridWorld
        >>> class Plain:  # an env that does not check its own actions
        ...     action_space = GridWorld.action_space
        ...     def reset(self, *, key):
        ...         return GridWorld().reset(key=key)
        ...     def step(self, state, action):
        ...         return state
        >>> env = StaticActionCheck(Plain())
        >>> state = env.reset(key=jax.random.key(0))
        >>> try:
        ...     env.step(state, jnp.zeros(4, jnp.int32))
        ... except ValueError as error:
        ...     print(str(error).split("; ")[1])
        a batch of 4 actions? Plain takes one action: batch envs with VmapWrapper or parallax.make_vec
    """

    def __init__(self, env: Env[StateT]) -> None:
        super().__init__(env)
        self._check_actions = True

    @property  # type: ignore[override]
    def check_actions(self) -> bool:
        """Whether this layer checks the actions (set it to turn the check off or on)."""
        return self._check_actions

    @check_actions.setter
    def check_actions(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(
                f"StaticActionCheck: check_actions must be True or False, got {value!r}"
            )
        self._check_actions = value

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Check the action's shape and dtype kind, then step the env (`params=` passed on
        when given)."""
        space = getattr(self.env, "action_space", None)
        if self._check_actions and space is not None:
            batch: tuple[int, ...] | None = ()
            if is_vector_env(self.env):
                num_envs: int = self.env.num_envs  # type: ignore[attr-defined]
                batch = (int(num_envs),) if batch_depth(self.env) == 1 else None
            owner = f"{type(unwrap_layers(self)[-1]).__name__}.step"
            check_action(space, action, owner, batch)
        return step_env(self.env, state, action, params)
