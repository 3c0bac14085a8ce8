"""`AutoResetWrapper`: start a new episode as soon as one ends, keeping what the learner needs.

Three declared modes (`AutoResetWrapper.mode`):

- `"same-step"` (default; sekai native vector envs, Stable-Baselines3, brax): on the step an
  episode ends, the returned state is the fresh reset state, but `reward`, `termination`
  and `truncation` are those of the finished step, and the terminal observation is kept in
  `info["final_observation"]` (with the terminal `info` in `info["final_info"]`).
- `"next-step"` (Gymnasium >= 1.0 vector envs): the step that ends an episode is returned
  as it is; the *following* step ignores its action and returns the reset state (reward 0,
  both flags False).
- `"off"`: no auto-reset; the wrapper is transparent.

In the first two modes `info["final_observation"]` and `info["final_info"]` exist from
`reset` on (equal to the current observation and info when no episode has just ended), so
the pytree structure never changes. Every episode starts from a reset drawn with a new key,
derived from the finished episode's key.

State that survives resets (`reset_uses_previous`): an env whose innermost layer declares
`reset_uses_previous = True` gets the finished episode's state as
`reset(key=..., previous=state)` on every auto-reset (a finance env's sequential walk
through a history reads its last window there). Envs that do not declare it are reset
exactly as before, with `key=` only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

import jax
from jaxtyping import Array, PyTree

from .._core import Env, KeyArray, MARLState, StateT
from .base import Wrapper, is_vector_env, unwrap_layers

AutoResetMode = Literal["same-step", "next-step", "off"]
_MODES = ("same-step", "next-step", "off")
FINAL_OBSERVATION = "final_observation"
FINAL_INFO = "final_info"
_RESET_SALT = 0x5EED


def reset_uses_previous(env: Any) -> bool:
    """Whether the innermost env of `env` reads `reset(key=..., previous=state)`.

    An env opts in with a truthy `reset_uses_previous` attribute (class attribute or
    property); `AutoResetWrapper` and `VmapWrapper` then pass the finished episode's state
    (per env) to its resets. The wrappers between them and the env must pass keyword
    arguments on, as `Wrapper.reset` does.
    """
    return bool(getattr(unwrap_layers(env)[-1], "reset_uses_previous", False))


def _next_episode_key(key: KeyArray) -> KeyArray:
    """The key of the episode that follows one whose state held `key`."""
    return jax.random.fold_in(key, _RESET_SALT)


def _observation(state: Any) -> PyTree:
    """The observation of a `State`, or the per-agent observations of a `MARLState`."""
    return state.agents.observation if isinstance(state, MARLState) else state.observation


def _keep_outcome(fresh: Any, stepped: Any) -> Any:
    """`fresh` with the reward and episode flags of `stepped` (the step that ended)."""
    if isinstance(fresh, MARLState):
        agents = replace(fresh.agents, reward=stepped.agents.reward)
        return replace(
            fresh,
            agents=agents,
            termination=stepped.termination,
            truncation=stepped.truncation,
        )
    return replace(
        fresh,
        reward=stepped.reward,
        termination=stepped.termination,
        truncation=stepped.truncation,
    )


def _check_info(info: Any, where: str) -> None:
    if not isinstance(info, dict):
        raise TypeError(
            f"AutoResetWrapper needs the env's `info` to be a dict (it adds "
            f"'{FINAL_OBSERVATION}' and '{FINAL_INFO}'), got {type(info).__name__} from {where}"
        )


class AutoResetWrapper(Wrapper[StateT]):
    """Restart episodes as they end (same-step by default); see the module docstring.

    Wraps a single env or a vector env (then the reset is batch-level and skipped when no
    env is done). `VmapWrapper(AutoResetWrapper(env), n)` is equivalent to
    `AutoResetWrapper(VmapWrapper(env, n))` and uses the same batch-level reset.

    Args:
        env: the environment, usually `TimeLimit(env, max_steps)`.
        mode: `"same-step"`, `"next-step"` or `"off"`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import AutoResetWrapper, TimeLimit
        >>> from parallax.envs import GridWorld
        >>> env = AutoResetWrapper(TimeLimit(GridWorld(), max_steps=1))
        >>> s = env.step(env.reset(key=jax.random.key(0)), 0)
        >>> bool(s.truncation), int(s.step_count), s.info["final_observation"].shape
        (True, 0, (4,))
    """

    def __init__(self, env: Env[StateT], mode: str = "same-step") -> None:
        # `mode` is typed `str` (not the Literal) so a wrong value reaches the clear error below.
        super().__init__(env)
        if mode not in _MODES:
            raise ValueError(f"AutoResetWrapper: mode must be one of {_MODES}, got {mode!r}")
        self.mode: AutoResetMode = mode  # type: ignore[assignment]
        self._vector = is_vector_env(env)

    # -- helpers -------------------------------------------------------------------------
    def _strip(self, state: StateT) -> StateT:
        """The state as the wrapped env produced it (without our info keys)."""
        info = {k: v for k, v in state.info.items() if k not in (FINAL_OBSERVATION, FINAL_INFO)}
        return replace(state, info=info)

    @staticmethod
    def _decorate(state: StateT, final_observation: PyTree, final_info: dict[str, Any]) -> StateT:
        info = {**state.info, FINAL_OBSERVATION: final_observation, FINAL_INFO: final_info}
        return replace(state, info=info)

    def _reset_next_episode(self, key_source: StateT, state: StateT, done: Array) -> StateT:
        """`state` with the envs where `done` reset; their keys come from `key_source.key`."""
        from .vmap import VmapWrapper

        env: Any = self.env
        if isinstance(env, VmapWrapper):  # derive keys only for the envs that reset
            return env._reset_where(key_source.key, state, done, key_fn=_next_episode_key)
        if self._vector:
            keys = jax.vmap(_next_episode_key)(key_source.key)
            return env.reset(key=keys, state=state, done=done)
        if reset_uses_previous(env):
            return jax.lax.cond(
                done,
                lambda: env.reset(key=_next_episode_key(key_source.key), previous=state),
                lambda: state,
            )
        return jax.lax.cond(
            done, lambda: env.reset(key=_next_episode_key(key_source.key)), lambda: state
        )

    # -- protocol ------------------------------------------------------------------------
    def reset(self, *, key: KeyArray, **kwargs: Any) -> StateT:
        """Reset (selective-reset arguments pass through to a vector env below)."""
        if self.mode == "off":
            return self.env.reset(key=key, **kwargs)
        if kwargs.get("state") is not None:
            kwargs["state"] = self._strip(kwargs["state"])
        env: Any = self.env
        state = env.reset(key=key, **kwargs)
        _check_info(state.info, "reset")
        return self._decorate(state, _observation(state), dict(state.info))

    def step(self, state: StateT, action: PyTree) -> StateT:
        """Step; where the episode ended, reset according to `mode`."""
        if self.mode == "off":
            return self.env.step(state, action)
        inner = self._strip(state)
        stepped = self.env.step(inner, action)
        _check_info(stepped.info, "step")
        if self.mode == "same-step":
            fresh = self._reset_next_episode(stepped, stepped, stepped.done)
            out = _keep_outcome(fresh, stepped)
            return self._decorate(out, _observation(stepped), dict(stepped.info))
        # next-step: the state passed in ended an episode -> this step is the reset.
        fresh = self._reset_next_episode(inner, stepped, inner.done)
        return self._decorate(fresh, _observation(fresh), dict(fresh.info))

    def _repr_args(self) -> str:
        return "" if self.mode == "same-step" else f"mode={self.mode!r}"


def final_observation(state: Any) -> PyTree:
    """The terminal observation of the step that produced `state` (auto-reset aware).

    Returns `state.info["final_observation"]` when an `AutoResetWrapper` put it there, else
    `state.observation`.
    """
    info = state.info
    if isinstance(info, dict) and FINAL_OBSERVATION in info:
        return info[FINAL_OBSERVATION]
    return _observation(state)
