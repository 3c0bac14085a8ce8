"""Constructor checks shared by the finance envs, with sekai's messages.

- `float64_array(value)`: a float64 array, or None when it is not numbers.
- `finite_number(name, value, bound=None)`: a finite float, optionally `> 0` or `>= 0`.
- `finite_array(name, value, bound=None)`: a float64 array of finite numbers, likewise.
- `int_at_least(name, value, minimum)`: an int `>= minimum`.
- `params_of(params, default, cls=None)`: a call's `params=` checked to be the env's params class.
- `check_correlation(corr, n)`: sekai's checks of a correlation matrix, and its Cholesky factor.
- `per_asset(name, value, n)`: a scalar or per-asset value as an `(n,)` array.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

Bound = Literal[">0", ">=0"] | None


def _bound_text(bound: Bound) -> str:
    return {">0": " > 0", ">=0": " >= 0", None: ""}[bound]


def float64_array(value: Any) -> np.ndarray | None:
    """`value` as a float64 array, or None when numpy cannot read it as numbers."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None


def _finite(name: str, value: Any, bound: Bound, what: str, scalar: bool) -> np.ndarray:
    """`value` as a float64 array (0-d if `scalar`) of finite numbers within `bound`;
    else `ValueError`: `f"{name} must {what}{bound}, got {value!r}"`."""
    arr = float64_array(value)
    if arr is None or (scalar and arr.ndim != 0) or not np.all(np.isfinite(arr)):
        ok = False
    elif bound == ">0":
        ok = bool(np.all(arr > 0))
    elif bound == ">=0":
        ok = bool(np.all(arr >= 0))
    else:
        ok = True
    if not ok or arr is None:
        raise ValueError(f"{name} must {what}{_bound_text(bound)}, got {value!r}")
    return arr


def finite_number(name: str, value: Any, bound: Bound = None) -> float:
    """`value` as a Python float; `ValueError` naming `name` unless finite and within `bound`."""
    return float(_finite(name, value, bound, "be a finite number", scalar=True))


def finite_array(name: str, value: Any, bound: Bound = None) -> np.ndarray:
    """`value` as a float64 array; `ValueError` naming `name` unless all finite and in `bound`."""
    return _finite(name, value, bound, "hold finite numbers", scalar=False)


def int_at_least(name: str, value: Any, minimum: int) -> int:
    """`value` as an int; `ValueError` naming `name` unless it is an int `>= minimum`."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def params_of(params: Any, default: Any, cls: type | None = None) -> Any:
    """`params`, or `default` when None; `TypeError` unless it is a `cls` (default's class).

    The message says how to build one: from the env's own, `env.params.replace(name=value)`.
    """
    if params is None:
        return default
    cls = type(default) if cls is None else cls
    if not isinstance(params, cls):
        if isinstance(params, dict) and params and all(isinstance(k, str) for k in params):
            example = ", ".join(f"{k}={v!r}" for k, v in params.items())
        else:
            example = ", ".join(f"{name}=..." for name in list(vars(default))[:2])
        raise TypeError(
            f"params must be the env's params class, {cls.__name__}, got "
            f"{type(params).__name__}; build one from the env's own: "
            f"env.params.replace({example})"
        )
    return params


def check_correlation(corr: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """sekai's checks of a correlation matrix; returns it and its lower Cholesky factor."""
    arr = np.asarray(corr, dtype=np.float64)
    if arr.shape != (n, n):
        raise ValueError(f"corr must have shape ({n}, {n}), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("corr must be finite")
    if not np.allclose(arr, arr.T, rtol=0.0, atol=1e-8):
        raise ValueError("corr must be symmetric")
    if not np.allclose(np.diag(arr), 1.0, rtol=0.0, atol=1e-8):
        raise ValueError("corr must have a unit diagonal")
    try:
        chol = np.linalg.cholesky(arr)
    except np.linalg.LinAlgError:
        raise ValueError("corr must be positive definite") from None
    return arr, chol


def per_asset(name: str, value: np.ndarray, n: int) -> np.ndarray:
    """`value` (a scalar, or `(1,)` or `(n,)`) as a float64 `(n,)` per-asset array."""
    if not (value.ndim == 0 or (value.ndim == 1 and value.shape[0] in (1, n))):
        raise ValueError(
            f"{name} must be a scalar or an array of length {n}, got shape {value.shape}"
        )
    return np.array(np.broadcast_to(value, (n,)), dtype=np.float64)
