"""`TimeLimit`: truncate episodes after a fixed number of steps."""

from __future__ import annotations

from dataclasses import replace

import jax.numpy as jnp
from jaxtyping import PyTree

from .._core import Env, StateT
from .base import Wrapper, check_positive_int, unwrap_layers


class TimeLimit(Wrapper[StateT]):
    """Set `truncation` once `step_count >= max_steps`; `termination` is left as it was.

    Works on single envs, on MARL envs and on vector envs (element-wise). Put it *inside*
    `AutoResetWrapper`, so that a time limit starts a new episode:
    `AutoResetWrapper(TimeLimit(env, 200))`.

    Args:
        env: the environment; it must increment `step_count` on every step.
        max_steps: a positive int.

    Example:
        >>> import jax
        >>> from parallax import TimeLimit
        >>> from parallax.envs import GridWorld
        >>> env = TimeLimit(GridWorld(), max_steps=1)
        >>> s = env.step(env.reset(key=jax.random.key(0)), 0)
        >>> bool(s.truncation)
        True
    """

    def __init__(self, env: Env[StateT], max_steps: int) -> None:
        super().__init__(env)
        self.max_steps = check_positive_int(max_steps, "max_steps", "TimeLimit")
        from .autoreset import AutoResetWrapper

        for layer in unwrap_layers(env):
            if isinstance(layer, AutoResetWrapper) and layer.mode != "off":
                raise ValueError(
                    "TimeLimit must be inside AutoResetWrapper, or time-limited episodes never "
                    "restart: write AutoResetWrapper(TimeLimit(env, max_steps)) instead of "
                    "TimeLimit(AutoResetWrapper(env), max_steps)"
                )

    def step(self, state: StateT, action: PyTree) -> StateT:
        """Step, then truncate where `step_count >= max_steps`."""
        state = self.env.step(state, action)
        limit = jnp.asarray(state.step_count) >= self.max_steps
        return replace(state, truncation=state.truncation | limit)

    def _repr_args(self) -> str:
        return f"max_steps={self.max_steps}"
