"""Numerics shared by `MarketMakingEnv` and `OptimalExecutionEnv`.

- `float_dtype()`: the default float dtype right now (float64 under x64, else float32).
- `static_int(name, value)`: an int-valued shape/episode argument as a Python int.
- `opaque(x)`: `x` hidden from XLA's algebraic simplifier (no constant folding through it).
- `divide(x, d)`: `x / d` as a true division, also when `d` is a compile-time constant.
- `evaluated_once(v)`: a vector unchanged, but computed once per step, not once per use.

Why: the env's parameters are usually compile-time constants, and XLA rewrites a division
by a constant as a multiplication by its reciprocal, which rounds differently from NumPy
(and so from sekai) in about a third of cases (spec §9.2). Passing the params through
`opaque` and constant divisors through `divide` keeps every division a division. (XLA:CPU
may still contract `a + b * c` into a fused multiply-add, a 1-ulp difference that no
barrier prevents; the tolerance rule of the differential tests allows for it.)
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

__all__ = ["divide", "evaluated_once", "float_dtype", "opaque", "static_int"]


def float_dtype() -> np.dtype:
    """The default float dtype right now: float64 under `jax_enable_x64`, else float32."""
    return np.dtype(jax.dtypes.canonicalize_dtype(jnp.float64))


def static_int(name: str, value: Any) -> int:
    """An integer-valued argument (an int, or an integral float) as a Python int.

    Raises:
        TypeError: naming `name`, for a bool, a non-number or a non-integral value.
    """
    ok = not isinstance(value, bool) and isinstance(value, int | np.integer | float | np.floating)
    if not ok or not float(value).is_integer():
        raise TypeError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


def opaque(x: Any) -> Any:
    """`x` (an array or a pytree of arrays) itself, opaque to XLA's constant folding."""
    return jax.lax.optimization_barrier(x)


def divide(x: Array, d: Any) -> Array:
    """`x / d` in `x`'s dtype, never rewritten as `x * (1 / d)` (which rounds differently)."""
    return x / opaque(jnp.asarray(d, x.dtype))


def evaluated_once(v: Array) -> Array:
    """`v` (a finite vector, last axis) unchanged, as the result of a reduction.

    XLA fuses cheap elementwise producers into every consumer, duplicating them. An action
    computed in the same jitted loop as the step (random actions from `parallax.rng` or
    `jax.random`: cheap integer hashing) is read by the quotes, the fills, the cash, the
    reward and the info, so each of their fusions would recompute it: 2-3x slower for
    MarketMaking-v0 at N=1024. XLA does not fuse a reduction into its consumers, so writing
    the identity as `sum_j v_j e_j` makes it computed once. Exact for finite values
    (`v_i * 1 + v_j * 0`); a NaN spreads to the other elements.
    """
    eye = jnp.eye(v.shape[-1], dtype=v.dtype)
    return jnp.sum(v[..., :, None] * eye, axis=-2)
