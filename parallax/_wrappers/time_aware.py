"""`TimeAwareObservation`: append the episode's elapsed time to the observation (as sekai's).

Without the time a time-limited episode is not Markov: the agent cannot tell that it is about
to be truncated (the end of a trading session, say). The time is read from the state's
`step_count`, so the wrapper keeps no state of its own and works on single and vector envs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from .. import _spaces as spaces
from .._core import Env, KeyArray, StateT
from .._validate import positive_int
from .autoreset import FINAL_OBSERVATION
from .base import Wrapper, step_env, unwrap_layers
from .time_limit import TimeLimit
from .transform import check_single_agent, observation_reset

__all__ = ["TimeAwareObservation"]


def _float_dtype(dtype: Any) -> np.dtype:
    dt = np.dtype(dtype)
    return dt if np.issubdtype(dt, np.floating) else np.dtype(np.float32)


class TimeAwareObservation(Wrapper[StateT]):
    """Append the elapsed time of the episode to every observation.

    For a 1-D `Box` observation the time is one extra element at the end (integer
    observations become float32 so the fraction fits); for a `PyTreeSpace` of a dict it is a
    new entry `dict_key` of shape `(1,)`, float32. With `normalize_time=True` (the default)
    the time is `min(step_count / max_episode_steps, 1)`, in `[0, 1]`; otherwise the raw
    step count as a float. `max_episode_steps` is read from a `TimeLimit` below when not
    given. `info["final_observation"]` (left by an `AutoResetWrapper` below) gets the
    terminal step's time.

    The time is the state's `step_count`, so the wrapper works on single envs and on vector
    envs alike (`VmapWrapper` below, or per env through `make_vec(..., wrappers=[...])`), and
    restarts with every (auto-)reset of the env below.

    Args:
        env: a single-agent env whose observation space is a 1-D `Box` or a dict
            `PyTreeSpace`.
        max_episode_steps: the normalising horizon, a positive int; found on a `TimeLimit`
            below when None.
        normalize_time: divide by `max_episode_steps` (and clip at 1).
        dict_key: the entry added to a dict observation.

    Example:
        >>> import jax
        >>> import parallax
        >>> from parallax import TimeAwareObservation, TimeLimit
        >>> from parallax.envs import GridWorld
        >>> env = TimeAwareObservation(TimeLimit(GridWorld(), 4))
        >>> state = env.step(env.reset(key=jax.random.key(0)), 0)
        >>> env.observation_space.shape, float(state.observation[-1])
        ((5,), 0.25)
    """

    def __init__(
        self,
        env: Env[StateT],
        max_episode_steps: int | None = None,
        *,
        normalize_time: bool = True,
        dict_key: str = "time",
    ) -> None:
        super().__init__(env)
        owner = "TimeAwareObservation"
        if not isinstance(normalize_time, bool):
            raise TypeError(f"{owner}: normalize_time must be a bool, got {normalize_time!r}")
        if not isinstance(dict_key, str):
            raise TypeError(f"{owner}: dict_key must be a str, got {dict_key!r}")
        if max_episode_steps is None:
            limits = [lay.max_steps for lay in unwrap_layers(env) if isinstance(lay, TimeLimit)]
            max_episode_steps = min(limits) if limits else None
        else:
            max_episode_steps = positive_int(max_episode_steps, "max_episode_steps", owner)
        if normalize_time and max_episode_steps is None:
            raise ValueError(
                f"{owner}(normalize_time=True) needs max_episode_steps; pass it explicitly or "
                "wrap the env in TimeLimit first"
            )
        self.max_episode_steps = max_episode_steps
        self.normalize_time = normalize_time
        self.dict_key = dict_key

        high = 1.0 if normalize_time else np.inf
        space = env.observation_space
        inner = space.spaces if isinstance(space, spaces.PyTreeSpace) else None
        if isinstance(space, spaces.Box) and len(space.shape) == 1:
            dtype = _float_dtype(space.dtype)
            low = np.append(np.asarray(space.low, np.float64), 0.0)
            top = np.append(np.asarray(space.high, np.float64), high)
            self._space: Any = spaces.Box(low, top, (space.shape[0] + 1,), dtype)
            self._dtype = np.dtype(dtype)
        elif isinstance(inner, dict):
            if dict_key in inner:
                raise KeyError(f"{owner}: the observation space already has a {dict_key!r} key")
            time_space = spaces.Box(0.0, high, (1,), jnp.float32)
            self._space = spaces.PyTreeSpace({**inner, dict_key: time_space})
            self._dtype = np.dtype(np.float32)
        else:
            raise TypeError(
                f"{owner} supports 1-D Box and dict PyTreeSpace observation spaces, got {space!r}"
            )

    @property
    def observation_space(self) -> Any:
        """The inner space with the time appended (a 1-D `Box`) or added (a dict)."""
        return self._space

    @property
    def _jax_dtype(self) -> Any:
        # a float64 space means float32 arrays while x64 is off (as everywhere in JAX)
        return jax.dtypes.canonicalize_dtype(self._dtype)

    def _time(self, step_count: Array) -> Array:
        t = jnp.asarray(step_count).astype(self._jax_dtype)
        if self.max_episode_steps is not None and self.normalize_time:
            t = jnp.minimum(t / self.max_episode_steps, 1)
        return t[..., None]

    def _augment(self, observation: PyTree, step_count: Array) -> PyTree:
        t = self._time(step_count)
        if isinstance(self._space, spaces.Box):
            obs = jnp.asarray(observation).astype(self._jax_dtype)
            return jnp.concatenate([obs, t], axis=-1)
        return {**observation, self.dict_key: t}

    def _decorate(self, state: Any, final_count: Array) -> Any:
        check_single_agent(state, "TimeAwareObservation")
        info = state.info
        if FINAL_OBSERVATION in info:
            info = {**info, FINAL_OBSERVATION: self._augment(info[FINAL_OBSERVATION], final_count)}
        return replace(
            state, observation=self._augment(state.observation, state.step_count), info=info
        )

    def reset(self, *, key: KeyArray, **kwargs: Any) -> StateT:
        """Reset and append the time (0); a selective reset keeps the other rows."""
        return observation_reset(  # type: ignore[no-any-return]
            self.env, lambda fresh: self._decorate(fresh, fresh.step_count), key, kwargs
        )

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Step and append the time; the terminal observation gets the terminal step's."""
        next_state = step_env(self.env, state, action, params)
        return self._decorate(next_state, jnp.asarray(state.step_count) + 1)

    def _repr_args(self) -> str:
        return f"max_episode_steps={self.max_episode_steps}"
