"""`MJXAdapter`: a MuJoCo Playground environment as a Parallax environment.

Where the episode length comes from. Playground environments carry their training settings
(`episode_length`, `action_repeat`) in a `ConfigDict` that the environment keeps only in
the private `env._config`: `MjxEnv`'s public surface (playground 0.2) is `reset`, `step`,
`action_size`, `observation_size`, `dt`, `sim_dt`, `n_substeps`, `mj_model`, `mjx_model`,
`xml_path`, `model_assets`, `render` and `unwrapped`, none of which holds it. The public
source is the config the env is built from, `registry.get_default_config(name)`, which is
also where playground's own training code reads `episode_length` (its `brax_ppo_config`).
The adapter therefore takes the episode length, in this order, from:

1. the `episode_length` argument;
2. brax's `EpisodeWrapper`, when the env comes wrapped for training
   (`wrapper.wrap_for_brax_training`), which the adapter removes;
3. the public `config` passed to it (`config.episode_length`).

`MJXAdapter.load(name, ...)` (and `parallax.make("mjx/NAME")`) builds the env from that
public config, so its episode length is always known. An env given without any of these
gets no time limit, and the adapter logs a warning (logger `parallax.adapters._mjx`) that
says how to give one. The adapter never reads `env._config`.
"""

from __future__ import annotations

import logging
from typing import Any

import jax

from ._common import episode_settings, foreign_numerics
from ._imports import require
from ._physics import EpisodeAdapter, physics_spaces, strip_training_wrappers

__all__ = ["MJXAdapter"]

_log = logging.getLogger(__name__)


def _playground() -> Any:
    return require("mujoco_playground", extra="mjx", needed_by="MJXAdapter")


def _config_value(config: Any, name: str) -> Any:
    """`config.name`, or `None` when the config has no such entry."""
    return config.get(name) if hasattr(config, "get") else getattr(config, name, None)


def warp_runs_on(backend: str) -> bool:
    """Whether MuJoCo Warp (playground's `impl="warp"`) runs on JAX backend `backend`.

    Warp compiles CUDA kernels, so only JAX's `"gpu"`/`"cuda"` backend on NVIDIA hardware
    runs it; `"cpu"`, `"tpu"`, `"rocm"` and `"METAL"` do not.
    """
    return backend.lower() in ("gpu", "cuda") and not _is_rocm()


def _is_rocm() -> bool:
    try:
        return "rocm" in str(jax.devices()[0].client.platform_version).lower()
    except Exception:  # no device query possible: assume the common NVIDIA case
        return False


def implementation_for(backend: str, configured: str) -> str:
    """The MJX implementation to build with on `backend`, given the config's `configured` one.

    The configured implementation is kept when it runs there; `"warp"` off an NVIDIA GPU
    becomes `"jax"`, the pure-JAX implementation that runs on every backend.

    Example:
        >>> from parallax.adapters._mjx import implementation_for
        >>> implementation_for("tpu", "warp"), implementation_for("cpu", "warp")
        ('jax', 'jax')
        >>> implementation_for("tpu", "jax")
        'jax'
    """
    if configured == "warp" and not warp_runs_on(backend):
        return "jax"
    return configured


class MJXAdapter(EpisodeAdapter):
    """A MuJoCo Playground (MJX) environment as a Parallax environment.

    Args:
        env: a playground `MjxEnv` (`registry.load(name, ...)`), possibly wrapped by
            `wrapper.wrap_for_brax_training` (its auto-reset, vmap and episode wrappers are
            removed; domain-randomisation wrappers are refused).
        episode_length: positive int, the time limit in env steps; see the module
            docstring for where it comes from when `None` (when it is found nowhere,
            the env has no time limit and a warning is logged).
        action_repeat: positive int; `None`: the removed `EpisodeWrapper`'s, else
            `config.action_repeat`, else 1.
        config: the public `ConfigDict` the env was built from (e.g.
            `registry.get_default_config(name)`), read for `episode_length` and
            `action_repeat`.

    Attributes:
        env, episode_length, action_repeat: the unwrapped env and the resolved settings.
        observation_space: unbounded `Box`, or a `PyTreeSpace` of them for dict
            observations (keys as in the env's observation).
        action_space: `Box(-1, 1, (action_size,))`, the range playground's policies emit.

    The state: `env_state` is playground's `State`; `info["metrics"]` holds its `metrics`.

    Raises:
        ImportError: MuJoCo Playground is not installed (the message names the `mjx` extra to install).
        TypeError: `env` is not a playground `MjxEnv` (or training wrappers around one).
        ValueError: a bad `episode_length` / `action_repeat`, or wrappers that cannot be
            removed (domain randomisation, or a removable wrapper below a custom one).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax.adapters import MJXAdapter
        >>> env = MJXAdapter.load("PendulumSwingup", config_overrides={"impl": "jax"})
        >>> env.episode_length, env.observation_space.shape
        (1000, (3,))
        >>> def first_step(key):
        ...     return env.step(env.reset(key=key), jnp.zeros(1))
        >>> shapes = jax.eval_shape(first_step, jax.random.key(0))  # traced, not compiled
        >>> shapes.reward.dtype, shapes.step_count.dtype
        (dtype('float32'), dtype('int32'))
    """

    def __init__(
        self,
        env: Any,
        episode_length: int | None = None,
        action_repeat: int | None = None,
        *,
        config: Any = None,
    ) -> None:
        playground = _playground()
        brax_envs = require("brax.envs", extra="mjx", needed_by="MJXAdapter")
        training = brax_envs.training
        wrapper = playground.wrapper
        if not isinstance(env, playground.MjxEnv | brax_envs.Wrapper):
            raise TypeError(
                "MJXAdapter: env must be a MuJoCo Playground MjxEnv (e.g. "
                f"mujoco_playground.registry.load('CartpoleBalance')), got {type(env).__name__}"
            )
        base, found_length, found_repeat = strip_training_wrappers(
            env,
            owner="MJXAdapter",
            wrapper_types=(wrapper.Wrapper, brax_envs.Wrapper),
            strip=(wrapper.BraxAutoResetWrapper, training.VmapWrapper, training.EvalWrapper),
            episode=training.EpisodeWrapper,
            refuse=(wrapper.BraxDomainRandomizationVmapWrapper,),
        )
        if not isinstance(base, playground.MjxEnv):
            raise TypeError(
                f"MJXAdapter: env must wrap a playground MjxEnv, found {type(base).__name__}"
            )
        if config is not None:
            if found_length is None:
                found_length = _config_value(config, "episode_length")
            if found_repeat is None:
                found_repeat = _config_value(config, "action_repeat")
        self.env = base
        self.config = config
        self.episode_length, self.action_repeat = episode_settings(
            "MJXAdapter", episode_length, action_repeat, found_length, found_repeat
        )
        if self.episode_length is None:
            # a logged warning, not `warnings.warn`: the parallax-rl documentation's own
            # example adapts a bare env, and must run cleanly where warnings are errors
            _log.warning(
                "MJXAdapter: no episode length for %s, so the env has no time limit. "
                "Playground keeps it in the env's private _config, which the adapter does "
                "not read; pass episode_length=..., or config= (the config the env was "
                "built from, e.g. registry.get_default_config(name)), or build the env with "
                "MJXAdapter.load(name)",
                type(base).__name__,
            )

        self.observation_space, self.action_space = physics_spaces(base)

    @classmethod
    def load(
        cls,
        name: str,
        config: Any = None,
        config_overrides: dict[str, Any] | None = None,
        *,
        episode_length: int | None = None,
        action_repeat: int | None = None,
    ) -> MJXAdapter:
        """Build playground's `name` from its public config and adapt it.

        Args:
            name: a playground environment name (`registry.ALL_ENVS`), e.g.
                `"CartpoleBalance"`.
            config: the config to build from; `None` for `registry.get_default_config(name)`.
            config_overrides: flattened overrides (`{"impl": "jax"}`), applied by playground.
                Unless `impl` is overridden, the adapter picks one that exists on JAX's default
                backend (`implementation_for`): playground's default `"warp"` (MuJoCo Warp)
                runs only on NVIDIA GPUs, so on a CPU, a TPU or another GPU it picks `"jax"`.
            episode_length, action_repeat: override the config's values.

        Returns:
            The adapted environment; its episode length is the config's `episode_length`.
        """
        registry = _playground().registry
        if not isinstance(name, str) or name not in registry.ALL_ENVS:
            raise ValueError(
                f"MJXAdapter.load: name must be one of mujoco_playground.registry.ALL_ENVS, "
                f"got {name!r}"
            )
        overrides = dict(config_overrides or {})
        backend = jax.default_backend()
        if overrides.get("impl") == "warp" and not warp_runs_on(backend):
            raise ValueError(
                f"MJXAdapter.load: config_overrides['impl']='warp' needs an NVIDIA GPU (MuJoCo "
                f"Warp), but JAX's default backend is {backend!r}; use 'jax' (runs everywhere)"
            )
        with foreign_numerics():
            if config is None:
                config = registry.get_default_config(name)
            if "impl" not in overrides and "impl" in config:
                chosen = implementation_for(backend, str(config.impl))
                if chosen != config.impl:
                    overrides["impl"] = chosen
            env = registry.load(name, config=config, config_overrides=overrides or None)
        # playground applies the overrides to this config object, and some envs adjust it
        # while building (e.g. vision cartpole shortens episode_length), so read it now.
        return cls(env, episode_length, action_repeat, config=config)

    def __repr__(self) -> str:
        return (
            f"MJXAdapter({type(self.env).__name__}, episode_length={self.episode_length}, "
            f"action_repeat={self.action_repeat})"
        )
