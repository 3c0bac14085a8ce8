"""What `BraxAdapter` and `MJXAdapter` share: both libraries' states have `obs`, `reward`,
`done`, `metrics` and `info`, and both are trained through brax's training wrappers.

- `strip_training_wrappers`: remove auto-reset / episode / vmap wrappers, keeping what the
  episode wrapper meant (its `episode_length` and `action_repeat`).
- `physics_spaces`: the observation and action spaces of such an env.
- `EpisodeAdapter`: `reset` / `step` with action repeat and a time limit, the way brax's
  `EpisodeWrapper` computes them, without auto-reset and without batching.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import PyTree

from .._action_check import check_action
from .._core import KeyArray, State
from .._spaces import Box, Space
from .._validate import check_key
from ._common import (
    cast_to_space,
    foreign_numerics,
    like,
    raw_key,
    stable_dtypes,
    strong,
    unbounded_space,
)

__all__ = ["EpisodeAdapter", "physics_spaces", "strip_training_wrappers"]


def strip_training_wrappers(
    env: Any,
    *,
    owner: str,
    wrapper_types: tuple[type, ...],
    strip: tuple[type, ...],
    episode: type,
    refuse: tuple[type, ...],
) -> tuple[Any, int | None, int | None]:
    """Peel the training wrappers off `env`, outermost first.

    Args:
        env: the environment, possibly wrapped.
        owner: the adapter's name, for error messages.
        wrapper_types: the library's wrapper base classes (each has `.env`).
        strip: wrapper types removed without a trace (auto-reset, vmap, eval metrics).
        episode: the episode wrapper type, whose `episode_length` / `action_repeat` are kept.
        refuse: wrapper types that cannot be removed without changing the environment.

    Returns:
        `(env, episode_length, action_repeat)`: the env without those wrappers and the
        episode wrapper's settings (`None` where there was no episode wrapper).

    Raises:
        ValueError: a refused wrapper, two episode wrappers, or a removable wrapper below one
            this function does not know (it cannot be removed without rebuilding the other).
    """
    layer: Any = env
    length: int | None = None
    repeat: int | None = None
    while isinstance(layer, wrapper_types):
        if isinstance(layer, refuse):
            raise ValueError(
                f"{owner}: cannot adapt an env wrapped in {type(layer).__name__}: it batches "
                "randomised models, which a single Parallax env cannot hold; adapt the "
                "unwrapped env and batch it with VmapWrapper"
            )
        wrapped: Any = layer  # isinstance narrowed it to `object`
        if isinstance(layer, episode):
            if length is not None:
                raise ValueError(f"{owner}: env has two {episode.__name__}s; pass one at most")
            length, repeat = int(wrapped.episode_length), int(wrapped.action_repeat)
        elif not isinstance(layer, strip):
            break
        layer = wrapped.env
    below: Any = layer
    while isinstance(below, wrapper_types):
        if isinstance(below, (*strip, episode, *refuse)):
            raise ValueError(
                f"{owner}: cannot remove {type(below).__name__} from below "
                f"{type(layer).__name__}; adapt the env without it and put "
                f"{type(layer).__name__}'s behaviour in a Parallax wrapper instead"
            )
        inner: Any = below
        below = inner.env
    return layer, length, repeat


def physics_spaces(base: Any) -> tuple[Space, Box]:
    """`(observation_space, action_space)` of a brax-style env `base`.

    The observation space is unbounded, with the shapes and dtypes of one traced `reset`
    (under JAX's default numeric rules); the action space is `Box(-1, 1, (action_size,))`.
    """

    def reset_shapes(key: Any) -> Any:
        with foreign_numerics():
            return base.reset(key).obs

    observation_space = unbounded_space(jax.eval_shape(reset_shapes, jax.random.PRNGKey(0)))
    return observation_space, Box(-1.0, 1.0, (int(base.action_size),))


def _like_dict(new: dict[str, Any], previous: Any) -> dict[str, Any]:
    """`new` with each entry cast to the dtype of the same key in `previous` (if there)."""
    previous = previous if isinstance(previous, dict) else {}
    return {k: like(v, previous[k]) if k in previous else v for k, v in new.items()}


def _copied(info: Any) -> Any:
    """A shallow copy of a dict (what brax's `State.info` is), anything else as is."""
    return dict(info) if isinstance(info, dict) else info


def _like_ctrl(action: PyTree, foreign: PyTree) -> PyTree:
    """`action` in the dtype of the MJX `data.ctrl` it is written to, where there is one.

    Under x64 playground's reset builds `data` in float64, and a float32 action (the action
    space's dtype) written to `ctrl` would change the type of its substep `scan`'s carry.
    """
    ctrl = getattr(getattr(foreign, "data", None), "ctrl", None)
    if ctrl is None:
        return action
    return jnp.asarray(action).astype(jnp.result_type(ctrl))


class EpisodeAdapter:
    """`reset` / `step` for a brax-style env (`State(obs, reward, done, metrics, info)`).

    Subclasses set `env`, `episode_length`, `action_repeat`, `observation_space`,
    `action_space`. A step applies the action `action_repeat` times (brax's
    `EpisodeWrapper`: rewards summed, `done` of the last inner step), counts one agent step,
    and truncates when `step_count * action_repeat >= episode_length` and the env did not
    terminate. The foreign state is `env_state`; its `metrics` are `info["metrics"]`.
    `step` refuses, at trace time, an action of the wrong shape or dtype kind while
    `check_actions` is True (the default; see `parallax.check_action`).
    """

    env: Any
    episode_length: int | None
    action_repeat: int
    observation_space: Space
    action_space: Space
    check_actions: bool = True

    def reset(self, *, key: KeyArray) -> State:
        """Start an episode: the env's `reset` with the raw key `jax.random.split(key)[1]`.

        Args:
            key: a PRNG key, typed (`jax.random.key`) or raw (`jax.random.PRNGKey`).

        Returns:
            The first `State` (reward 0, both flags False, step_count 0).
        """
        check_key(key, f"{type(self).__name__}.reset")
        key, reset_key = jax.random.split(key)
        with foreign_numerics():
            foreign = self.env.reset(raw_key(reset_key))
        foreign = strong(foreign)
        # metrics in fixed dtypes: under x64 brax computes some as float64 at reset and
        # float32 after a step, which would change the state's pytree type between the two
        foreign = foreign.replace(metrics=stable_dtypes(dict(foreign.metrics)))
        return State(
            env_state=foreign,
            observation=cast_to_space(foreign.obs, self.observation_space),
            reward=jnp.float32(0.0),
            termination=jnp.bool_(False),
            truncation=jnp.bool_(False),
            info={"metrics": dict(foreign.metrics)},
            step_count=jnp.int32(0),
            key=key,
        )

    def _inner_step(self, foreign: PyTree, action: PyTree) -> PyTree:
        # brax updates `metrics` (and `info`) in place: hand it copies, so that `foreign`
        # keeps the dtypes the result is cast back to
        given = foreign.replace(metrics=dict(foreign.metrics), info=_copied(foreign.info))
        stepped = self.env.step(given, action)
        return like(stepped.replace(metrics=stable_dtypes(dict(stepped.metrics))), foreign)

    def step(self, state: State, action: PyTree) -> State:
        """Apply `action` `action_repeat` times; no auto-reset.

        Args:
            state: the current state.
            action: a float array of shape `action_space.shape`.

        Returns:
            The next `State`: the summed reward, `termination` from the env's `done`
            unless its `info["truncation"]` says the episode was cut (brax's convention),
            `truncation` then or at the episode length (never both).
        """
        if self.check_actions:
            owner = f"{type(self).__name__}({type(self.env).__name__}).step"
            check_action(self.action_space, action, owner)
        foreign = state.env_state
        action = _like_ctrl(action, foreign)
        with foreign_numerics():
            if self.action_repeat == 1:
                stepped = self._inner_step(foreign, action)
            else:

                def repeat(carry: PyTree, _: None) -> tuple[PyTree, Any]:
                    out = self._inner_step(carry, action)
                    return out, out.reward

                stepped, rewards = jax.lax.scan(repeat, foreign, None, length=self.action_repeat)
                stepped = stepped.replace(reward=jnp.sum(rewards, axis=0))
        done = jnp.reshape(stepped.done, ()).astype(jnp.bool_)
        # brax's convention: a `done` with `info["truncation"]` set is a truncation (brax's
        # EpisodeWrapper and exported Parallax envs set it; raw brax/MJX envs have no entry)
        cut = stepped.info.get("truncation") if isinstance(stepped.info, dict) else None
        cut = jnp.bool_(False) if cut is None else jnp.reshape(cut, ()).astype(jnp.bool_)
        termination = done & ~cut
        step_count = state.step_count + 1
        truncation = done & cut
        if self.episode_length is not None:
            limit = step_count * self.action_repeat >= self.episode_length
            truncation = (truncation | limit) & ~termination
        return State(
            env_state=stepped,
            observation=cast_to_space(stepped.obs, self.observation_space),
            reward=jnp.reshape(stepped.reward, ()).astype(jnp.float32),
            termination=termination,
            truncation=truncation,
            info={"metrics": _like_dict(dict(stepped.metrics), state.info.get("metrics"))},
            step_count=step_count,
            key=state.key,
        )
