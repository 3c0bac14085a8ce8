"""Parallax vector environments for Gymnasium users (this module imports `gymnasium`).

- `GymnasiumVectorEnv`: any `VmapWrapper`-ed environment as a `gymnasium.vector.VectorEnv`
  (Gymnasium >= 1.1, whose vector API declares auto-reset modes), next-step auto-reset by
  default.

It works like `GymnasiumEnv` (`_gymnasium`'s docstring): each call is one jitted function and
one device-to-host transfer, actions are checked against the batched action space, and seeds
become `jax.random.key(seed)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium
import jax
import numpy as np
from gymnasium.vector.utils import batch_space

from .._core import MARLState, State
from .._wrappers.autoreset import FINAL_INFO, FINAL_OBSERVATION, AutoResetWrapper
from .._wrappers.base import is_vector_env
from .._wrappers.transform import autoreset_mode
from .._wrappers.vmap import VmapWrapper
from ._gymnasium_host import (
    HostPacker,
    ObservationCodec,
    _check_options,
    _state_kind,
    action_encoder,
    check_parallax_env,
    seed_to_int,
)
from ._gymnasium_spaces import to_gymnasium_space

try:  # the vector API with declared auto-reset modes: Gymnasium >= 1.1
    from gymnasium.vector import AutoresetMode
except ImportError:  # pragma: no cover - exercised in a Gymnasium 0.29 environment
    AutoresetMode = None  # type: ignore[assignment,misc]

__all__ = ["GymnasiumVectorEnv"]


# -- vector environment -----------------------------------------------------------------------
_MODE_NAMES = ("next-step", "same-step", "off")


def _gymnasium_mode(mode: str) -> Any:
    assert AutoresetMode is not None
    return {
        "same-step": AutoresetMode.SAME_STEP,
        "next-step": AutoresetMode.NEXT_STEP,
        "off": AutoresetMode.DISABLED,
    }[mode]


def _mode_name(mode: Any) -> str | None:
    """`autoreset_mode` as a Parallax mode name (`None`: keep the stack's)."""
    if mode is None or mode in _MODE_NAMES:
        return mode  # type: ignore[no-any-return]
    if AutoresetMode is not None and isinstance(mode, AutoresetMode):
        return {
            AutoresetMode.NEXT_STEP: "next-step",
            AutoresetMode.SAME_STEP: "same-step",
            AutoresetMode.DISABLED: "off",
        }[mode]
    raise ValueError(
        "GymnasiumVectorEnv: autoreset_mode must be 'next-step', 'same-step', 'off', a "
        f"gymnasium.vector.AutoresetMode or None, got {mode!r}"
    )


def _with_autoreset(vector_env: Any, wanted: str | None) -> tuple[Any, str]:
    """The stack that auto-resets in mode `wanted` (see `GymnasiumVectorEnv`), and the mode."""
    have = autoreset_mode(vector_env)
    if wanted is None or wanted == have:
        return vector_env, have
    if have == "off":  # nothing auto-resets: add the auto-reset on the outside
        return AutoResetWrapper(vector_env, mode=wanted), wanted
    base = None
    if isinstance(vector_env, AutoResetWrapper) and vector_env.mode == have:
        base = vector_env.env  # make_vec's stack (VmapAutoResetWrapper): the batch below
    elif type(vector_env) is VmapWrapper and isinstance(vector_env.env, AutoResetWrapper):
        inner = vector_env.env  # per-env auto-reset under vmap: the same batch without it
        base = VmapWrapper(
            inner.env, vector_env.num_envs, max_resets_per_step=vector_env.max_resets_per_step
        )
    if base is None:
        raise ValueError(
            f"GymnasiumVectorEnv: autoreset_mode={wanted!r}, but vector_env auto-resets in "
            f"mode {have!r} below other wrappers, which cannot be rebuilt; build the stack "
            f"with AutoResetWrapper(..., mode={wanted!r}) or pass autoreset_mode={have!r}"
        )
    return (base if wanted == "off" else AutoResetWrapper(base, mode=wanted)), wanted


def _vector_info(info: dict[str, Any], num_envs: int) -> dict[str, Any]:
    """Gymnasium's vector `info`: each key's batch plus a `_key` mask (all present)."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        out[key] = _vector_info(value, num_envs) if isinstance(value, dict) else np.array(value)
        out[f"_{key}"] = np.ones(num_envs, dtype=np.bool_)
    return out


def _masked_info(info: dict[str, Any], mask: np.ndarray) -> dict[str, Any]:
    """Vector `info` whose entries count only where `mask` (Gymnasium's `final_info`)."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, dict):
            out[key] = _masked_info(value, mask)
        else:
            arr = np.asarray(value)
            m = mask.reshape(mask.shape + (1,) * (arr.ndim - 1))
            out[key] = np.where(m, arr, np.zeros_like(arr))
        out[f"_{key}"] = mask.copy()
    return out


def _public_info(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if k not in (FINAL_OBSERVATION, FINAL_INFO)}


class GymnasiumVectorEnv(gymnasium.vector.VectorEnv):  # type: ignore[type-arg]
    """A `VmapWrapper`-ed Parallax environment as a `gymnasium.vector.VectorEnv`.

    Needs Gymnasium >= 1.1 (its vector API declares auto-reset modes); on older versions
    building one raises an `ImportError` that says so.

    Auto-reset: `autoreset_mode` decides, and `metadata["autoreset_mode"]` declares it:

    - `"next-step"` (the default, Gymnasium's own default and the only mode its vector
      observation wrappers, e.g. `NormalizeObservation` and `FlattenObservation`, accept):
      the step that ends an episode returns its terminal observation; the following step
      ignores its action and returns the reset observation with reward 0 and both flags
      False. `AutoresetMode.NEXT_STEP`.
    - `"same-step"`: the step that ends an episode returns the reset observation, with the
      terminal one in `info["final_obs"]` (an object array, `None` where no episode ended)
      and the terminal info in `info["final_info"]`, masked by `info["_final_obs"]` /
      `info["_final_info"]`. `AutoresetMode.SAME_STEP`.
    - `"off"`: no auto-reset (`AutoresetMode.DISABLED`); reset finished envs with
      `reset(options={"reset_mask": mask})`, `VmapWrapper`'s selective reset (also
      available in the other modes).
    - `None`: keep the stack's own mode (`"off"` for a stack that does not auto-reset).

    The rule for the given stack, which is never modified: a stack that does not auto-reset
    gets an `AutoResetWrapper` in the wanted mode on the outside; a stack whose outermost
    layer is its auto-reset (`parallax.make_vec`'s `VmapAutoResetWrapper`, same-step by
    default, or `AutoResetWrapper(VmapWrapper(env))`), or `VmapWrapper(AutoResetWrapper(env))`,
    is rebuilt over the same env with the wanted mode (identical episodes and keys, only the
    timing convention changes); a stack whose auto-reset sits below other wrappers must
    already have the wanted mode (`ValueError` otherwise, saying how to build it).

    Args:
        vector_env: a Parallax vector environment (`VmapWrapper(...)`, or wrappers over one)
            whose states are single-agent `State`s.
        seed: optional non-negative int seeding `np_random` (keys of unseeded resets).
        autoreset_mode: `"next-step"` (default), `"same-step"`, `"off"`, a
            `gymnasium.vector.AutoresetMode`, or `None` (keep the stack's).

    Attributes:
        env: the Parallax vector environment that runs (auto-reset as declared).
        num_envs: the batch size.
        single_observation_space, single_action_space: one env's Gymnasium spaces.
        observation_space, action_space: the batched spaces.
        state: the current batched Parallax `State`.

    Example:
        >>> import numpy as np
        >>> import parallax
        >>> from parallax.adapters import GymnasiumVectorEnv
        >>> envs = GymnasiumVectorEnv(parallax.make_vec("GridWorld-v0", 4, max_episode_steps=5))
        >>> envs.metadata["autoreset_mode"]
        <AutoresetMode.NEXT_STEP: 'NextStep'>
        >>> obs, info = envs.reset(seed=0)
        >>> obs, rewards, terminations, truncations, info = envs.step(np.zeros(4, np.int64))
        >>> obs.shape, rewards.dtype, terminations.dtype
        ((4, 4), dtype('float32'), dtype('bool'))
    """

    def __init__(
        self, vector_env: Any, seed: int | None = None, *, autoreset_mode: Any = "next-step"
    ) -> None:
        if AutoresetMode is None:
            raise ImportError(
                "GymnasiumVectorEnv needs gymnasium>=1.1 (the vector API with autoreset modes), "
                f"found gymnasium {gymnasium.__version__}: pip install 'gymnasium>=1.1,<1.4' "
                "(GymnasiumEnv works with this version)",
                name="gymnasium",
            )
        check_parallax_env(vector_env, "GymnasiumVectorEnv")
        if not is_vector_env(vector_env):
            raise TypeError(
                "GymnasiumVectorEnv: vector_env must be a vector env such as "
                f"VmapWrapper(env, num_envs), got {type(vector_env).__name__}; use "
                "GymnasiumEnv for a single env"
            )
        vector_env, mode = _with_autoreset(vector_env, _mode_name(autoreset_mode))
        shapes = _state_kind(vector_env)
        if isinstance(shapes, MARLState) or not isinstance(shapes, State):
            raise TypeError(
                "GymnasiumVectorEnv: vector_env must return single-agent `State`s, got "
                f"{type(shapes).__name__}"
            )
        self._mode = mode
        self.env = vector_env
        self.num_envs = int(vector_env.num_envs)
        self.single_observation_space = to_gymnasium_space(vector_env.observation_space)
        self.single_action_space = to_gymnasium_space(vector_env.action_space)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": _gymnasium_mode(mode), "render_modes": []}
        self.render_mode = None
        self.state: State | None = None
        self._encode = action_encoder(
            self.action_space, vector_env.action_space, "GymnasiumVectorEnv.step"
        )
        obs = ObservationCodec(vector_env.observation_space, batched=True)
        self._build_obs = obs.host
        same_step = mode == "same-step"
        env = vector_env
        reset_packer, step_packer = (HostPacker("GymnasiumVectorEnv") for _ in range(2))
        self._reset_out, self._step_out = reset_packer.unpack, step_packer.unpack

        def reset_out(state: Any) -> Any:
            out = (obs.device(state.observation), _public_info(state.info))
            return state, reset_packer.pack(out)

        def step(state: Any, action: Any) -> Any:
            state = env.step(state, action)
            out = (state.reward, state.termination, state.truncation, _public_info(state.info))
            if same_step:
                final = (obs.device(state.info[FINAL_OBSERVATION]), state.info[FINAL_INFO])
                return state, step_packer.pack((obs.device(state.observation), *out, final))
            return state, step_packer.pack((obs.device(state.observation), *out))

        self._reset_fn: Callable[..., Any] = jax.jit(lambda key: reset_out(env.reset(key=key)))
        self._reset_where_fn: Callable[..., Any] = jax.jit(
            lambda key, state, done: reset_out(env.reset(key=key, state=state, done=done))
        )
        self._step_fn: Callable[..., Any] = jax.jit(step)
        if seed is not None:
            self._np_random, self._np_random_seed = gymnasium.utils.seeding.np_random(
                seed_to_int(seed)
            )

    def _draw_seed(self) -> int:
        return int(self.np_random.integers(0, 2**32, dtype=np.uint64))

    def _keys(self, seed: Any) -> Any:
        """One key (split by `VmapWrapper`) for an int seed, one per env for a list."""
        if seed is None:
            return jax.random.key(self._draw_seed())
        if isinstance(seed, list | tuple):
            if len(seed) != self.num_envs:
                raise ValueError(
                    f"GymnasiumVectorEnv.reset: a list of seeds needs num_envs={self.num_envs} "
                    f"entries, got {len(seed)}"
                )
            ints = [self._draw_seed() if s is None else seed_to_int(s) for s in seed]
            return jax.vmap(jax.random.key)(np.asarray(ints, dtype=np.uint32))
        return jax.random.key(seed_to_int(seed))

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env, or with `options={"reset_mask": mask}` only where `mask`.

        Args:
            seed: `None`, an int (one key, split across the envs) or a list of `num_envs`
                ints or `None`s (one key per env).
            options: `None`, or `{"reset_mask": bool array of shape (num_envs,)}`.

        Returns:
            `(observations, infos)` in Gymnasium's vector format.
        """
        options = _check_options(options, ("reset_mask",), "GymnasiumVectorEnv")
        if isinstance(seed, int | np.integer) and not isinstance(seed, bool):
            self._np_random, self._np_random_seed = gymnasium.utils.seeding.np_random(
                seed_to_int(seed)
            )
        keys = self._keys(seed)
        if "reset_mask" in options:
            mask = np.asarray(options["reset_mask"])
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(
                    "GymnasiumVectorEnv.reset: reset_mask must be a bool array of shape "
                    f"({self.num_envs},), got {mask.dtype} {mask.shape}"
                )
            if self.state is None:
                raise gymnasium.error.ResetNeeded(
                    "GymnasiumVectorEnv: reset() without reset_mask first"
                )
            self.state, out = self._reset_where_fn(keys, self.state, mask)
        else:
            self.state, out = self._reset_fn(keys)
        leaves, info = self._reset_out(out)
        return self._build_obs(leaves), _vector_info(info, self.num_envs)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every env (auto-resetting as `metadata["autoreset_mode"]` says).

        Args:
            actions: an element of `action_space` (leading dimension `num_envs`).

        Returns:
            `(observations, rewards, terminations, truncations, infos)`; rewards float32,
            flags bool, all of shape `(num_envs,)`.

        Raises:
            ValueError: `actions` is not in `action_space`.
        """
        if self.state is None:
            raise gymnasium.error.ResetNeeded("GymnasiumVectorEnv: call reset() before step()")
        self.state, out = self._step_fn(self.state, self._encode(actions))
        leaves, rewards, terminations, truncations, info, *final = self._step_out(out)
        infos = _vector_info(info, self.num_envs) if info else {}
        if final:
            done = terminations | truncations
            if done.any():
                final_leaves, final_info = final[0]
                final_obs = np.full(self.num_envs, None, dtype=object)
                for i in np.flatnonzero(done):
                    final_obs[i] = self._build_obs([leaf[i] for leaf in final_leaves])
                infos["final_obs"] = final_obs
                infos["_final_obs"] = done.copy()
                infos["final_info"] = _masked_info(final_info, done)
                infos["_final_info"] = done.copy()
        # writable, as Gymnasium's own vector envs return them
        rewards, terminations, truncations = (
            np.array(rewards),
            np.array(terminations),
            np.array(truncations),
        )
        return self._build_obs(leaves), rewards, terminations, truncations, infos

    def render(self) -> None:
        """No rendering (`render_mode` is `None`)."""
        return None

    def __repr__(self) -> str:
        return f"GymnasiumVectorEnv({self.env!r})"
