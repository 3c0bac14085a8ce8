"""Floor-level argument checks, shared by the envs, wrappers, adapters and registry.

Every check raises with a message that names the owner (`"TimeLimit"`, `"GridWorld.reset"`),
the argument, the value it got and what is accepted. Nothing here imports jax at module
level; `check_key` imports it when called (it inspects shapes and dtypes only, so it costs
nothing at run time and works on tracers under `jit` and `vmap`).

- `positive_int(value, name, owner)`: a positive Python int.
- `check_key(key, owner, batch=None)`: one PRNG key (or a batch of `batch` keys).
- `closest(name, choices)`: a `"; did you mean 'x'?"` hint, or `""`.
- `keywords_of(fn)`, `check_keywords(...)`, `KeywordError`: misspelt keyword arguments.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = [
    "INT32_MAX",
    "KeywordError",
    "check_key",
    "check_keywords",
    "closest",
    "keyword_message",
    "keywords_of",
    "positive_int",
]

INT32_MAX = 2**31 - 1
"""The largest int32: the bound of step counters and other int32 state leaves."""


def positive_int(value: Any, name: str, owner: str) -> int:
    """Return `value` as an int, or raise naming `owner`, `name` and the value.

    Example:
        >>> from parallax._validate import positive_int
        >>> positive_int(3, "num_envs", "VmapWrapper")
        3
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{owner}: {name} must be a positive int, got {value!r}")
    if value < 1:
        raise ValueError(f"{owner}: {name} must be a positive int (>= 1), got {value}")
    return int(value)


def closest(name: str, choices: Iterable[str]) -> str:
    """`"; did you mean 'x'?"` for the choices closest to `name` (up to 3), else `""`."""
    close = difflib.get_close_matches(name, sorted(set(choices)), n=3)
    return f"; did you mean {', '.join(map(repr, close))}?" if close else ""


def _describe(key: Any) -> str:
    if hasattr(key, "dtype") and hasattr(key, "shape"):
        return f"{key.dtype} {tuple(key.shape)}"
    return "None" if key is None else f"{type(key).__name__} {key!r}"


def check_key(key: Any, owner: str, batch: int | None = None) -> None:
    """Raise unless `key` is one PRNG key (or, with `batch`, also a batch of `batch` keys).

    Accepted: a typed key (`jax.random.key`) of shape `()`, or a raw `uint32` key of shape
    `(2,)` (`jax.random.PRNGKey`); with `batch`, also typed `(batch,)` or raw `(batch, 2)`.
    Reads shapes and dtypes only: free at run time, fine on tracers.

    Example:
        >>> import jax
        >>> from parallax._validate import check_key
        >>> check_key(jax.random.key(0), "GridWorld.reset")
        >>> try:
        ...     check_key(jax.random.split(jax.random.key(0), 8), "GridWorld.reset")
        ... except TypeError as error:
        ...     print(error)
        GridWorld.reset expects one PRNG key (a typed key from jax.random.key, or a raw uint32 (2,) key), got key<fry> (8,); use VmapWrapper for a batch of keys (parallax.make_vec builds one)
    """
    import jax

    if hasattr(key, "dtype") and hasattr(key, "shape"):
        shape = tuple(key.shape)
        if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
            if shape == () or (batch is not None and shape == (batch,)):
                return
            looks_batched = len(shape) >= 1
        else:
            raw = np.dtype(key.dtype) == np.uint32 and shape[-1:] == (2,)
            if raw and (shape == (2,) or (batch is not None and shape == (batch, 2))):
                return
            integer = np.issubdtype(np.dtype(key.dtype), np.integer)
            looks_batched = integer and (len(shape) >= 2 or (len(shape) == 1 and shape[0] >= 4))
    else:
        looks_batched = False
    if batch is None:
        wanted = "one PRNG key (a typed key from jax.random.key, or a raw uint32 (2,) key)"
    else:
        wanted = (
            f"one PRNG key or a batch of {batch} keys (typed keys from jax.random.key of shape "
            f"() or ({batch},), or raw uint32 keys of shape (2,) or ({batch}, 2))"
        )
    hint = (
        "; use VmapWrapper for a batch of keys (parallax.make_vec builds one)"
        if batch is None and looks_batched
        else ""
    )
    raise TypeError(f"{owner} expects {wanted}, got {_describe(key)}{hint}")


class KeywordError(TypeError):
    """A keyword argument that its target does not accept (a `TypeError`).

    Carries `keyword`, the `accepted` names and the `target`, so that a caller further out
    (`make_vec` around `make`) can report it as its own error, with its own keywords added.
    """

    def __init__(self, message: str, keyword: str, accepted: tuple[str, ...], target: str):
        super().__init__(message)
        self.keyword = keyword
        self.accepted = accepted
        self.target = target


def keywords_of(fn: Any) -> tuple[str, ...] | None:
    """The keyword arguments `fn` (a function or class) accepts, or `None` when it takes
    `**kwargs` or has no signature (then any keyword may be fine)."""
    import inspect

    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    names = []
    for p in parameters:
        if p.kind is p.VAR_KEYWORD:
            return None
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            names.append(p.name)
    return tuple(names)


def keyword_message(owner: str, target: str, keyword: str, accepted: Iterable[str]) -> str:
    """`owner: target has no keyword argument 'x'; did you mean 'y'? (it accepts a, b)`."""
    accepted = sorted(set(accepted))
    if not accepted:
        return f"{owner}: {target} takes no keyword arguments, got {keyword}=..."
    return (
        f"{owner}: {target} has no keyword argument {keyword!r}{closest(keyword, accepted)} "
        f"(it accepts {', '.join(accepted)})"
    )


def check_keywords(kwargs: Iterable[str], accepted: Iterable[str], owner: str, target: str) -> None:
    """Raise `KeywordError` for the first name of `kwargs` not in `accepted`."""
    allowed = tuple(sorted(set(accepted)))
    for keyword in kwargs:
        if keyword not in allowed:
            raise KeywordError(
                keyword_message(owner, target, keyword, allowed), keyword, allowed, target
            )
