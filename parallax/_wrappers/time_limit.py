"""`TimeLimit`: truncate episodes after a fixed number of steps."""

from __future__ import annotations

from dataclasses import replace

import jax.numpy as jnp
from jaxtyping import PyTree

from .._core import Env, StateT
from .._validate import INT32_MAX, positive_int
from .base import Wrapper, step_env


class TimeLimit(Wrapper[StateT]):
    """Set `truncation` once `step_count >= max_steps`; `termination` is left as it was.

    Works on single envs, on MARL envs and on vector envs (element-wise). Put it *inside*
    `AutoResetWrapper`, so that a time limit starts a new episode:
    `AutoResetWrapper(TimeLimit(env, 200))`.

    Args:
        env: the environment; it must increment `step_count` on every step.
        max_steps: an int in `[1, 2**31 - 1]` (step counts are int32).

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
        # step counters are int32: a larger limit could never be reached (and would not
        # even compare with one inside jit)
        self.max_steps = positive_int(max_steps, "max_steps", "TimeLimit")
        if self.max_steps > INT32_MAX:
            raise ValueError(
                f"TimeLimit: max_steps must be a positive int at most 2**31 - 1 = {INT32_MAX} "
                f"(step counts are int32), got {self.max_steps}"
            )
        if getattr(env, "autoreset_mode", "off") != "off":
            raise ValueError(
                "TimeLimit must be inside AutoResetWrapper, or time-limited episodes never "
                "restart: write AutoResetWrapper(TimeLimit(env, max_steps)) instead of "
                "TimeLimit(AutoResetWrapper(env), max_steps)"
            )

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Step (`params=` passed on when given), then truncate where `step_count >= max_steps`."""
        state = step_env(self.env, state, action, params)
        limit = jnp.asarray(state.step_count) >= self.max_steps
        return replace(state, truncation=state.truncation | limit)

    def _repr_args(self) -> str:
        return f"max_steps={self.max_steps}"
