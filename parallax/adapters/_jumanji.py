"""Parallax environments for Jumanji users (this module imports `jumanji`).

- `to_jumanji(env)`: a single-agent Parallax environment as a `jumanji.env.Environment`.
- `JumanjiEnv`: the class it builds.

Unlike the Gymnasium and PettingZoo exports this one stays on the device: Jumanji's API is
pure (`reset(key) -> (state, timestep)`, `step(state, action) -> (state, timestep)`), so
the export composes with `jit`, `vmap` and Jumanji's own wrappers
(`jumanji.wrappers.AutoResetWrapper`, `VmapAutoResetWrapper`, `JumanjiToGymWrapper`).
The Jumanji state *is* the Parallax `State` (it has the `key` that Jumanji's auto-reset
splits).

The `TimeStep` of a Parallax `State`:

| Parallax | Jumanji |
|---|---|
| after `reset` | `StepType.FIRST`, reward 0, discount 1 |
| neither flag | `StepType.MID`, `discount = 1` |
| `termination` | `StepType.LAST`, `discount = 0` (no bootstrap) |
| `truncation` only | `StepType.LAST`, `discount = 1` (bootstrap from the last observation) |
| `observation`, `reward`, `info` | `observation`, `reward`, `extras` |
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core import MARLState, State
from .._spaces import Box, Discrete, MultiBinary, MultiDiscrete, PyTreeSpace
from .._wrappers.base import is_vector_env
from ._gymnasium_host import check_parallax_env
from ._imports import require

_jumanji = require("jumanji", extra="jumanji", needed_by="JumanjiEnv")
_specs = require("jumanji.specs", extra="jumanji", needed_by="JumanjiEnv")
_types = require("jumanji.types", extra="jumanji", needed_by="JumanjiEnv")

__all__ = ["JumanjiEnv", "to_jumanji"]


def to_jumanji_spec(space: Any, name: str = "") -> Any:
    """The Jumanji spec of a Parallax space (dtypes and bounds kept).

    `Discrete` -> `DiscreteArray` (with a shape: `MultiDiscreteArray`), `Box` ->
    `BoundedArray`, `MultiDiscrete` -> `MultiDiscreteArray`, `MultiBinary` ->
    `BoundedArray` in `[0, 1]`; a `PyTreeSpace` of a `NamedTuple` -> a nested `Spec`
    that builds that `NamedTuple` (Jumanji's nested specs describe named fields).
    """
    if isinstance(space, Discrete):
        if space.shape == ():
            return _specs.DiscreteArray(space.n, dtype=space.dtype, name=name)
        nvec = jnp.full(space.shape, space.n, dtype=space.dtype)
        return _specs.MultiDiscreteArray(nvec, dtype=space.dtype, name=name)
    if isinstance(space, Box):
        low = np.asarray(space.low).astype(space.dtype)
        high = np.asarray(space.high).astype(space.dtype)
        return _specs.BoundedArray(space.shape, space.dtype, low, high, name=name)
    if isinstance(space, MultiDiscrete):
        nvec = jnp.asarray(np.asarray(space.nvec), dtype=space.dtype)
        return _specs.MultiDiscreteArray(nvec, dtype=space.dtype, name=name)
    if isinstance(space, MultiBinary):
        return _specs.BoundedArray(space.shape, space.dtype, 0, 1, name=name)
    if isinstance(space, PyTreeSpace) and hasattr(space.spaces, "_fields"):
        fields = space.spaces
        children = {f: to_jumanji_spec(_one(getattr(fields, f)), f) for f in fields._fields}
        return _specs.Spec(type(fields), name, **children)
    raise TypeError(
        "to_jumanji_spec: expected a Discrete, Box, MultiDiscrete, MultiBinary or a "
        f"PyTreeSpace of a NamedTuple, got {space!r}"
    )


def _one(space: Any) -> Any:
    """A nested field: a space, or a container of spaces made a `PyTreeSpace`."""
    if isinstance(space, Discrete | Box | MultiDiscrete | MultiBinary | PyTreeSpace):
        return space
    return PyTreeSpace(space)


class JumanjiEnv(_jumanji.Environment):  # type: ignore[misc, name-defined]
    """A single-agent Parallax environment as a `jumanji.env.Environment`.

    Pure and on the device: `reset(key)` and `step(state, action)` return
    `(state, TimeStep)`, where the state is the Parallax `State`. Truncation (`TimeLimit`)
    is a `StepType.LAST` step with discount 1, termination one with discount 0. Build it
    with `to_jumanji`.

    Args:
        env: a single (not vectorised) Parallax environment whose states are `State`s; wrap
            it in `TimeLimit` for a time limit. No auto-reset below it: Jumanji's
            `AutoResetWrapper` does that over the export.

    Attributes:
        env: the Parallax environment.
        observation_spec, action_spec, reward_spec, discount_spec: Jumanji specs.

    Example:
        >>> import jax
        >>> import parallax
        >>> from parallax.adapters import to_jumanji
        >>> env = to_jumanji(parallax.TimeLimit(parallax.make("GridWorld-v0"), 3))
        >>> env.action_spec.num_values
        4
        >>> state, timestep = jax.jit(env.reset)(jax.random.key(0))
        >>> step = jax.jit(env.step)
        >>> for _ in range(3):
        ...     state, timestep = step(state, 1)  # "down" never reaches the goal
        >>> int(timestep.step_type), float(timestep.discount)  # truncated: LAST, discount 1
        (2, 1.0)
    """

    def __init__(self, env: Any) -> None:
        check_parallax_env(env, "JumanjiEnv")
        if is_vector_env(env):
            raise TypeError(
                "JumanjiEnv: env must be a single env (Jumanji batches with its own "
                "VmapWrapper), got a vector env"
            )
        shapes = jax.eval_shape(lambda k: env.reset(key=k), jax.random.key(0))
        if isinstance(shapes, MARLState) or not isinstance(shapes, State):
            raise TypeError(
                f"JumanjiEnv: env must return single-agent `State`s, got {type(shapes).__name__}"
            )
        if isinstance(shapes.info, dict) and "final_observation" in shapes.info:
            raise TypeError(
                "JumanjiEnv: env auto-resets (it has an AutoResetWrapper); export the env "
                "without it and use jumanji.wrappers.AutoResetWrapper"
            )
        self.env = env
        self._reward_dtype = shapes.reward.dtype
        super().__init__()

    def reset(self, key: Any) -> tuple[State, Any]:
        """A new episode from `key`: the Parallax state and a `StepType.FIRST` timestep."""
        state = self.env.reset(key=key)
        timestep = _types.TimeStep(
            step_type=_types.StepType.FIRST,
            reward=jnp.zeros((), self._reward_dtype),
            discount=jnp.ones((), jnp.float32),
            observation=state.observation,
            extras=dict(state.info),
        )
        return state, timestep

    def step(self, state: State, action: Any) -> tuple[State, Any]:
        """One step: `LAST` when the episode ended, with discount 0 only on termination."""
        state = self.env.step(state, action)
        timestep = _types.TimeStep(
            step_type=jnp.where(state.done, _types.StepType.LAST, _types.StepType.MID),
            reward=state.reward,
            discount=jnp.where(state.termination, 0.0, 1.0).astype(jnp.float32),
            observation=state.observation,
            extras=dict(state.info),
        )
        return state, timestep

    @cached_property
    def observation_spec(self) -> Any:
        """The observation space as a Jumanji spec."""
        return to_jumanji_spec(self.env.observation_space, "observation")

    @cached_property
    def action_spec(self) -> Any:
        """The action space as a Jumanji spec."""
        return to_jumanji_spec(self.env.action_space, "action")

    @cached_property
    def reward_spec(self) -> Any:
        """A scalar in the env's reward dtype."""
        return _specs.Array((), self._reward_dtype, "reward")

    @cached_property
    def discount_spec(self) -> Any:
        """A float32 scalar in `[0, 1]`."""
        return _specs.BoundedArray((), jnp.float32, 0.0, 1.0, "discount")

    def render(self, state: State) -> Any:
        """The env's own `render(state)`, when it has one."""
        render = getattr(self.env, "render", None)
        if render is None:
            raise NotImplementedError(f"JumanjiEnv.render: {self.env!r} has no render(state)")
        return render(state)

    def __repr__(self) -> str:
        return f"JumanjiEnv({self.env!r})"


def to_jumanji(env: Any) -> JumanjiEnv:
    """A single-agent Parallax environment as a Jumanji `Environment` (`JumanjiEnv`).

    Args:
        env: a single Parallax environment returning `State`s (no `AutoResetWrapper`).

    Returns:
        The `JumanjiEnv`.

    Example:
        >>> import jax
        >>> import parallax
        >>> from jumanji.wrappers import VmapAutoResetWrapper
        >>> from parallax.adapters import to_jumanji
        >>> env = VmapAutoResetWrapper(to_jumanji(parallax.TimeLimit(parallax.make("GridWorld-v0"), 5)))
        >>> state, timestep = env.reset(jax.random.split(jax.random.key(0), 8))
        >>> timestep.observation.shape
        (8, 4)
    """
    return JumanjiEnv(env)
