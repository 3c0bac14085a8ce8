"""Parallax environments for Gymnasium users (this module imports `gymnasium`).

- `GymnasiumEnv`: any Parallax environment as a `gymnasium.Env` (Gymnasium 0.29 and 1.x).
- `GymnasiumVectorEnv`: any `VmapWrapper`-ed environment as a `gymnasium.vector.VectorEnv`
  (Gymnasium >= 1.1, whose vector API declares auto-reset modes).
- `to_gymnasium_space`: a Parallax space as the equivalent Gymnasium space.

Both exports compile one function per call kind with `jax.jit` when they are built: `step`
runs the environment's step *and* every conversion (observation dtypes, dropped
auto-reset keys) on the device, and packs everything the host needs into one byte buffer,
which comes to the host in one transfer (`HostPacker`). The caller gets NumPy: observations with the dtypes of the Gymnasium
observation space, rewards as floats, flags as bools, `info` as NumPy.

Actions are checked with the Gymnasium space's `contains` before they reach the device; an
action outside the space raises `ValueError` naming the action and the space (the rule for
other dtypes is in `_gymnasium_host`'s docstring).

Seeds. `reset(seed=s)` starts from `jax.random.key(s)` (seeds of 2**32 and above are first
hashed to 32 bits with NumPy's `SeedSequence`), so a Gymnasium user and a Parallax user who
use the same seed see the same episode. `reset()` without a seed draws the key from the
env's `np_random`, which `reset(seed=s)` (or the constructor's `seed`) seeds, so a seeded
sequence of resets is reproducible, as Gymnasium's checker requires.

Where the code lives: `GymnasiumEnv` here, `GymnasiumVectorEnv` in `_gymnasium_vector`,
`to_gymnasium_space` in `_gymnasium_spaces`, and what both exports and `PettingZooEnv` share
(`HostPacker`, `ObservationCodec`, `action_encoder`, `seed_to_int`) in `_gymnasium_host`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium
import jax
import numpy as np

from .._core import MARLState, State
from .._wrappers.base import is_vector_env
from ._gymnasium_host import (
    HostPacker,
    ObservationCodec,
    _check_options,
    _state_kind,
    _writable,
    action_encoder,
    check_parallax_env,
    seed_to_int,
)
from ._gymnasium_spaces import to_gymnasium_space

__all__ = ["GymnasiumEnv"]


# -- single environment -----------------------------------------------------------------------
class GymnasiumEnv(gymnasium.Env):  # type: ignore[type-arg]
    """A Parallax environment as a `gymnasium.Env` (passes Gymnasium's `check_env`).

    Gymnasium's single-environment API has no auto-reset: after `terminated` or
    `truncated`, call `reset()`. A `step` before the first `reset`, or after the episode
    ended, raises `gymnasium.error.ResetNeeded` (the error of Gymnasium's `OrderEnforcing`)
    instead of continuing a finished episode. Wrap the env in `TimeLimit` for a time
    limit. Works with Gymnasium 0.29 (CleanRL's pin) and 1.x.

    Each `step` is one jitted call (the env's step and the output conversions) and one
    device-to-host transfer; the action is checked with `action_space.contains` first.

    Args:
        env: a single (not vectorised) Parallax environment whose states are `State`s.
        seed: optional non-negative int seeding `np_random`, which draws the keys of
            unseeded resets.

    Attributes:
        env: the Parallax environment.
        observation_space, action_space: the Gymnasium equivalents of the env's spaces.
        state: the current Parallax `State` (`None` before the first `reset`).

    Raises:
        ValueError: from `step`, for an action outside `action_space` (named, with the space).
        gymnasium.error.ResetNeeded: from `step`, before the first `reset` or after the
            episode ended (the message says which and names `reset()`).

    Example:
        >>> from parallax import TimeLimit
        >>> from parallax.envs import GridWorld
        >>> from parallax.adapters import GymnasiumEnv
        >>> env = GymnasiumEnv(TimeLimit(GridWorld(), max_steps=10))
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> obs.dtype, type(reward), type(terminated)
        (dtype('float32'), <class 'float'>, <class 'bool'>)
        >>> try:
        ...     env.step(7)
        ... except ValueError as error:
        ...     print(error)
        GymnasiumEnv.step: action 7 is not in the action space Discrete(4)
    """

    metadata = {"render_modes": []}  # noqa: RUF012 (Gymnasium's own convention)

    def __init__(self, env: Any, seed: int | None = None) -> None:
        check_parallax_env(env, "GymnasiumEnv")
        if is_vector_env(env):
            raise TypeError(
                "GymnasiumEnv: env is a vector env (it has num_envs); use GymnasiumVectorEnv"
            )
        shapes = _state_kind(env)
        if isinstance(shapes, MARLState) or not isinstance(shapes, State):
            raise TypeError(
                f"GymnasiumEnv: env must return single-agent `State`s, got {type(shapes).__name__}"
            )
        self.env = env
        self.observation_space = to_gymnasium_space(env.observation_space)
        self.action_space = to_gymnasium_space(env.action_space)
        self.render_mode = None
        self.state: State | None = None
        self._ended: str | None = None  # how the episode ended ("terminated"), until reset
        self._encode = action_encoder(self.action_space, env.action_space, "GymnasiumEnv.step")
        obs = ObservationCodec(env.observation_space)
        self._build_obs = obs.host
        reset_out, step_out = HostPacker("GymnasiumEnv"), HostPacker("GymnasiumEnv")
        self._reset_out, self._step_out = reset_out.unpack, step_out.unpack

        def reset(key: Any) -> Any:
            state = env.reset(key=key)
            return state, reset_out.pack((obs.device(state.observation), state.info))

        def step(state: Any, action: Any) -> Any:
            state = env.step(state, action)
            out = (state.reward, state.termination, state.truncation, state.info)
            return state, step_out.pack((obs.device(state.observation), *out))

        self._reset_fn: Callable[..., Any] = jax.jit(reset)
        self._step_fn: Callable[..., Any] = jax.jit(step)
        if seed is not None:
            self._np_random, self._np_random_seed = gymnasium.utils.seeding.np_random(
                seed_to_int(seed)
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
            seed = seed_to_int(seed)
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(0, 2**32, dtype=np.uint64))
        self.state, out = self._reset_fn(jax.random.key(seed))
        self._ended = None
        leaves, info = self._reset_out(out)
        return self._build_obs(leaves), _writable(info)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Advance one step.

        Args:
            action: an element of `action_space`.

        Returns:
            `(observation, reward, terminated, truncated, info)`.

        Raises:
            ValueError: `action` is not in `action_space`.
            gymnasium.error.ResetNeeded: no `reset` yet, or the last step returned
                `terminated` or `truncated` (the state is left as it was).
        """
        if self.state is None:
            raise gymnasium.error.ResetNeeded("GymnasiumEnv: call reset() before step()")
        if self._ended is not None:
            raise gymnasium.error.ResetNeeded(
                f"GymnasiumEnv: the episode ended (the last step returned {self._ended}=True); "
                "call reset() before step()"
            )
        self.state, out = self._step_fn(self.state, self._encode(action))
        leaves, reward, terminated, truncated, info = self._step_out(out)
        terminated, truncated = bool(terminated), bool(truncated)
        if terminated or truncated:
            self._ended = "terminated" if terminated else "truncated"
        obs = self._build_obs(leaves)
        return obs, float(reward), terminated, truncated, _writable(info)

    def render(self) -> None:
        """No rendering (`render_mode` is `None`)."""
        return None

    def __repr__(self) -> str:
        return f"GymnasiumEnv({self.env!r})"
