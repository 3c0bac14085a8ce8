"""The namespaces `gymnax/NAME`, `brax/NAME` and `mjx/NAME` of `parallax.make`.

- `make_gymnax(name, **kw)` / `gymnax_names()`
- `make_brax(name, **kw)` / `brax_names()`
- `make_mjx(name, **kw)` / `mjx_names()`

Each `*_names()` raises `ImportError` when its library is missing, so that
`parallax.registered_ids()` skips the namespace.
"""

from __future__ import annotations

from typing import Any

from ._brax import BraxAdapter
from ._common import foreign_numerics
from ._gymnax import GymnaxAdapter
from ._imports import require
from ._mjx import MJXAdapter

__all__ = ["brax_names", "gymnax_names", "make_brax", "make_gymnax", "make_mjx", "mjx_names"]


def make_gymnax(name: str, *, params: Any = None, **kwargs: Any) -> GymnaxAdapter:
    """`GymnaxAdapter(gymnax.make(name, **kwargs)[0], params)`.

    Example:
        >>> import parallax
        >>> parallax.make("gymnax/CartPole-v1").observation_space.shape
        (4,)
    """
    gymnax = require("gymnax", extra="gymnax", needed_by="make('gymnax/...')")
    with foreign_numerics():
        env, _ = gymnax.make(name, **kwargs)
    return GymnaxAdapter(env, params)


def gymnax_names() -> list[str]:
    """Every environment gymnax registers (`gymnax.registered_envs`)."""
    gymnax = require("gymnax", extra="gymnax", needed_by="gymnax_names")
    return list(gymnax.registered_envs)


def make_brax(
    name: str,
    *,
    episode_length: int | None = None,
    action_repeat: int | None = None,
    **kwargs: Any,
) -> BraxAdapter:
    """`BraxAdapter(brax.envs.get_environment(name, **kwargs), episode_length, action_repeat)`.

    Example:
        >>> import parallax
        >>> parallax.make("brax/fast", episode_length=10).episode_length
        10
    """
    envs = require("brax.envs", extra="brax", needed_by="make('brax/...')")
    with foreign_numerics():
        env = envs.get_environment(name, **kwargs)
    return BraxAdapter(env, episode_length, action_repeat)


def brax_names() -> list[str]:
    """The environments registered with brax (`brax.envs.get_environment` names).

    brax 0.14 has no public listing; this reads the registry dict that
    `brax.envs.register_environment` fills.
    """
    envs = require("brax.envs", extra="brax", needed_by="brax_names")
    return sorted(getattr(envs, "_envs", {}))


def make_mjx(name: str, **kwargs: Any) -> MJXAdapter:
    """`MJXAdapter.load(name, **kwargs)` (`config`, `config_overrides`, `episode_length`,
    `action_repeat`)."""
    return MJXAdapter.load(name, **kwargs)


def mjx_names() -> list[str]:
    """Every MuJoCo Playground environment (`registry.ALL_ENVS`)."""
    playground = require("mujoco_playground", extra="mjx", needed_by="mjx_names")
    return list(playground.registry.ALL_ENVS)
