"""Helpers shared by the adapters.

- `foreign_numerics`: run a wrapped library under JAX's default numeric rules.
- `raw_key`: the raw `uint32` key that brax / MuJoCo Playground expect, from any key.
- `strong`: the same pytree with every leaf a strongly typed array.
- `stable_dtypes`: float and integer leaves in JAX's default dtypes (fixed per x64 setting).
- `like`: cast every leaf of a pytree to the dtype of the matching leaf of another.
- `select_tree`: one of two pytrees, chosen leaf by leaf by a scalar flag (the exports' auto-reset).
- `cast_to_space`: cast an observation pytree to the dtypes of its space.
- `gymnax_style_space`: a `Box`, dict or tuple space in gymnax's (or JaxMARL's) space classes.
- `module_class`, `lazy_module_getattr`: the exports' classes, built on a library's base
  class on first access, named as module-level classes.
- `unbounded_space`: an unbounded `Box` (or `PyTreeSpace` of them) from shapes and dtypes.
- `episode_settings`: resolve and validate `episode_length` / `action_repeat` arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from .._spaces import Box, PyTreeSpace, Space
from .._wrappers.base import check_positive_int

__all__ = [
    "cast_to_space",
    "episode_settings",
    "foreign_numerics",
    "gymnax_style_space",
    "lazy_module_getattr",
    "like",
    "module_class",
    "raw_key",
    "select_tree",
    "stable_dtypes",
    "strong",
    "unbounded_space",
]


@contextmanager
def foreign_numerics() -> Iterator[None]:
    """Trace the wrapped library with JAX's default promotion rules.

    gymnax, brax and MuJoCo Playground are written for JAX's defaults (standard dtype
    promotion, implicit rank promotion), e.g. gymnax's CartPole computes `1.0 - done` with a
    bool `done`. The adapters call them inside this context, so a caller that runs with
    `jax.numpy_dtype_promotion("strict")` (as Parallax's own tests do) still gets the
    library's exact numbers; the adapter's own code runs under the caller's rules.
    """
    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        yield


def _is_typed_key(key: Any) -> bool:
    return hasattr(key, "dtype") and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)


def raw_key(key: Any) -> Array:
    """`key` as a raw `uint32` key (typed keys are unwrapped with `jax.random.key_data`).

    brax and MuJoCo Playground were written for raw `jax.random.PRNGKey` keys (some read
    `rng.shape`), so the adapters hand them raw keys whichever kind the caller uses.
    """
    return jax.random.key_data(key) if _is_typed_key(key) else jnp.asarray(key)


def _strong_leaf(x: Any) -> Array:
    x = jnp.asarray(x)
    return x.astype(x.dtype)  # drops the weak type of Python scalars


def strong(tree: PyTree) -> PyTree:
    """`tree` with every leaf a strongly typed JAX array (Python scalars included)."""
    return jax.tree.map(_strong_leaf, tree)


def _stable_leaf(x: Any) -> Array:
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.floating):
        return x.astype(jax.dtypes.canonicalize_dtype(jnp.float64))
    if jnp.issubdtype(x.dtype, jnp.integer):
        return x.astype(jax.dtypes.canonicalize_dtype(jnp.int64))
    return x.astype(x.dtype)


def stable_dtypes(tree: PyTree) -> PyTree:
    """`tree` with float leaves in JAX's default float dtype and integer leaves in its
    default int dtype (float32 / int32, or float64 / int64 with x64 on).

    For diagnostics (brax's `metrics`) whose dtypes the wrapped library does not keep
    fixed: under x64 brax returns some as float64 after `reset` and float32 after `step`.
    """
    return jax.tree.map(_stable_leaf, tree)


def like(tree: PyTree, template: PyTree) -> PyTree:
    """Cast each leaf of `tree` to the dtype of the matching leaf of `template`.

    Keeps a state's pytree (dtypes included) identical from step to step even where the
    wrapped library returns, e.g., a Python int at reset and an int32 array after a step.
    """
    return jax.tree.map(lambda x, t: jnp.asarray(x).astype(jnp.result_type(t)), tree, template)


def select_tree(flag: Array, if_true: PyTree, if_false: PyTree) -> PyTree:
    """`if_true` where the scalar bool `flag` is set, else `if_false` (`lax.select` per leaf)."""
    return jax.tree.map(lambda a, b: jax.lax.select(flag, a, b), if_true, if_false)


def cast_to_space(observation: PyTree, space: Space) -> PyTree:
    """Cast the leaves of `observation` to the (canonical) dtypes of `space`."""
    if isinstance(space, PyTreeSpace):
        # Spaces are pytree leaves, so this pairs each space with its observation subtree.
        return jax.tree.map(lambda s, o: cast_to_space(o, s), space.spaces, observation)
    dtype = jax.dtypes.canonicalize_dtype(np.dtype(space.dtype))
    return jnp.asarray(observation).astype(dtype)


def gymnax_style_space(
    space: Any, target: Any, where: str, convert: Callable[[Any, str], Any]
) -> Any | None:
    """`space` in the space module `target` if it is a `Box`, dict or tuple, else `None`.

    gymnax and JaxMARL share these classes (`Box(low, high, shape, dtype)`, `Dict`, `Tuple`).
    `convert(sub_space, sub_where)` converts the members of a dict or tuple; `where` names
    `space` in the caller's error messages.
    """
    if isinstance(space, Box):
        dtype = jax.dtypes.canonicalize_dtype(np.dtype(space.dtype))
        low, high = np.asarray(space.low).astype(dtype), np.asarray(space.high).astype(dtype)
        return target.Box(low, high, tuple(space.shape), dtype)
    if isinstance(space, dict):
        return target.Dict({k: convert(v, f"{where}[{k!r}]") for k, v in space.items()})
    if type(space) is tuple:
        return target.Tuple([convert(v, f"{where}[{i}]") for i, v in enumerate(space)])
    return None


def module_class(cls: type, module: str) -> type:
    """`cls` (built inside a function) named as the module-level class `module.<name>`."""
    cls.__module__ = module
    cls.__qualname__ = cls.__name__
    return cls


def lazy_module_getattr(module: str, name: str, build: Callable[[], Any]) -> Callable[[str], Any]:
    """A module `__getattr__` for `module` that answers `name` with `build()`."""

    def __getattr__(attr: str) -> Any:
        if attr == name:
            return build()
        raise AttributeError(f"module {module!r} has no attribute {attr!r}")

    return __getattr__


def unbounded_space(shapes: PyTree) -> Space:
    """An unbounded `Box` per leaf of a pytree of `jax.ShapeDtypeStruct`s.

    One array gives a `Box`; a dict (or other container) of arrays gives a `PyTreeSpace`.
    """
    if isinstance(shapes, jax.ShapeDtypeStruct):
        return Box(-np.inf, np.inf, shapes.shape, shapes.dtype)
    return PyTreeSpace(jax.tree.map(lambda s: Box(-np.inf, np.inf, s.shape, s.dtype), shapes))


def episode_settings(
    owner: str,
    episode_length: Any,
    action_repeat: Any,
    found_length: int | None,
    found_repeat: int | None,
) -> tuple[int | None, int]:
    """Resolve `episode_length` / `action_repeat`: an explicit argument wins, else the value
    found on the stripped wrappers (or config), else no time limit and a repeat of 1."""
    if episode_length is not None:
        length: int | None = check_positive_int(episode_length, "episode_length", owner)
    elif found_length is not None:
        length = check_positive_int(found_length, "episode_length (found on the env)", owner)
    else:
        length = None
    if action_repeat is not None:
        repeat = check_positive_int(action_repeat, "action_repeat", owner)
    elif found_repeat is not None:
        repeat = check_positive_int(found_repeat, "action_repeat (found on the env)", owner)
    else:
        repeat = 1
    return length, repeat
