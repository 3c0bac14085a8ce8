"""Argument checks shared by both flavours of ``parallax.rng``.

Holds:

- ``check_counter``: a Python integer used as step/slot/index/data.
- ``check_count``: ``num`` of a ``*_vector`` draw.
- ``check_randint_n``: a Python integer ``n`` of ``randint``.
- ``check_probability``: a Python float ``p`` of ``bernoulli``.
- ``check_float_dtype``: the ``dtype=`` of ``uniform``/``normal``/``bernoulli``.
- ``check_int_dtype``: the ``dtype=`` of ``randint``.
- ``check_counter_dtype``: the dtype of an array used as step/slot/index.
- ``check_episode_key_array``: dtype and shape of an episode key.

Errors name the parameter, the value and the allowed range.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

U32_MAX = 2**32 - 1


def is_python_int(value: Any) -> bool:
    """True for ``int`` and NumPy integer scalars, False for ``bool`` and arrays."""
    if isinstance(value, (bool, np.bool_)):
        return False
    return isinstance(value, (int, np.integer))


def check_counter(name: str, value: Any) -> int:
    """Validate a Python integer counter in ``[0, 2**32 - 1]`` and return it as ``int``.

    Raises:
      TypeError: if ``value`` is a bool or not an integer.
      ValueError: if ``value`` is outside ``[0, 2**32 - 1]``.
    """
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got bool {value!r}")
    if not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"{name} must be an integer or integer array, got {type(value).__name__} {value!r}"
        )
    v = int(value)
    if not 0 <= v <= U32_MAX:
        raise ValueError(f"{name} must be in [0, 2**32 - 1], got {v}")
    return v


def check_count(name: str, value: Any) -> int:
    """Validate a static length ``num`` in ``[0, 2**31 - 1]``."""
    if not is_python_int(value):
        raise TypeError(f"{name} must be a Python int, got {type(value).__name__} {value!r}")
    v = int(value)
    if not 0 <= v <= 2**31 - 1:
        raise ValueError(f"{name} must be in [0, 2**31 - 1], got {v}")
    return v


def check_counter_dtype(name: str, dtype: Any) -> None:
    """Arrays used as counters must have an integer (not bool) dtype."""
    dt = np.dtype(dtype)
    if dt.kind not in "iu":
        raise TypeError(f"{name} must have an integer dtype, got {dt}")


def check_randint_n(value: Any, dtype: np.dtype) -> int:
    """Validate a Python integer ``n`` in ``[1, min(2**32 - 1, max of dtype)]``."""
    if not is_python_int(value):
        raise TypeError(
            f"n must be an integer or integer array, got {type(value).__name__} {value!r}"
        )
    v = int(value)
    hi = min(U32_MAX, int(np.iinfo(dtype).max))
    if not 1 <= v <= hi:
        raise ValueError(f"n must be in [1, {hi}] for dtype {dtype}, got {v}")
    return v


def check_probability(value: Any) -> float:
    """Validate a Python real ``p`` in ``[0, 1]``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"p must be a real number or float array, got {type(value).__name__} {value!r}"
        )
    v = float(value)
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {v}")
    return v


def check_float_dtype(dtype: Any, x64: bool) -> np.dtype:
    """``dtype`` must be float32, or float64 when 64-bit types are enabled."""
    try:
        dt = np.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}") from err
    if dt == np.float32:
        return dt
    if dt == np.float64:
        if not x64:
            raise ValueError(
                "dtype=float64 needs jax_enable_x64 (e.g. `with jax.enable_x64(True):`)"
            )
        return dt
    raise ValueError(f"dtype must be float32 or float64, got {dt}")


def check_int_dtype(dtype: Any, x64: bool) -> np.dtype:
    """``dtype`` of ``randint``: int32 or uint32, or int64/uint64 with 64-bit types."""
    try:
        dt = np.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"dtype must be an integer dtype, got {dtype!r}") from err
    if dt in (np.dtype(np.int32), np.dtype(np.uint32)):
        return dt
    if dt in (np.dtype(np.int64), np.dtype(np.uint64)):
        if not x64:
            raise ValueError(f"dtype={dt} needs jax_enable_x64")
        return dt
    raise ValueError(f"dtype must be int32, uint32, int64 or uint64, got {dt}")


def check_episode_key_array(dtype: Any, shape: tuple[int, ...]) -> None:
    """An episode key is a uint32 array whose last axis has length 2."""
    dt = np.dtype(dtype)
    if dt != np.uint32:
        raise TypeError(f"episode_key must be a uint32 array from episode_key(), got dtype {dt}")
    if len(shape) == 0 or shape[-1] != 2:
        raise ValueError(f"episode_key must have shape (..., 2), got {shape}")
