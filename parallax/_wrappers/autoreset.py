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

The reset is batch-level however the auto-reset is batched: over a vector env
(`AutoResetWrapper(VmapWrapper(env, n))`, or `VmapAutoResetWrapper(env, n)`, what
`make_vec` returns), and under `jax.vmap` of a single env's auto-reset
(`VmapWrapper(AutoResetWrapper(env), n)`, `jax.vmap(AutoResetWrapper(env).step)`, nested
vmaps over seeds x envs), whose reset carries a batching rule (`batch_reset.reset_one`).
Only the envs that finished are reset, and the reset is skipped entirely on steps where
none did; every env gets exactly the state it would get alone. Each new episode's key is
`next_episode_key(finished_key)`. Gradients flow through the step into every env that
continues; a new episode's first state is a fresh reset and carries none.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal, cast

import jax
from jaxtyping import Array, PyTree

from .._core import Env, KeyArray, MARLState, StateT
from .base import Wrapper, is_vector_env, step_env
from .batch_reset import reset_one
from .vmap import VmapWrapper

AutoResetMode = Literal["same-step", "next-step", "off"]
_MODES = ("same-step", "next-step", "off")
FINAL_OBSERVATION = "final_observation"
FINAL_INFO = "final_info"
_RESET_SALT = 0x5EED


def reset_uses_previous(env: Any) -> bool:
    """Whether the env below `env` reads `reset(key=..., previous=state)`.

    An env opts in with a truthy `reset_uses_previous` attribute (class attribute or
    property), which every `Wrapper` forwards; `AutoResetWrapper` and `VmapWrapper` then
    pass the finished episode's state (per env) to its resets. The wrappers between them
    and the env must pass keyword arguments on, as `Wrapper.reset` does.
    """
    return bool(getattr(env, "reset_uses_previous", False))


def next_episode_key(key: KeyArray) -> KeyArray:
    """The key of the episode that follows one whose state held `key` (the auto-reset's rule).

    A pure function of the finished episode's key, so the whole sequence of episodes of an
    env follows from its first key. An env that derives per-step keys from its episode key
    must not fold in the same word (`0x5EED`).

    Example:
        >>> import jax
        >>> from parallax import next_episode_key
        >>> key = jax.random.key(0)
        >>> bool((jax.random.key_data(next_episode_key(key)) != jax.random.key_data(key)).any())
        True
    """
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

    Wraps a single env or a vector env. However it is batched (`VmapAutoResetWrapper(env,
    n)`, `AutoResetWrapper(VmapWrapper(env, n))`, `VmapWrapper(AutoResetWrapper(env), n)`,
    `jax.vmap` over it, nested vmaps) the reset is batch-level: skipped when no env is done,
    only the finished envs' resets when few are, with the same results in every form.

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

    @property  # type: ignore[override]
    def autoreset_mode(self) -> AutoResetMode:
        """This wrapper's `mode`; when it is `"off"`, the mode of the stack below."""
        if self.mode != "off":
            return self.mode
        below = getattr(self.env, "autoreset_mode", "off")
        return cast(AutoResetMode, below if below in _MODES else "off")

    # -- helpers -------------------------------------------------------------------------
    def _strip(self, state: StateT) -> StateT:
        """The state as the wrapped env produced it (without our info keys)."""
        info = {k: v for k, v in state.info.items() if k not in (FINAL_OBSERVATION, FINAL_INFO)}
        return replace(state, info=info)

    @staticmethod
    def _decorate(state: StateT, final_observation: PyTree, final_info: dict[str, Any]) -> StateT:
        info = {**state.info, FINAL_OBSERVATION: final_observation, FINAL_INFO: final_info}
        return replace(state, info=info)

    def _reset_next_episode(
        self,
        key_source: StateT,
        state: StateT,
        done: Array,
        params: PyTree = None,
        finish: Any = None,
    ) -> StateT:
        """`state` with the envs where `done` reset; their keys come from `key_source.key`.

        `params` (when given) go to the resets too, so a new episode keeps the params the
        step was given (domain randomisation through an auto-reset). A reset env's state is
        `finish(fresh, state)` when `finish` is given (computed in the reset branch only).
        """
        env: Any = self.env
        if isinstance(env, VmapWrapper):  # derive keys only for the envs that reset
            return env._selective_reset(  # type: ignore[no-any-return]
                key_source.key, state, done, next_episode_key, params, finish
            )
        if self._vector:
            extra = {} if params is None else {"params": params}
            keys = jax.vmap(next_episode_key)(key_source.key)
            fresh = env.reset(key=keys, state=state, done=done, **extra)
            return fresh if finish is None else finish(fresh, state)
        # one env: a `lax.cond`; under `vmap`, a batch-level reset of the finished envs only
        return reset_one(  # type: ignore[no-any-return]
            env,
            key_source.key,
            state,
            done,
            key_fn=next_episode_key,
            params=params,
            with_previous=reset_uses_previous(env),
            finish=finish,
        )

    # -- protocol ------------------------------------------------------------------------
    def reset(self, *, key: KeyArray, **kwargs: Any) -> StateT:
        """Reset (selective-reset arguments pass through to a vector env below)."""
        if kwargs.get("params", 0) is None:
            del kwargs["params"]
        if self.mode == "off":
            return self.env.reset(key=key, **kwargs)
        if kwargs.get("state") is not None:
            kwargs["state"] = self._strip(kwargs["state"])
        env: Any = self.env
        state = env.reset(key=key, **kwargs)
        _check_info(state.info, "reset")
        return self._decorate(state, _observation(state), dict(state.info))

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Step; where the episode ended, reset according to `mode` (with `params`, when
        given, for the step and the reset alike)."""
        if self.mode == "off":
            return step_env(self.env, state, action, params)
        inner = self._strip(state)
        stepped = step_env(self.env, inner, action, params)
        _check_info(stepped.info, "step")
        if self.mode == "same-step":
            out = self._reset_next_episode(stepped, stepped, stepped.done, params, _keep_outcome)
            return self._decorate(out, _observation(stepped), dict(stepped.info))
        # next-step: the state passed in ended an episode -> this step is the reset.
        fresh = self._reset_next_episode(inner, stepped, inner.done, params)
        return self._decorate(fresh, _observation(fresh), dict(fresh.info))

    def _repr_args(self) -> str:
        return "" if self.mode == "same-step" else f"mode={self.mode!r}"


class VmapAutoResetWrapper(AutoResetWrapper[StateT]):
    """`num_envs` copies of `env`, auto-reset at batch level: `AutoResetWrapper(VmapWrapper(env))`.

    The stack it builds is the stack that runs: this wrapper, then a `VmapWrapper` of `env`.
    On each step the batch is stepped with `vmap`; then only the envs whose episode ended
    are reset (none on most steps: the reset is skipped batch-wide; at most
    `max_resets_per_step` of them through a gather and scatter; all, when more ended), each
    with the key `next_episode_key(finished_key)`, derived for those envs only. Results and
    cost are those of `VmapWrapper(AutoResetWrapper(env), num_envs)` and of `jax.vmap` over
    `AutoResetWrapper(env)` (whose reset has a batching rule); this wrapper also lets you
    choose the budget. `make_vec` returns it.

    Args:
        env: the environment, usually `TimeLimit(env, max_steps)`.
        num_envs: a positive int.
        mode: `"same-step"` (default), `"next-step"` or `"off"` (see `AutoResetWrapper`).
        max_resets_per_step: as `VmapWrapper`'s (`"auto"`, `None` or a positive int).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import TimeLimit, VmapAutoResetWrapper
        >>> from parallax.envs import GridWorld
        >>> env = VmapAutoResetWrapper(TimeLimit(GridWorld(), max_steps=1), num_envs=4)
        >>> env
        VmapAutoResetWrapper(VmapWrapper(TimeLimit(GridWorld(), max_steps=1), num_envs=4))
        >>> s = env.step(env.reset(key=jax.random.key(0)), jnp.zeros(4, jnp.int32))
        >>> s.truncation.tolist(), s.step_count.tolist()  # ended, and already restarted
        ([True, True, True, True], [0, 0, 0, 0])
    """

    def __init__(
        self,
        env: Env[StateT],
        num_envs: int,
        mode: str = "same-step",
        *,
        max_resets_per_step: int | str | None = "auto",
    ) -> None:
        vector = VmapWrapper(env, num_envs, max_resets_per_step=max_resets_per_step)
        super().__init__(vector, mode=mode)

    @property
    def max_resets_per_step(self) -> int | None:
        """The `VmapWrapper`'s reset budget per step."""
        return self.env.max_resets_per_step  # type: ignore[attr-defined, no-any-return]


def final_observation(state: Any) -> PyTree:
    """The terminal observation of the step that produced `state` (auto-reset aware).

    Returns `state.info["final_observation"]` when an `AutoResetWrapper` put it there, else
    `state.observation`.
    """
    info = state.info
    if isinstance(info, dict) and FINAL_OBSERVATION in info:
        return info[FINAL_OBSERVATION]
    return _observation(state)
