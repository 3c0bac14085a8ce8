"""Action and observation spaces.

- `Space`: the structural protocol (`shape`, `dtype`, `sample(*, key)`, `contains(x)`).
- `Discrete`: integers `0 .. n-1`, optionally an array of them (`shape`).
- `Box`: a (possibly unbounded) box with scalar or per-dimension bounds and a dtype.
- `MultiDiscrete`: integers `0 .. nvec[i]-1` per element.
- `MultiBinary`: 0/1 arrays.
- `PyTreeSpace`: a pytree (dicts, tuples, lists, nested) of spaces.
- `stack_space`: the same space with a leading dimension, e.g. per-agent -> stacked MARL view.

Spaces are immutable and hashable, so they can be static arguments of `jax.jit`; they
describe one unbatched environment. `contains` is jit-able and returns a boolean scalar
array. Invalid construction raises `ValueError` naming the field and the value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, PRNGKeyArray, PyTree

__all__ = [
    "Box",
    "Discrete",
    "MultiBinary",
    "MultiDiscrete",
    "PyTreeSpace",
    "Space",
    "stack_space",
]


@runtime_checkable
class Space(Protocol):
    """Anything with a `shape`, a `dtype`, `sample(*, key)` and `contains(x)`."""

    @property
    def shape(self) -> Any: ...

    @property
    def dtype(self) -> Any: ...

    def sample(self, *, key: PRNGKeyArray) -> PyTree: ...

    def contains(self, x: PyTree) -> Bool[Array, ""]: ...


def _as_shape(shape: Any, name: str, owner: str) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer) and not isinstance(shape, bool):
        shape = (int(shape),)
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"{owner}: {name} must be a tuple of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"{owner}: {name} must hold non-negative sizes, got {dims}")
    return dims


def _frozen(a: Any) -> np.ndarray:
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


def _false() -> Array:
    return jnp.bool_(False)


def _shape_and_kind_ok(x: Any, shape: tuple[int, ...], kind: str) -> bool:
    """Static (trace-time) part of `contains`: shape and dtype kind."""
    x_shape = tuple(np.shape(x))
    if x_shape != shape:
        return False
    x_dtype = jnp.result_type(x)
    if kind == "f":
        return bool(jnp.issubdtype(x_dtype, jnp.floating))
    if kind in "iu":
        return bool(jnp.issubdtype(x_dtype, jnp.integer)) or x_dtype == jnp.bool_
    return True


def _contains(x: Any, shape: tuple[int, ...], kind: str, inside: Callable[[Array], Array]) -> Array:
    """`contains` of an array space: False unless `x` passes `_shape_and_kind_ok`, else
    whether `inside(jnp.asarray(x))` holds everywhere."""
    if not _shape_and_kind_ok(x, shape, kind):
        return _false()
    return jnp.all(inside(jnp.asarray(x)))


def _integer_dtype(dtype: Any, owner: str) -> np.dtype:
    dt = np.dtype(dtype)
    if not np.issubdtype(dt, np.integer):
        raise ValueError(f"{owner}: dtype must be an integer dtype, got {dt}")
    return dt


class _Immutable:
    """Base of the spaces: an attribute, once set (in `__init__`), cannot be set again."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, name):
            raise AttributeError(f"{type(self).__name__} is immutable")
        object.__setattr__(self, name, value)


class _ArraySpace(_Immutable):
    """Base of the array spaces: `shape` and `dtype`, stored as `_shape` and `_dtype`."""

    __slots__ = ()
    _shape: tuple[int, ...]
    _dtype: np.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype


class Discrete(_ArraySpace):
    """Integers in `[0, n)`; with `shape`, an array of them (the stacked MARL form).

    Args:
        n: number of choices, a positive int.
        shape: shape of one sample, `()` by default.
        dtype: an integer dtype, `int32` by default.

    Example:
        >>> import jax
        >>> from parallax import spaces
        >>> space = spaces.Discrete(4)
        >>> a = space.sample(key=jax.random.key(0))
        >>> bool(space.contains(a)), space.shape
        (True, ())
    """

    __slots__ = ("_dtype", "_n", "_shape")

    def __init__(self, n: int, shape: Sequence[int] = (), dtype: Any = jnp.int32) -> None:
        if isinstance(n, bool) or not isinstance(n, int | np.integer):
            raise TypeError(f"Discrete: n must be a positive int, got {n!r}")
        if n < 1:
            raise ValueError(f"Discrete: n must be a positive int (n >= 1), got {n}")
        dt = _integer_dtype(dtype, "Discrete")
        if n - 1 > np.iinfo(dt).max:
            raise ValueError(f"Discrete: n={n} does not fit dtype {dt}")
        self._n = int(n)
        self._shape = _as_shape(shape, "shape", "Discrete")
        self._dtype = dt

    @property
    def n(self) -> int:
        """Number of choices."""
        return self._n

    def sample(self, *, key: PRNGKeyArray) -> Array:
        """A uniformly random element."""
        return jax.random.randint(key, self._shape, 0, self._n, dtype=self._dtype)

    def contains(self, x: Any) -> Array:
        """Whether `x` has this shape, an integer dtype and values in `[0, n)`."""
        return _contains(x, self._shape, "i", lambda x: (x >= 0) & (x < self._n))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Discrete) and (self._n, self._shape, self._dtype) == (
            other._n,
            other._shape,
            other._dtype,
        )

    def __hash__(self) -> int:
        return hash(("Discrete", self._n, self._shape, str(self._dtype)))

    def __repr__(self) -> str:
        extra = f", shape={self._shape}" if self._shape else ""
        return f"Discrete({self._n}{extra})"


class Box(_ArraySpace):
    """A box `[low, high]` of real (or integer) numbers; bounds may be infinite.

    Args:
        low: lower bound, a scalar or an array broadcastable to `shape` (`-inf` allowed).
        high: upper bound, likewise (`inf` allowed); `low <= high` everywhere.
        shape: shape of one sample; inferred from `low`/`high` when omitted.
        dtype: `float32` by default; any float or integer dtype.

    `sample` never returns inf or NaN: a bounded dimension is uniform on `[low, high]`, an
    unbounded one standard normal, a half-bounded one `low + Exp(1)` or `high - Exp(1)`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import spaces
        >>> box = spaces.Box(-jnp.inf, 1.0, (3,))
        >>> x = box.sample(key=jax.random.key(0))
        >>> bool(box.contains(x)), bool(jnp.all(jnp.isfinite(x)))
        (True, True)
    """

    __slots__ = ("_dtype", "_high", "_low", "_shape")

    def __init__(
        self,
        low: Any,
        high: Any,
        shape: Sequence[int] | None = None,
        dtype: Any = jnp.float32,
    ) -> None:
        dt = np.dtype(dtype)
        if not (np.issubdtype(dt, np.floating) or np.issubdtype(dt, np.integer)):
            raise ValueError(f"Box: dtype must be a float or integer dtype, got {dt}")
        lo = np.asarray(low, dtype=np.float64)
        hi = np.asarray(high, dtype=np.float64)
        if shape is None:
            try:
                shp = np.broadcast_shapes(lo.shape, hi.shape)
            except ValueError:
                raise ValueError(
                    f"Box: low shape {lo.shape} and high shape {hi.shape} do not broadcast"
                ) from None
        else:
            shp = _as_shape(shape, "shape", "Box")
        for name, bound in (("low", lo), ("high", hi)):
            try:
                np.broadcast_to(bound, shp)
            except ValueError:
                raise ValueError(
                    f"Box: {name} has shape {bound.shape}, which does not fit shape {shp}"
                ) from None
            if np.isnan(bound).any():
                raise ValueError(f"Box: {name} must not contain NaN, got {bound}")
        lo_b = np.broadcast_to(lo, shp)
        hi_b = np.broadcast_to(hi, shp)
        bad = lo_b > hi_b
        if bad.any():
            i = tuple(int(j) for j in np.argwhere(bad)[0])
            raise ValueError(
                f"Box: low must be <= high everywhere, got low={lo_b[i]} > high={hi_b[i]}"
                f" at index {i}"
            )
        if np.issubdtype(dt, np.integer):
            info = np.iinfo(dt)
            lo_b = np.clip(lo_b, info.min, info.max)
            hi_b = np.clip(hi_b, info.min, info.max)
        self._low = _frozen(lo_b.astype(dt) if np.issubdtype(dt, np.integer) else lo_b)
        self._high = _frozen(hi_b.astype(dt) if np.issubdtype(dt, np.integer) else hi_b)
        self._shape = tuple(shp)
        self._dtype = dt

    @property
    def low(self) -> np.ndarray:
        """Lower bounds, broadcast to `shape` (read-only; float64 for float boxes)."""
        return self._low

    @property
    def high(self) -> np.ndarray:
        """Upper bounds, broadcast to `shape` (read-only)."""
        return self._high

    def is_bounded(self) -> bool:
        """Whether every dimension has finite bounds on both sides."""
        return bool(np.isfinite(self._low).all() and np.isfinite(self._high).all())

    def sample(self, *, key: PRNGKeyArray) -> Array:
        """A random element; finite everywhere, see the class docstring."""
        if np.issubdtype(self._dtype, np.integer):
            lo = jnp.asarray(self._low, dtype=jnp.int32)
            hi = jnp.asarray(np.minimum(self._high.astype(np.int64) + 1, 2**31 - 1), jnp.int32)
            return jax.random.randint(key, self._shape, lo, hi).astype(self._dtype)
        dt = jnp.dtype(self._dtype)
        if not jax.config.read("jax_enable_x64") and dt.itemsize > 4:
            dt = jnp.dtype(jnp.float32)
        k_u, k_n, k_e = jax.random.split(key, 3)
        lo_f, hi_f = np.isfinite(self._low), np.isfinite(self._high)
        # Finite stand-ins keep every branch finite before the selection below.
        lo = jnp.asarray(np.where(lo_f, self._low, 0.0), dt)
        hi = jnp.asarray(np.where(hi_f, self._high, 0.0), dt)
        u = jax.random.uniform(k_u, self._shape, dt)
        bounded = jnp.clip(lo * (1 - u) + hi * u, lo, hi)  # no high-low overflow
        normal = jax.random.normal(k_n, self._shape, dt)
        expo = jax.random.exponential(k_e, self._shape, dt)
        out = jnp.where(
            jnp.asarray(lo_f & hi_f),
            bounded,
            jnp.where(
                jnp.asarray(lo_f), lo + expo, jnp.where(jnp.asarray(hi_f), hi - expo, normal)
            ),
        )
        return out.astype(self._dtype)

    def contains(self, x: Any) -> Array:
        """Whether `x` has this shape, a matching dtype kind, and lies in `[low, high]`."""
        kind = "i" if np.issubdtype(self._dtype, np.integer) else "f"
        dt = jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32
        lo = jnp.asarray(self._low, dt)
        hi = jnp.asarray(self._high, dt)
        return _contains(
            x, self._shape, kind, lambda x: (x.astype(dt) >= lo) & (x.astype(dt) <= hi)
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Box)
            and self._shape == other._shape
            and self._dtype == other._dtype
            and np.array_equal(self._low, other._low)
            and np.array_equal(self._high, other._high)
        )

    def __hash__(self) -> int:
        return hash(
            ("Box", self._shape, str(self._dtype), self._low.tobytes(), self._high.tobytes())
        )

    def __repr__(self) -> str:
        def fmt(a: np.ndarray) -> str:
            return repr(a.flat[0].item()) if a.size and np.all(a == a.flat[0]) else str(a.tolist())

        return f"Box({fmt(self._low)}, {fmt(self._high)}, {self._shape}, {self._dtype})"


class MultiDiscrete(_ArraySpace):
    """Independent integers, element `i` in `[0, nvec[i])`.

    Args:
        nvec: positive ints, any shape (a list, tuple or array).
        dtype: an integer dtype, `int32` by default.

    Example:
        >>> from parallax import spaces
        >>> spaces.MultiDiscrete([2, 3]) == spaces.MultiDiscrete([2, 3])
        True
    """

    __slots__ = ("_dtype", "_nvec", "_shape")

    def __init__(self, nvec: Any, dtype: Any = jnp.int32) -> None:
        arr = np.asarray(nvec)
        integral = np.issubdtype(arr.dtype, np.integer) or np.all(np.equal(np.mod(arr, 1), 0))
        if arr.size and not integral:
            raise ValueError(f"MultiDiscrete: nvec must hold ints, got {arr.tolist()}")
        arr = arr.astype(np.int64)
        if arr.size == 0:
            raise ValueError("MultiDiscrete: nvec must not be empty")
        if (arr < 1).any():
            raise ValueError(f"MultiDiscrete: nvec must hold positive ints, got {arr.tolist()}")
        self._dtype = _integer_dtype(dtype, "MultiDiscrete")
        self._nvec = _frozen(arr)
        self._shape = tuple(self._nvec.shape)

    @property
    def nvec(self) -> np.ndarray:
        """Number of choices per element (read-only)."""
        return self._nvec

    @property
    def actions_per_dim(self) -> np.ndarray:
        """Alias of `nvec` (the parallax-rl 0.4 name)."""
        return self._nvec

    def sample(self, *, key: PRNGKeyArray) -> Array:
        """A uniformly random element."""
        hi = jnp.asarray(self._nvec, dtype=jnp.int32)
        return jax.random.randint(key, self.shape, 0, hi).astype(self._dtype)

    def contains(self, x: Any) -> Array:
        """Whether `x` has this shape, an integer dtype and `0 <= x < nvec`."""
        return _contains(
            x, self._shape, "i", lambda x: (x >= 0) & (x < jnp.asarray(self._nvec, x.dtype))
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, MultiDiscrete)
            and self._dtype == other._dtype
            and np.array_equal(self._nvec, other._nvec)
            and self._nvec.shape == other._nvec.shape
        )

    def __hash__(self) -> int:
        return hash(("MultiDiscrete", self.shape, str(self._dtype), self._nvec.tobytes()))

    def __repr__(self) -> str:
        return f"MultiDiscrete({self._nvec.tolist()})"


class MultiBinary(_ArraySpace):
    """Arrays of 0/1 (`int8`) of shape `n` (an int or a tuple).

    Example:
        >>> import jax
        >>> from parallax import spaces
        >>> spaces.MultiBinary(3).sample(key=jax.random.key(0)).shape
        (3,)
    """

    __slots__ = ("_dtype", "_shape")

    def __init__(self, n: int | Sequence[int]) -> None:
        shp = _as_shape(n, "n", "MultiBinary")
        if any(d < 1 for d in shp):
            raise ValueError(f"MultiBinary: n must hold positive sizes, got {n!r}")
        self._shape = shp
        self._dtype = np.dtype(np.int8)

    @property
    def n(self) -> tuple[int, ...]:
        return self._shape

    def sample(self, *, key: PRNGKeyArray) -> Array:
        """A uniformly random 0/1 array."""
        return jax.random.bernoulli(key, shape=self._shape).astype(jnp.int8)

    def contains(self, x: Any) -> Array:
        """Whether `x` has this shape and only 0/1 values."""
        return _contains(x, self._shape, "i", lambda x: (x == 0) | (x == 1))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MultiBinary) and self._shape == other._shape

    def __hash__(self) -> int:
        return hash(("MultiBinary", self._shape))

    def __repr__(self) -> str:
        return f"MultiBinary({self._shape})"


def _is_space(x: Any) -> bool:
    return isinstance(x, Discrete | Box | MultiDiscrete | MultiBinary | PyTreeSpace) or (
        hasattr(x, "sample") and hasattr(x, "contains") and hasattr(x, "shape")
    )


class PyTreeSpace(_Immutable):
    """A pytree of spaces: dicts, tuples, lists, nested; samples are pytrees alike.

    `shape` and `dtype` are pytrees of the leaves' shapes and dtypes. Dict keys follow JAX's
    pytree order (sorted), as every dict that passes through `jit` does.

    Example:
        >>> import jax
        >>> from parallax import spaces
        >>> space = spaces.PyTreeSpace({"pos": spaces.Box(0.0, 1.0, (2,)),
        ...                             "mode": spaces.Discrete(3)})
        >>> x = space.sample(key=jax.random.key(0))
        >>> sorted(x), bool(space.contains(x))
        (['mode', 'pos'], True)
    """

    __slots__ = ("_leaves", "_treedef")

    def __init__(self, spaces: PyTree) -> None:
        leaves, treedef = jax.tree.flatten(spaces, is_leaf=_is_space)
        if not leaves:
            raise ValueError("PyTreeSpace: spaces must hold at least one space")
        for leaf in leaves:
            if not _is_space(leaf):
                raise TypeError(f"PyTreeSpace: every leaf must be a space, got {leaf!r}")
        self._leaves = tuple(leaves)
        self._treedef = treedef

    @property
    def spaces(self) -> PyTree:
        """The pytree of spaces."""
        return jax.tree.unflatten(self._treedef, self._leaves)

    @property
    def shape(self) -> PyTree:
        return jax.tree.unflatten(self._treedef, [s.shape for s in self._leaves])

    @property
    def dtype(self) -> PyTree:
        return jax.tree.unflatten(self._treedef, [s.dtype for s in self._leaves])

    def sample(self, *, key: PRNGKeyArray) -> PyTree:
        """A pytree of samples, one independent key per leaf."""
        keys = jax.random.split(key, len(self._leaves))
        return jax.tree.unflatten(
            self._treedef, [s.sample(key=k) for s, k in zip(self._leaves, keys)]
        )

    def contains(self, x: PyTree) -> Array:
        """Whether `x` has this tree structure and every leaf lies in its space."""
        try:
            leaves = self._treedef.flatten_up_to(x)  # type: ignore[attr-defined]
        except (ValueError, TypeError):
            return _false()
        result = jnp.bool_(True)
        for space, leaf in zip(self._leaves, leaves):
            result = result & space.contains(leaf)
        return result

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, PyTreeSpace)
            and self._treedef == other._treedef  # type: ignore[operator]
            and self._leaves == other._leaves
        )

    def __hash__(self) -> int:
        return hash(("PyTreeSpace", self._treedef, self._leaves))

    def __repr__(self) -> str:
        return f"PyTreeSpace({self.spaces!r})"


def stack_space(space: Space, num: int) -> Any:
    """`space` with a leading dimension of size `num` (per-agent -> stacked MARL view).

    Example:
        >>> from parallax import spaces, stack_space
        >>> stack_space(spaces.Discrete(2), 3).shape
        (3,)
    """
    if isinstance(num, bool) or not isinstance(num, int | np.integer) or num < 1:
        raise ValueError(f"stack_space: num must be a positive int, got {num!r}")
    num = int(num)
    if isinstance(space, Discrete):
        return Discrete(space.n, (num, *space.shape), space.dtype)
    if isinstance(space, Box):
        shape = (num, *space.shape)
        return Box(
            np.broadcast_to(space.low, shape),
            np.broadcast_to(space.high, shape),
            shape,
            space.dtype,
        )
    if isinstance(space, MultiDiscrete):
        return MultiDiscrete(np.broadcast_to(space.nvec, (num, *space.shape)), space.dtype)
    if isinstance(space, MultiBinary):
        return MultiBinary((num, *space.shape))
    if isinstance(space, PyTreeSpace):
        return PyTreeSpace(
            jax.tree.map(lambda s: stack_space(s, num), space.spaces, is_leaf=_is_space)
        )
    raise TypeError(f"stack_space: cannot stack a space of type {type(space).__name__}")
