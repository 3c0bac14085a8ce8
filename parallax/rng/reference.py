"""Readable NumPy flavour of ``parallax.rng`` for reference implementations and tests.

Same names and the same values, bit for bit, as the JAX flavour, computed one
draw at a time with Python integers (for the hash) and NumPy float32/float64
scalars (for the normal). Scalar arguments give NumPy scalars; array
arguments give NumPy arrays of the same dtypes as the JAX flavour.

Holds: ``episode_key``, ``fold_in``, ``bits``, ``uniform``, ``randint``,
``bernoulli``, ``normal``, ``uniform_vector``, ``normal_vector``,
``randint_vector``, ``bernoulli_vector``, plus ``Slot``/``SlotTable``
(re-exported). Only NumPy is needed, except that ``episode_key`` accepts a
typed JAX key (and then imports JAX to read its data).

Example:
  >>> import numpy as np
  >>> from parallax.rng import reference as rng
  >>> ek = rng.episode_key(np.array([0, 42], np.uint32))  # = PRNGKey(42) data
  >>> rng.randint(ek, 0, 2, 3, 8).dtype
  dtype('int32')
  >>> rng.normal(ek, 5, 1, 0).dtype
  dtype('float32')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from parallax.rng import _checks, _spec
from parallax.rng._slots import Slot, SlotTable

__all__ = [
    "Slot",
    "SlotTable",
    "bernoulli",
    "bernoulli_vector",
    "bits",
    "episode_key",
    "fold_in",
    "normal",
    "normal_vector",
    "randint",
    "randint_vector",
    "uniform",
    "uniform_vector",
]

MASK32 = _spec.MASK32

# ------------------------------------------------------------------ the hash


def _mix32(x: int) -> int:
    """32-bit xorshift-multiply finaliser (bijective)."""
    x ^= x >> _spec.MIX_S1
    x = (x * _spec.MIX_M1) & MASK32
    x ^= x >> _spec.MIX_S2
    x = (x * _spec.MIX_M2) & MASK32
    x ^= x >> _spec.MIX_S3
    return x


def _permute64(k0: int, k1: int, x: int, y: int) -> tuple[int, int]:
    """Four Feistel rounds on the block (x, y) with key (k0, k1)."""
    y ^= _mix32((x + k0) & MASK32)
    x ^= _mix32((y + k1) & MASK32)
    y ^= _mix32((x + k0 + _spec.ROUND_C2) & MASK32)
    x ^= _mix32((y + k1 + _spec.ROUND_C3) & MASK32)
    return x, y


def _hash(k0: int, k1: int, step: int, slot: int, index: int) -> tuple[int, int]:
    """The two 32-bit words of the draw (episode key, step, slot, index)."""
    a0, a1 = _permute64(k0, k1, step, slot)
    return _permute64(a0, a1, index, _spec.DRAW_TWEAK)


# -------------------------------------------------- words -> values (scalars)


def _uniform_value(w0: int, w1: int, dtype: np.dtype) -> np.floating:
    if dtype == np.float32:
        return np.float32((w0 >> 8) * 2.0**-24)
    return np.float64(((w0 >> 5) * 2**26 + (w1 >> 6)) * 2.0**-53)


def _randint_value(w0: int, w1: int, n: int) -> int:
    """floor(X * n / 2**64) for the 64-bit number X = w0 * 2**32 + w1."""
    return (((w0 << 32) | w1) * n) >> 64


# Exact-product float arithmetic: see parallax.rng._normal for the reasoning.
# Every product that feeds an addition is a sum of exact partial products.


def _split(a: np.floating, spec: _spec.FloatSpec) -> tuple[np.floating, np.floating]:
    """a = hi + lo exactly, each with at most half the significand bits."""
    bits = np.array(a, spec.dtype).view(spec.uint) & spec.uint.type(spec.split_mask)
    hi = bits.view(spec.dtype)[()]
    return hi, a - hi


def _mul(a: tuple[np.floating, np.floating], b: tuple[np.floating, np.floating]) -> np.floating:
    a_hi, a_lo = a
    b_hi, b_lo = b
    return a_hi * b_hi + (a_hi * b_lo + a_lo * b_hi)


def _horner(coefs: tuple[float, ...], x: np.floating, spec: _spec.FloatSpec) -> np.floating:
    """Polynomial with coefficients highest degree first, evaluated at x."""
    f = spec.dtype.type
    xs = _split(x, spec)
    acc = _mul(_split(f(coefs[0]), spec), xs) + f(coefs[1])
    for c in coefs[2:]:
        acc = _mul(_split(acc, spec), xs) + f(c)
    return acc


def _log_from_int(n: int, bits: int, scale_exp: int, spec: _spec.FloatSpec) -> np.floating:
    """ln(n * 2**-scale_exp) for an integer 1 <= n < 2**bits."""
    f = spec.dtype.type
    mant_bits = np.finfo(spec.dtype).nmant
    nz = bits - n.bit_length()  # leading zeros
    top = n << nz  # leading one at bit (bits - 1)
    drop = bits - 1 - mant_bits
    m_int = (top >> drop) + ((top >> (drop - 1)) & 1)  # round to mant_bits + 1 bits
    mant = f(m_int) * f(2.0**-mant_bits)  # in [1, 2]
    k = (bits - 1 - scale_exp) - nz
    if mant > f(spec.sqrt2):
        mant = mant * f(0.5)
        k += 1
    kf = f(k)
    if spec.dtype == np.float32:  # ln m = a N(a) / D(a), a fitted rational
        a = mant - f(1.0)
        ln_m = (a * _horner(_spec.LOG_NUM32, a, spec)) / _horner(_spec.LOG_DEN32, a, spec)
    else:  # ln m = 2 atanh(s), a series in s**2
        s = (mant - f(1.0)) / (mant + f(1.0))
        ss = _split(s, spec)
        ln_m = _mul(ss, _split(_horner(_spec.LOG_ATANH64, _mul(ss, ss), spec), spec))
    return kf * f(spec.ln2_hi) + (kf * f(spec.ln2_lo) + ln_m)


def _fixed_to_float(d: int, low_bits: int, scale_exp: int, spec: _spec.FloatSpec) -> np.floating:
    """d * 2**-scale_exp rounded once, from two exactly convertible pieces."""
    f = spec.dtype.type
    hi = f(d >> low_bits) * f(2.0 ** (low_bits - scale_exp))
    lo = f(d & ((1 << low_bits) - 1)) * f(2.0**-scale_exp)
    return hi + lo


def _normal_f32(w: int) -> np.float32:
    """Phi^-1((w + 1/2) / 2**32) by AS241 PPND7, for a 32-bit word w."""
    spec = _spec.F32
    f = np.float32
    upper = w >= 2**31
    v = (~w & MASK32) if upper else w  # < 2**31; tail area q = (2v + 1) / 2**33
    n = 2 * v + 1
    d = _fixed_to_float(2**32 - n, 8, 33, spec)  # |u - 1/2|
    if d <= f(_spec.PPND7_SPLIT1):
        ds = _split(d, spec)
        r = f(_spec.PPND7_CONST1) - _mul(ds, ds)
        top = d * _horner(_spec.PPND7_A, r, spec)
        den = _horner(_spec.PPND7_B, r, spec)
    else:
        t = np.sqrt(-_log_from_int(n, 32, 33, spec)) - f(_spec.PPND7_CONST2)
        top = _horner(_spec.PPND7_C, t, spec)
        den = _horner(_spec.PPND7_D, t, spec)
    return f((top if upper else -top) / den)


def _normal_f64(w0: int, w1: int) -> np.float64:
    """Phi^-1((w + 1/2) / 2**64) by AS241 PPND16, for w = w0 * 2**32 + w1."""
    spec = _spec.F64
    f = np.float64
    w = (w0 << 32) | w1
    upper = w >= 2**63
    v = (~w & (2**64 - 1)) if upper else w
    n = 2 * v + 1  # q = n / 2**65
    d = _fixed_to_float(2**64 - n, 11, 65, spec)
    if d <= f(_spec.PPND16_SPLIT1):
        ds = _split(d, spec)
        r = f(_spec.PPND16_CONST1) - _mul(ds, ds)
        top = d * _horner(_spec.PPND16_A, r, spec)
        den = _horner(_spec.PPND16_B, r, spec)
    else:
        root = np.sqrt(-_log_from_int(n, 64, 65, spec))
        if root <= f(_spec.PPND16_SPLIT2):
            t = root - f(_spec.PPND16_CONST2)
            top, den = _horner(_spec.PPND16_C, t, spec), _horner(_spec.PPND16_D, t, spec)
        else:
            t = root - f(_spec.PPND16_SPLIT2)
            top, den = _horner(_spec.PPND16_E, t, spec), _horner(_spec.PPND16_F, t, spec)
    return f((top if upper else -top) / den)


# ---------------------------------------------------------- argument handling


def _counter(name: str, value: Any) -> np.ndarray:
    """A step/slot/index/data argument as a uint32 array (arrays wrap mod 2**32)."""
    if hasattr(value, "dtype") and hasattr(value, "shape") and not isinstance(value, np.generic):
        arr = np.asarray(value)
        _checks.check_counter_dtype(name, arr.dtype)
        return arr.astype(np.uint32)
    if isinstance(value, (list, tuple, range)):
        arr = np.asarray(value)
        if arr.size == 0:
            arr = arr.astype(np.uint32)
        _checks.check_counter_dtype(name, arr.dtype)
        return arr.astype(np.uint32)
    return np.asarray(_checks.check_counter(name, value), np.uint32)


def _key_words(episode_key: Any) -> tuple[np.ndarray, np.ndarray]:
    ek = np.asarray(episode_key)
    _checks.check_episode_key_array(ek.dtype, ek.shape)
    return ek[..., 0], ek[..., 1]


def _map(
    fn: Callable[..., Any], dtype: Any, *arrays: np.ndarray, tail: tuple[int, ...] = ()
) -> Any:
    """Apply a scalar function elementwise over broadcast arrays of Python ints."""
    try:
        grid = np.broadcast_arrays(*arrays)
    except ValueError as err:
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(f"arguments must broadcast together, got shapes {shapes}") from err
    shape = grid[0].shape
    out = np.empty(shape + tail, dtype)
    for pos in np.ndindex(*shape):
        out[pos] = fn(*(int(a[pos]) for a in grid))
    return out[()] if out.ndim == 0 else out


def _draw_args(episode_key: Any, step: Any, slot: Any, index: Any) -> tuple[np.ndarray, ...]:
    k0, k1 = _key_words(episode_key)
    return k0, k1, _counter("step", step), _counter("slot", slot), _counter("index", index)


def _vector_args(
    episode_key: Any, step: Any, slot: Any, num: Any, start: Any
) -> tuple[np.ndarray, ...]:
    num = _checks.check_count("num", num)
    start = _checks.check_counter("start", start)
    if start + num - 1 > _checks.U32_MAX:
        raise ValueError(f"start + num - 1 must be <= 2**32 - 1, got start={start}, num={num}")
    k0, k1 = _key_words(episode_key)
    st, sl = _counter("step", step), _counter("slot", slot)
    batch = np.broadcast_shapes(k0.shape, st.shape, sl.shape)

    def lift(a: np.ndarray) -> np.ndarray:
        return np.broadcast_to(a, batch).reshape((*batch, 1))

    index = np.arange(start, start + num, dtype=np.uint64).astype(np.uint32)
    return lift(k0), lift(k1), lift(st), lift(sl), index.reshape((1,) * len(batch) + (num,))


def _vector_draw(
    draw: Callable[..., Any], counters: tuple[Any, ...], *param: Any, dtype: Any
) -> np.ndarray:
    """``draw`` (a scalar form) at ``counters = (episode_key, step, slot, num, start)``.

    The index ``start + arange(num)`` goes on a new last axis.
    """
    k0, k1, st, sl, ix = _vector_args(*counters)
    return np.asarray(
        draw(np.stack(np.broadcast_arrays(k0, k1), -1), st, sl, ix, *param, dtype=dtype)
    )


def _x64() -> bool:
    """The reference supports float64 and 64-bit ints unconditionally."""
    return True


def _n_array(n: Any, dtype: np.dtype) -> np.ndarray:
    if hasattr(n, "dtype") and hasattr(n, "shape") and not isinstance(n, np.generic):
        arr = np.asarray(n)
        _checks.check_counter_dtype("n", arr.dtype)
        return arr.astype(np.uint32)
    return np.asarray(_checks.check_randint_n(n, dtype), np.uint32)


def _p_array(p: Any, dtype: np.dtype) -> np.ndarray:
    if hasattr(p, "dtype") and hasattr(p, "shape") and not isinstance(p, np.generic):
        arr = np.asarray(p)
        if arr.dtype.kind != "f":
            raise TypeError(f"p must be a real number or a float array, got dtype {arr.dtype}")
        return arr.astype(dtype)
    return np.asarray(_checks.check_probability(p), dtype)


# ------------------------------------------------------------------ the API


def episode_key(key: Any) -> np.ndarray:
    """Derive an episode key from a JAX key or its uint32 data words.

    Args:
      key: a typed JAX key, a legacy uint32 key, or any uint32 array of key
        data ``(..., W)`` (for ``jax.random.PRNGKey(s)`` with ``0 <= s <
        2**32`` that is ``[0, s]``).

    Returns:
      uint32 array ``batch + (2,)``, equal to ``parallax.rng.episode_key(key)``.

    Example:
      >>> import numpy as np
      >>> episode_key(np.array([0, 0], np.uint32)).shape
      (2,)
    """
    dtype = getattr(key, "dtype", None)
    if dtype is not None and "key<" in str(dtype):
        import jax  # only needed to read the data of a typed key

        words = np.asarray(jax.random.key_data(key))
    elif (
        dtype is not None
        and np.dtype(dtype) == np.uint32
        and np.ndim(key) >= 1
        and np.shape(key)[-1] >= 1
    ):
        words = np.asarray(key)
    else:
        raise TypeError(
            "key must be a JAX key (jax.random.key / jax.random.PRNGKey) or a uint32 array of key data (..., W); "
            f"got {type(key).__name__} with dtype {dtype}"
        )
    batch = words.shape[:-1]
    out = np.empty((*batch, 2), np.uint32)
    for pos in np.ndindex(*batch):
        w = [int(x) for x in words[pos]]
        if len(w) % 2:
            w.append(0)
        s0, s1 = _spec.EPISODE_IV
        for j in range(0, len(w), 2):
            s0, s1 = _permute64(s0, s1, w[j], w[j + 1])
        out[pos] = (s0, s1)
    return out


def fold_in(episode_key: Any, data: Any) -> np.ndarray:
    """Child episode key from an episode key and a number (see the JAX flavour).

    Example:
      >>> import numpy as np
      >>> fold_in(np.zeros(2, np.uint32), 3).shape
      (2,)
    """
    k0, k1 = _key_words(episode_key)

    def one(a: int, b: int, d: int) -> tuple[int, int]:
        return _permute64(a ^ _spec.FOLD_KEY[0], b ^ _spec.FOLD_KEY[1], d, _spec.FOLD_TWEAK)

    out = _map(one, np.uint32, k0, k1, _counter("data", data), tail=(2,))
    return np.asarray(out)


def bits(episode_key: Any, step: Any, slot: Any, index: Any, *, words: int = 1) -> Any:
    """Raw hash bits: word 0 (uint32), or both words on a last axis of 2.

    Example:
      >>> import numpy as np
      >>> bits(np.zeros(2, np.uint32), 0, 0, 0).dtype
      dtype('uint32')
    """
    if words not in (1, 2) or isinstance(words, bool):
        raise ValueError(f"words must be 1 or 2, got {words!r}")
    args = _draw_args(episode_key, step, slot, index)
    if words == 1:
        return _map(lambda *a: _hash(*a)[0], np.uint32, *args)
    return np.asarray(_map(_hash, np.uint32, *args, tail=(2,)))


def uniform(episode_key: Any, step: Any, slot: Any, index: Any, *, dtype: Any = np.float32) -> Any:
    """Uniform in [0, 1): 24 bits of word 0 (float32) or 53 bits of both words (float64).

    Example:
      >>> import numpy as np
      >>> 0 <= uniform(np.zeros(2, np.uint32), 0, 0, 0) < 1
      np.True_
    """
    dt = _checks.check_float_dtype(dtype, _x64())
    return _map(
        lambda *a: _uniform_value(*_hash(*a), dt), dt, *_draw_args(episode_key, step, slot, index)
    )


def randint(
    episode_key: Any, step: Any, slot: Any, index: Any, n: Any, *, dtype: Any = np.int32
) -> Any:
    """Integer in [0, n): floor(X * n / 2**64) for the 64-bit draw X.

    Example:
      >>> import numpy as np
      >>> int(randint(np.zeros(2, np.uint32), 0, 0, 0, 6)) in range(6)
      True
    """
    dt = _checks.check_int_dtype(dtype, _x64())
    n_arr = _n_array(n, dt)

    def one(k0: int, k1: int, st: int, sl: int, ix: int, nn: int) -> int:
        return _randint_value(*_hash(k0, k1, st, sl, ix), nn)

    return _map(one, dt, *_draw_args(episode_key, step, slot, index), n_arr)


def bernoulli(
    episode_key: Any, step: Any, slot: Any, index: Any, p: Any, *, dtype: Any = np.float32
) -> Any:
    """True with probability p: uniform(..., dtype) < p (p converted to dtype).

    Example:
      >>> import numpy as np
      >>> bernoulli(np.zeros(2, np.uint32), 0, 0, 0, 1.0)
      np.True_
    """
    dt = _checks.check_float_dtype(dtype, _x64())
    u = uniform(episode_key, step, slot, index, dtype=dt)
    p_arr = _p_array(p, dt)
    return np.less(u, p_arr)


def normal(episode_key: Any, step: Any, slot: Any, index: Any, *, dtype: Any = np.float32) -> Any:
    """Standard normal: AS241 on word 0 (float32) or on both words (float64).

    Example:
      >>> import numpy as np
      >>> normal(np.zeros(2, np.uint32), 0, 0, 0).dtype
      dtype('float32')
    """
    dt = _checks.check_float_dtype(dtype, _x64())
    if dt == np.float32:
        return _map(
            lambda *a: _normal_f32(_hash(*a)[0]), dt, *_draw_args(episode_key, step, slot, index)
        )
    return _map(lambda *a: _normal_f64(*_hash(*a)), dt, *_draw_args(episode_key, step, slot, index))


def uniform_vector(
    episode_key: Any, step: Any, slot: Any, num: int, *, start: int = 0, dtype: Any = np.float32
) -> np.ndarray:
    """``num`` uniforms over index = start + arange(num), on a new last axis."""
    dt = _checks.check_float_dtype(dtype, _x64())
    args = _vector_args(episode_key, step, slot, num, start)
    return np.asarray(_map(lambda *a: _uniform_value(*_hash(*a), dt), dt, *args))


def normal_vector(
    episode_key: Any, step: Any, slot: Any, num: int, *, start: int = 0, dtype: Any = np.float32
) -> np.ndarray:
    """``num`` standard normals over index = start + arange(num), on a new last axis."""
    return _vector_draw(normal, (episode_key, step, slot, num, start), dtype=dtype)


def randint_vector(
    episode_key: Any,
    step: Any,
    slot: Any,
    num: int,
    n: Any,
    *,
    start: int = 0,
    dtype: Any = np.int32,
) -> np.ndarray:
    """``num`` integers in [0, n) over index = start + arange(num), on a new last axis."""
    return _vector_draw(randint, (episode_key, step, slot, num, start), n, dtype=dtype)


def bernoulli_vector(
    episode_key: Any,
    step: Any,
    slot: Any,
    num: int,
    p: Any,
    *,
    start: int = 0,
    dtype: Any = np.float32,
) -> np.ndarray:
    """``num`` booleans uniform < p over index = start + arange(num), on a new last axis."""
    return _vector_draw(bernoulli, (episode_key, step, slot, num, start), p, dtype=dtype)
