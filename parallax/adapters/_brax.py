"""`BraxAdapter`: a brax environment as a Parallax environment.

brax's training wrappers (`brax.envs.create(...)`, `brax.envs.training.wrap(...)`) mix three
jobs: batching (`VmapWrapper`), the time limit and action repeat (`EpisodeWrapper`) and
auto-reset (`AutoResetWrapper`, which overwrites the terminal observation). The adapter
removes all three and keeps what they meant: the episode length and the action repeat of
the `EpisodeWrapper` (unless given explicitly). Batching is `VmapWrapper`'s job, auto-reset
`AutoResetWrapper`'s, and the terminal observation survives.
"""

from __future__ import annotations

from typing import Any

from ._common import episode_settings
from ._imports import require
from ._physics import EpisodeAdapter, physics_spaces, strip_training_wrappers

__all__ = ["BraxAdapter"]


class BraxAdapter(EpisodeAdapter):
    """A brax environment as a Parallax environment, its training wrappers stripped.

    Args:
        env: a brax `Env`: plain (`brax.envs.get_environment("ant")`) or wrapped by brax's
            training wrappers (`brax.envs.create(..., batch_size=...)`,
            `brax.envs.training.wrap(...)`); `AutoResetWrapper`, `VmapWrapper`,
            `EvalWrapper` and `EpisodeWrapper` are removed.
        episode_length: positive int, the time limit in brax env steps (truncation once
            `step_count * action_repeat >= episode_length`). `None`: the removed
            `EpisodeWrapper`'s, or no time limit if there was none.
        action_repeat: positive int, how often each action is applied per step (rewards
            summed). `None`: the removed `EpisodeWrapper`'s, or 1.

    Attributes:
        env: the brax env without its training wrappers.
        episode_length, action_repeat: as resolved above.
        observation_space: unbounded `Box` (a `PyTreeSpace` for dict observations) with the
            shapes and dtypes of the env's reset observation.
        action_space: `Box(-1, 1, (action_size,))`, the range brax's envs and training
            algorithms use (brax's own Gym export uses the actuators' `ctrl_range`
            instead, which is wrong for envs that rescale, such as `inverted_pendulum`).

    The state: `env_state` is brax's `State`; `info["metrics"]` holds brax's `metrics`
    (same keys and dtypes on reset and step); `step_count` counts agent steps. Typed
    (`jax.random.key`) and raw keys both work, batched or not: brax receives raw keys.

    Raises:
        ImportError: brax is not installed (the message names the `brax` extra to install).
        TypeError: `env` is not a brax `Env`.
        ValueError: a bad `episode_length` / `action_repeat`, or wrappers that cannot be
            removed (domain randomisation, or a removable wrapper below a custom one).

    Example:
        >>> import brax.envs, jax, jax.numpy as jnp
        >>> from parallax.adapters import BraxAdapter
        >>> env = BraxAdapter(brax.envs.create("fast", episode_length=4, action_repeat=2))
        >>> env.episode_length, env.action_repeat
        (4, 2)
        >>> state = env.reset(key=jax.random.key(0))
        >>> state = env.step(state, jnp.ones(1))
        >>> state = env.step(state, jnp.ones(1))
        >>> bool(state.truncation), int(state.step_count)
        (True, 2)
    """

    def __init__(
        self, env: Any, episode_length: int | None = None, action_repeat: int | None = None
    ) -> None:
        envs = require("brax.envs", extra="brax", needed_by="BraxAdapter")
        training = envs.training
        if not isinstance(env, envs.Env):
            raise TypeError(
                "BraxAdapter: env must be a brax Env (e.g. brax.envs.get_environment('ant')), "
                f"got {type(env).__name__}"
            )
        base, found_length, found_repeat = strip_training_wrappers(
            env,
            owner="BraxAdapter",
            wrapper_types=(envs.Wrapper,),
            strip=(training.AutoResetWrapper, training.VmapWrapper, training.EvalWrapper),
            episode=training.EpisodeWrapper,
            refuse=(training.DomainRandomizationVmapWrapper,),
        )
        self.env = base
        self.episode_length, self.action_repeat = episode_settings(
            "BraxAdapter", episode_length, action_repeat, found_length, found_repeat
        )

        # brax's envs take actions in [-1, 1] (e.g. inverted_pendulum rescales them to its
        # actuator range itself) and its training algorithms emit tanh-squashed actions.
        self.observation_space, self.action_space = physics_spaces(base)

    def __repr__(self) -> str:
        return (
            f"BraxAdapter({type(self.env).__name__}, episode_length={self.episode_length}, "
            f"action_repeat={self.action_repeat})"
        )
