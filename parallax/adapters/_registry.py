"""The namespaces `gymnax/NAME`, `brax/NAME` and `mjx/NAME` of `parallax.make`.

- `make_gymnax(name, **kw)` / `gymnax_names()`
- `make_brax(name, **kw)` / `brax_names()`
- `make_mjx(name, **kw)` / `mjx_names()`

Each `*_names()` raises `ImportError` when its library is missing, so that
`parallax.registered_ids()` skips the namespace.
"""

from __future__ import annotations

from typing import Any

from .._validate import check_keywords, keywords_of
from ._brax import BraxAdapter
from ._common import foreign_numerics
from ._gymnax import GymnaxAdapter
from ._imports import require
from ._mjx import MJXAdapter

__all__ = [
    "BRAX_BACKENDS",
    "brax_names",
    "gymnax_names",
    "make_brax",
    "make_gymnax",
    "make_mjx",
    "mjx_names",
]


def make_gymnax(name: str, *, params: Any = None, **kwargs: Any) -> GymnaxAdapter:
    """`GymnaxAdapter(gymnax.make(name, **kwargs)[0], params)`.

    Example:
        >>> import parallax
        >>> parallax.make("gymnax/CartPole-v1").observation_space.shape
        (4,)
    """
    gymnax = require("gymnax", extra="gymnax", needed_by="make('gymnax/...')")
    registration = getattr(gymnax, "registration", None)
    env_class = getattr(registration, "_registry", {}).get(name)
    accepted = keywords_of(env_class) if env_class is not None else None
    if accepted is not None:
        target = f"gymnax's {getattr(env_class, '__name__', name)} (or the adapter's params=)"
        check_keywords(kwargs, ("params", *accepted), f"make('gymnax/{name}')", target)
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
    owner = f"make('brax/{name}')"
    env_class = getattr(envs, "_envs", {}).get(name)
    if env_class is not None:
        accepted = _brax_keywords(env_class)
        if accepted is not None:
            target = f"brax's {env_class.__name__} (or episode_length, action_repeat)"
            check_keywords(kwargs, ("episode_length", "action_repeat", *accepted), owner, target)
    if name == "swimmer" and _clip_lost_a_min():
        from .._ids import UNSUPPORTED

        raise NotImplementedError(f"{owner}: unsupported: {UNSUPPORTED['brax/swimmer']}")
    backend = kwargs.get("backend")
    if backend is not None and backend not in BRAX_BACKENDS:
        raise ValueError(
            f"{owner}: backend must be one of {', '.join(map(repr, BRAX_BACKENDS))}, "
            f"got {backend!r}"
        )
    with foreign_numerics():
        env = envs.get_environment(name, **kwargs)
    return BraxAdapter(env, episode_length, action_repeat)


BRAX_BACKENDS = ("generalized", "positional", "spring", "mjx")
"""The physics pipelines of brax 0.14's `PipelineEnv` (its `backend=` argument)."""


def _brax_keywords(env_class: Any) -> tuple[str, ...] | None:
    """The keywords a brax env class takes: its own, plus `PipelineEnv`'s (`backend`,
    `n_frames`, `debug`) when it passes `**kwargs` on to it; `None` when unknown.

    brax's `Fast` takes `**kwargs` and ignores them, so a brax env that is no `PipelineEnv`
    gets its named parameters only: a misspelt keyword is refused, not silently dropped.
    """
    import inspect

    try:
        parameters = list(inspect.signature(env_class).parameters.values())
    except (TypeError, ValueError):
        return None
    named = tuple(p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    if not any(p.kind is p.VAR_KEYWORD for p in parameters):
        return named
    base = require("brax.envs.base", extra="brax", needed_by="make('brax/...')")
    if isinstance(env_class, type) and issubclass(env_class, base.PipelineEnv):
        return (*named, "backend", "n_frames", "debug")
    return named if str(getattr(env_class, "__module__", "")).startswith("brax.") else None


def _clip_lost_a_min() -> bool:
    """Whether `jnp.clip` no longer takes `a_min=` (brax 0.14's `brax.fluid` passes it)."""
    import inspect

    import jax.numpy as jnp

    try:
        return "a_min" not in inspect.signature(jnp.clip).parameters
    except (TypeError, ValueError):
        return False


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
    accepted = tuple(k for k in keywords_of(MJXAdapter.load) or () if k != "name")
    check_keywords(kwargs, accepted, f"make('mjx/{name}')", "MJXAdapter.load")
    return MJXAdapter.load(name, **kwargs)


def mjx_names() -> list[str]:
    """Every MuJoCo Playground environment (`registry.ALL_ENVS`)."""
    playground = require("mujoco_playground", extra="mjx", needed_by="mjx_names")
    return list(playground.registry.ALL_ENVS)
