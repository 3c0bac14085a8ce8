"""Numerics shared by `MarketMakingEnv` and `OptimalExecutionEnv`.

- `float_dtype()`: the default float dtype right now (float64 under x64, else float32).
- `static_int(name, value)`: an int-valued shape/episode argument as a Python int.
- `ParamsMethods`: `replace` and `as_arrays` for the frozen params dataclasses.
- `resolve_params(params, default, cls)`: the params of one call, as opaque arrays.
- `numeric_action(action, size, what)`: an action with `size` numbers, flattened.
- `opaque(x)`: `x` hidden from XLA's algebraic simplifier (no constant folding through it).
- `divide(x, d)`: `x / d` as a true division, also when `d` is a compile-time constant.
- `evaluated_once(v)`: an array unchanged, but computed once per step, not once per use.

Why: the env's parameters are usually compile-time constants, and XLA rewrites a division
by a constant as a multiplication by its reciprocal, which rounds differently from NumPy
(and so from sekai) in about a third of cases (spec §9.2). Passing the params through
`opaque` and constant divisors through `divide` keeps every division a division. (XLA:CPU
may still contract `a + b * c` into a fused multiply-add, a 1-ulp difference that no
barrier prevents; the tolerance rule of the differential tests allows for it.)
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from ._validation import params_of

P = TypeVar("P", bound="ParamsMethods")

__all__ = [
    "ParamsMethods",
    "divide",
    "evaluated_once",
    "float_dtype",
    "numeric_action",
    "opaque",
    "resolve_params",
    "static_int",
]


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
    """`v` unchanged, but computed once per step rather than once per use.

    XLA fuses cheap elementwise producers into every consumer, duplicating them. An action
    computed in the same jitted loop as the step (random actions from `parallax.rng` or
    `jax.random`: cheap integer hashing) is read by the quotes, the fills, the cash, the
    reward and the info, so each of their fusions would recompute it: 2-3x slower for
    MarketMaking-v0 at N=1024. An optimization barrier is not fused through, so `v` is
    materialised once. It is the identity on every value, NaN included, and eager and
    jitted calls agree (an earlier form, `sum_j v_j e_j`, spread a NaN to the other
    elements eagerly but not under jit).
    """
    return jax.lax.optimization_barrier(v)


class ParamsMethods:
    """Methods shared by the params dataclasses (`MarketMakingParams`, ...)."""

    def replace(self: P, **changes: Any) -> P:
        """A copy with the given fields changed."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]  # a dataclass

    def as_arrays(self: P) -> P:
        """Every field as an array of the default float dtype (float64 under x64)."""
        dt = float_dtype()
        fields = dataclasses.fields(self)  # type: ignore[arg-type]  # a dataclass
        return self.replace(**{f.name: jnp.asarray(getattr(self, f.name), dt) for f in fields})


def resolve_params(params: Any, default: P, cls: type[P]) -> P:
    """`params` (or `default` when None) as opaque arrays of the default float dtype.

    Raises:
        TypeError: `params` is neither None nor a `cls`.
    """
    return opaque(params_of(params, default, cls).as_arrays())


def numeric_action(action: ArrayLike, size: int, what: str) -> Array:
    """`action` flattened to `(size,)` (any shape with `size` numbers, as sekai accepts).

    Raises:
        TypeError: a non-numeric dtype. ValueError: another number of elements (`what` says
            what the numbers are).
    """
    a = jnp.asarray(action)
    if not (jnp.issubdtype(a.dtype, jnp.floating) or jnp.issubdtype(a.dtype, jnp.integer)):
        raise TypeError(f"action must be numeric, got dtype {a.dtype}")
    if a.size != size:
        noun = "number" if size == 1 else "numbers"
        raise ValueError(f"action must hold {size} {noun} ({what}), got shape {a.shape}")
    return a.reshape(size)
