"""The public draws of ``parallax.rng`` (JAX flavour), re-exported by ``__init__``.

Holds ``episode_key``, ``fold_in``, ``bits``, ``uniform``, ``randint``,
``bernoulli``, ``normal`` and the ``*_vector`` conveniences. Each draw is a
pure function of ``(episode_key, step, slot, index)`` plus its parameters;
arguments are validated where they enter, then handed to a jitted core.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from parallax.rng import _checks, _hash, _normal

_U32 = jnp.uint32
_Arg = jax.Array | np.ndarray


def _x64() -> bool:
    """Whether 64-bit types are enabled right now (at trace time)."""
    return bool(jax.dtypes.canonicalize_dtype(np.float64) == np.float64)


def _is_array(value: Any) -> bool:
    return isinstance(value, (jax.Array, np.ndarray))


def _counter(name: str, value: Any) -> _Arg:
    """Validate a step/slot/index/data argument; NumPy inputs become uint32 here.

    Python ints are range-checked; integer arrays are taken mod 2**32 (JAX
    arrays are converted inside the jitted core, so eager calls stay cheap).
    """
    if isinstance(value, jax.Array):
        _checks.check_counter_dtype(name, value.dtype)
        return value
    if isinstance(value, (np.ndarray, list, tuple, range)):
        arr = np.asarray(value)
        if arr.size == 0:
            arr = arr.astype(np.uint32)
        _checks.check_counter_dtype(name, arr.dtype)
        return arr.astype(np.uint32)
    return np.asarray(_checks.check_counter(name, value), np.uint32)


def _key(episode_key: Any) -> _Arg:
    """Validate an episode key: uint32 with a last axis of length 2."""
    ek = episode_key if _is_array(episode_key) else np.asarray(episode_key)
    _checks.check_episode_key_array(ek.dtype, tuple(ek.shape))
    return ek


def _check_broadcast(**shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError as err:
        listed = ", ".join(f"{k} {v}" for k, v in shapes.items())
        raise ValueError(f"{', '.join(shapes)} must broadcast together; got {listed}") from err


def _prepare(episode_key: Any, step: Any, slot: Any, index: Any) -> tuple[_Arg, ...]:
    ek = _key(episode_key)
    st, sl, ix = _counter("step", step), _counter("slot", slot), _counter("index", index)
    _check_broadcast(episode_key_batch=ek.shape[:-1], step=st.shape, slot=sl.shape, index=ix.shape)
    return ek, st, sl, ix


def _prepare_vector(
    episode_key: Any, step: Any, slot: Any, num: Any, start: Any
) -> tuple[_Arg, ...]:
    """Like ``_prepare`` with ``index = start + arange(num)`` (placed on a new last axis)."""
    num = _checks.check_count("num", num)
    start = _checks.check_counter("start", start)
    if start + num - 1 > _checks.U32_MAX:
        raise ValueError(f"start + num - 1 must be <= 2**32 - 1, got start={start}, num={num}")
    ek = _key(episode_key)
    st, sl = _counter("step", step), _counter("slot", slot)
    _check_broadcast(episode_key_batch=ek.shape[:-1], step=st.shape, slot=sl.shape)
    index = (np.arange(num, dtype=np.uint64) + np.uint64(start)).astype(np.uint32)
    return ek, st, sl, index


# ------------------------------------------------------------------ jitted core


def _words(
    ek: jax.Array, step: jax.Array, slot: jax.Array, index: jax.Array, vector: bool
) -> tuple[jax.Array, jax.Array]:
    k0, k1 = ek[..., 0], ek[..., 1]
    st, sl, ix = step.astype(_U32), slot.astype(_U32), index.astype(_U32)
    if vector:
        batch = jnp.broadcast_shapes(k0.shape, st.shape, sl.shape)
        k0, k1, st, sl = (jnp.broadcast_to(a, batch).reshape((*batch, 1)) for a in (k0, k1, st, sl))
        ix = ix.reshape((1,) * len(batch) + ix.shape)
    return _hash.hash_words(k0, k1, st, sl, ix)


def _uniform_from_words(w0: jax.Array, w1: jax.Array, dtype: np.dtype) -> jax.Array:
    if dtype == np.float32:
        return (w0 >> np.uint32(8)).astype(jnp.float32) * np.float32(2.0**-24)
    hi = (w0 >> np.uint32(5)).astype(jnp.float64) * np.float64(2.0**26)
    lo = (w1 >> np.uint32(6)).astype(jnp.float64)
    return (hi + lo) * np.float64(2.0**-53)


@functools.partial(jax.jit, static_argnames=("kind", "dtype", "vector"))
def _draw(
    ek: Any, step: Any, slot: Any, index: Any, param: Any, *, kind: str, dtype: Any, vector: bool
) -> jax.Array:
    """All draws: hash, then the ``kind`` transform (one compiled function per kind)."""
    w0, w1 = _words(ek, step, slot, index, vector)
    if kind == "bits":
        return w0
    if kind == "words":
        return jnp.stack([w0, w1], axis=-1)
    if kind == "uniform":
        return _uniform_from_words(w0, w1, dtype)
    if kind == "bernoulli":
        u = _uniform_from_words(w0, w1, dtype)
        p = param.astype(dtype)
        shape = jnp.broadcast_shapes(u.shape, p.shape)
        return jnp.broadcast_to(u, shape) < jnp.broadcast_to(p, shape)
    if kind == "randint":
        n = param.astype(_U32)
        shape = jnp.broadcast_shapes(w0.shape, n.shape)
        w0, w1, n = (jnp.broadcast_to(a, shape) for a in (w0, w1, n))
        # floor((w0 * 2**32 + w1) * n / 2**64) = hi(w0 n) + carry(lo(w0 n) + hi(w1 n))
        lo0 = w0 * n
        mid = lo0 + _hash.mulhi32(w1, n)
        carry = (mid < lo0).astype(_U32)
        return (_hash.mulhi32(w0, n) + carry).astype(dtype)
    if kind == "normal":
        return _normal.normal_f32(w0) if dtype == np.float32 else _normal.normal_f64(w0, w1)
    raise AssertionError(kind)


def _randint_n(n: Any, dtype: np.dtype) -> _Arg:
    if isinstance(n, jax.Array):
        _checks.check_counter_dtype("n", n.dtype)
        return n
    if isinstance(n, np.ndarray):
        _checks.check_counter_dtype("n", n.dtype)
        return n.astype(np.uint32)
    return np.asarray(_checks.check_randint_n(n, dtype), np.uint32)


def _probability(p: Any, dtype: np.dtype) -> _Arg:
    if _is_array(p):
        if np.dtype(p.dtype).kind != "f":
            raise TypeError(f"p must be a real number or a float array, got dtype {p.dtype}")
        return p if isinstance(p, jax.Array) else p.astype(dtype)
    return np.asarray(_checks.check_probability(p), dtype)


@jax.jit
def _derive(words: Any) -> jax.Array:
    return _hash.derive_episode_key(words.astype(_U32))


@jax.jit
def _fold(ek: Any, data: Any) -> jax.Array:
    return _hash.fold_words(ek[..., 0], ek[..., 1], data.astype(_U32))


# kind -> (dtype check, converter of the kind's parameter or None)
_KINDS: dict[str, tuple[Any, Any]] = {
    "uniform": (_checks.check_float_dtype, None),
    "normal": (_checks.check_float_dtype, None),
    "bernoulli": (_checks.check_float_dtype, _probability),
    "randint": (_checks.check_int_dtype, _randint_n),
}


def _checked_draw(
    kind: str, dtype: Any, counters: tuple[Any, ...], param: Any = None, *, vector: bool
) -> jax.Array:
    """Validate ``dtype``, then the counters, then ``param``; run the ``kind`` draw.

    ``counters`` is ``(episode_key, step, slot, index)``, or with ``vector``
    ``(episode_key, step, slot, num, start)``.
    """
    check_dtype, convert = _KINDS[kind]
    dt = check_dtype(dtype, _x64())
    args = _prepare_vector(*counters) if vector else _prepare(*counters)
    converted = None if convert is None else convert(param, dt)
    return _draw(*args, converted, kind=kind, dtype=dt, vector=vector)


# ------------------------------------------------------------------ key helpers


def episode_key(key: ArrayLike) -> jax.Array:
    """Derive an episode key from a JAX PRNG key.

    Args:
      key: a typed key (``jax.random.key(seed)``, any impl) or a legacy
        uint32 key (``jax.random.PRNGKey(seed)``), optionally with leading
        batch dimensions; also works under ``vmap``.

    Returns:
      uint32 array ``batch + (2,)``: 64 bits that name the episode.

    Raises:
      TypeError: if ``key`` is not a JAX key or a uint32 key-data array.

    Example:
      >>> import jax
      >>> from parallax import rng
      >>> ek = rng.episode_key(jax.random.key(0))
      >>> ek.shape, ek.dtype
      ((2,), dtype('uint32'))
      >>> bool((ek == rng.episode_key(jax.random.PRNGKey(0))).all())
      True
      >>> rng.episode_key(jax.random.split(jax.random.key(0), 5)).shape
      (5, 2)
    """
    if not isinstance(key, (jax.Array, np.ndarray)):
        raise TypeError(
            f"key must be a JAX PRNG key such as jax.random.key(seed), got {type(key).__name__} {key!r}"
        )
    words: jax.Array | np.ndarray
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        words = jax.random.key_data(key)
    elif np.dtype(key.dtype) == np.uint32 and key.ndim >= 1 and key.shape[-1] >= 1:
        words = key
    else:
        raise TypeError(
            "key must be a typed JAX key (jax.random.key) or a legacy uint32 key "
            f"(jax.random.PRNGKey) of shape (..., W); got dtype {key.dtype}, shape {key.shape}"
        )
    return _derive(words)


def fold_in(episode_key: ArrayLike, data: Any) -> jax.Array:
    """Derive a child episode key from an episode key and a number.

    Use it to name sub-episodes (e.g. ``fold_in(ek, episode_number)`` after
    an auto-reset). Different ``data`` give unrelated keys.

    Args:
      episode_key: uint32 ``(..., 2)``.
      data: int in ``[0, 2**32 - 1]`` or integer array (wrapped mod
        ``2**32``), broadcast against the key batch.

    Returns:
      uint32 array ``broadcast(batch, data.shape) + (2,)``.

    Example:
      >>> import jax
      >>> from parallax import rng
      >>> ek = rng.episode_key(jax.random.key(0))
      >>> rng.fold_in(ek, 1).shape
      (2,)
    """
    ek = _key(episode_key)
    d = _counter("data", data)
    _check_broadcast(episode_key_batch=ek.shape[:-1], data=d.shape)
    return _fold(ek, d)


# ------------------------------------------------------------------------ draws


def bits(episode_key: ArrayLike, step: Any, slot: Any, index: Any, *, words: int = 1) -> jax.Array:
    """Raw hash bits of the draw ``(episode_key, step, slot, index)``.

    Args:
      episode_key: uint32 ``(..., 2)`` from :func:`episode_key`.
      step, slot, index: ints in ``[0, 2**32 - 1]`` or integer arrays (taken
        mod ``2**32``); broadcast together with the key batch.
      words: 1 for one uint32 word (word 0), 2 for both words (64 bits).

    Returns:
      uint32 array of the broadcast shape ``S`` (``words=1``) or ``S + (2,)``
      (``words=2``; ``[..., 0]`` is word 0, the high half of the 64 bits).

    Example:
      >>> import jax
      >>> from parallax import rng
      >>> ek = rng.episode_key(jax.random.key(0))
      >>> rng.bits(ek, 0, 3, 0).dtype
      dtype('uint32')
      >>> rng.bits(ek, 0, 3, 0, words=2).shape
      (2,)
    """
    if words not in (1, 2) or isinstance(words, bool):
        raise ValueError(f"words must be 1 or 2, got {words!r}")
    args = _prepare(episode_key, step, slot, index)
    kind = "bits" if words == 1 else "words"
    return _draw(*args, None, kind=kind, dtype=None, vector=False)


def uniform(
    episode_key: ArrayLike, step: Any, slot: Any, index: Any, *, dtype: Any = jnp.float32
) -> jax.Array:
    """Uniform draw in ``[0, 1)``.

    float32: ``(word0 >> 8) * 2**-24`` (24 random bits). float64 (needs x64):
    ``((word0 >> 5) * 2**26 + (word1 >> 6)) * 2**-53`` (53 random bits).

    Args:
      episode_key, step, slot, index: as in :func:`bits`.
      dtype: float32 (default) or float64.

    Returns:
      array of ``dtype`` at the broadcast shape.

    Example:
      >>> import jax
      >>> from parallax import rng
      >>> ek = rng.episode_key(jax.random.key(0))
      >>> u = rng.uniform(ek, 0, 3, jax.numpy.arange(4))
      >>> u.shape, bool(((0 <= u) & (u < 1)).all())
      ((4,), True)
    """
    return _checked_draw("uniform", dtype, (episode_key, step, slot, index), vector=False)


def randint(
    episode_key: ArrayLike, step: Any, slot: Any, index: Any, n: Any, *, dtype: Any = jnp.int32
) -> jax.Array:
    """Integer in ``[0, n)``, ``floor(X * n / 2**64)`` for the 64-bit draw ``X``.

    Each value's probability differs from ``1/n`` by less than ``2**-64``
    (negligible bias, no rejection loop).

    Args:
      episode_key, step, slot, index: as in :func:`bits`.
      n: int in ``[1, 2**32 - 1]`` (and within ``dtype``), or an integer array
        broadcast with the draw shape. Array entries are taken mod ``2**32``;
        ``n == 0`` in an array yields 0 (not checked under ``jit``).
      dtype: int32 (default), uint32, or int64/uint64 with x64.

    Returns:
      array of ``dtype``.

    Raises:
      ValueError: if a Python ``n`` is outside its range.

    Example:
      >>> import jax
      >>> from parallax import rng
      >>> ek = rng.episode_key(jax.random.key(0))
      >>> int(rng.randint(ek, 0, 2, 0, 8)) in range(8)
      True
    """
    return _checked_draw("randint", dtype, (episode_key, step, slot, index), n, vector=False)


def bernoulli(
    episode_key: ArrayLike, step: Any, slot: Any, index: Any, p: Any, *, dtype: Any = jnp.float32
) -> jax.Array:
    """Boolean draw, defined as ``uniform(..., dtype=dtype) < p``.

    Args:
      episode_key, step, slot, index: as in :func:`bits`.
      p: probability in ``[0, 1]`` (Python real) or a float array broadcast
        with the draw shape; it is converted to ``dtype`` before comparing.
      dtype: precision of the uniform compared against ``p`` (float32
        default, float64 with x64).

    Returns:
      bool array.

    Example:
      >>> import jax
      >>> from parallax import rng
      >>> ek = rng.episode_key(jax.random.key(0))
      >>> rng.bernoulli(ek, 7, 5, 0, 0.15).dtype
      dtype('bool')
    """
    return _checked_draw("bernoulli", dtype, (episode_key, step, slot, index), p, vector=False)


def normal(
    episode_key: ArrayLike, step: Any, slot: Any, index: Any, *, dtype: Any = jnp.float32
) -> jax.Array:
    """Standard normal draw, bit-identical to ``parallax.rng.reference.normal``.

    float32 uses word 0 (AS241 PPND7, about 1e-7 accurate); float64 uses both
    words (AS241 PPND16). The transform uses exact-product arithmetic, so the
    result does not depend on FMA contraction.

    Args:
      episode_key, step, slot, index: as in :func:`bits`.
      dtype: float32 (default) or float64 (needs x64).

    Returns:
      array of ``dtype`` at the broadcast shape.

    Example:
      >>> import jax
      >>> from parallax import rng
      >>> ek = rng.episode_key(jax.random.key(0))
      >>> rng.normal(ek, 0, 1, 0).dtype
      dtype('float32')
    """
    return _checked_draw("normal", dtype, (episode_key, step, slot, index), vector=False)


# ----------------------------------------------------------------- vector forms


def uniform_vector(
    episode_key: ArrayLike,
    step: Any,
    slot: Any,
    num: int,
    *,
    start: int = 0,
    dtype: Any = jnp.float32,
) -> jax.Array:
    """``num`` uniforms with ``index = start, ..., start + num - 1`` on a new last axis.

    Same as ``uniform(ek, step, slot, start + arange(num))`` with the
    key/step/slot batch kept in front.

    Args:
      episode_key, step, slot: as in :func:`bits` (broadcast together to a
        batch shape ``B``).
      num: static number of draws (Python int >= 0).
      start: first index.
      dtype: as in :func:`uniform`.

    Returns:
      array ``B + (num,)``.

    Example:
      >>> import jax
      >>> from parallax import rng
      >>> ek = rng.episode_key(jax.random.key(0))
      >>> rng.uniform_vector(ek, 0, 1, 6).shape
      (6,)
    """
    return _checked_draw("uniform", dtype, (episode_key, step, slot, num, start), vector=True)


def normal_vector(
    episode_key: ArrayLike,
    step: Any,
    slot: Any,
    num: int,
    *,
    start: int = 0,
    dtype: Any = jnp.float32,
) -> jax.Array:
    """``num`` standard normals over ``index = start + arange(num)`` (last axis).

    Args:
      episode_key, step, slot, num, start: as in :func:`uniform_vector`.
      dtype: as in :func:`normal`.

    Returns:
      array ``B + (num,)``.

    Example:
      >>> import jax
      >>> from parallax import rng
      >>> eks = rng.episode_key(jax.random.split(jax.random.key(0), 4))
      >>> rng.normal_vector(eks, 0, 1, 8).shape
      (4, 8)
    """
    return _checked_draw("normal", dtype, (episode_key, step, slot, num, start), vector=True)


def randint_vector(
    episode_key: ArrayLike,
    step: Any,
    slot: Any,
    num: int,
    n: Any,
    *,
    start: int = 0,
    dtype: Any = jnp.int32,
) -> jax.Array:
    """``num`` integers in ``[0, n)`` over ``index = start + arange(num)`` (last axis).

    Args:
      episode_key, step, slot, num, start: as in :func:`uniform_vector`.
      n, dtype: as in :func:`randint` (an array ``n`` broadcasts with ``B + (num,)``).

    Returns:
      array ``B + (num,)``.

    Example:
      >>> import jax
      >>> from parallax import rng
      >>> ek = rng.episode_key(jax.random.key(0))
      >>> rng.randint_vector(ek, 0, 2, 6, 8).shape
      (6,)
    """
    return _checked_draw("randint", dtype, (episode_key, step, slot, num, start), n, vector=True)


def bernoulli_vector(
    episode_key: ArrayLike,
    step: Any,
    slot: Any,
    num: int,
    p: Any,
    *,
    start: int = 0,
    dtype: Any = jnp.float32,
) -> jax.Array:
    """``num`` booleans ``uniform < p`` over ``index = start + arange(num)`` (last axis).

    Args:
      episode_key, step, slot, num, start: as in :func:`uniform_vector`.
      p, dtype: as in :func:`bernoulli` (an array ``p`` broadcasts with ``B + (num,)``).

    Returns:
      bool array ``B + (num,)``.

    Example:
      >>> import jax
      >>> from parallax import rng
      >>> ek = rng.episode_key(jax.random.key(0))
      >>> rng.bernoulli_vector(ek, 0, 5, 6, 0.5).shape
      (6,)
    """
    counters = (episode_key, step, slot, num, start)
    return _checked_draw("bernoulli", dtype, counters, p, vector=True)
