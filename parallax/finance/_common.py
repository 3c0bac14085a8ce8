"""What the four finance envs share: numerics, the params base, and the env base.

- `float_dtype()`: the default float dtype right now (float64 under x64, else float32).
- `static_int(name, value)`: an int-valued shape/episode argument as a Python int.
- `opaque(x)`: `x` hidden from XLA's algebraic simplifier (no constant folding through it).
- `divide(x, d)`: `x / d` as a true division, also when `d` is a compile-time constant.
- `evaluated_once(v)`: an array unchanged, but computed once per step, not once per use.
- `numeric_action(action, size, what)`: an action with `size` numbers, flattened.
- `ParamsMethods`: `replace` and `as_arrays` for the frozen params dataclasses of all four
  envs (`TradingParams`, `PortfolioParams`, `MarketMakingParams`, `OptimalExecutionParams`).
- `resolve_params(params, default, ...)`: the params of one call, as arrays of the float
  dtype (opaque to XLA unless asked otherwise).
- `FinanceEnv`: the base class of the four envs: `params`, `with_params`, numeric
  parameters as attributes (`env.sigma`, `env.sigma = 0.3`), read-only shape parameters,
  unknown attribute names refused with a did-you-mean, and `episode_equity_key` (what
  `RecordEpisodeStatistics` reports per episode).

Why `opaque` and `divide`: the env's parameters are usually compile-time constants, and XLA
rewrites a division by a constant as a multiplication by its reciprocal, which rounds
differently from NumPy (and so from sekai) in about a third of cases (spec §9.2). Passing
the params through `opaque` and constant divisors through `divide` keeps every division a
division. (XLA:CPU may still contract `a + b * c` into a fused multiply-add, a 1-ulp
difference that no barrier prevents; the tolerance rule of the differential tests allows
for it.)
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, ClassVar, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from .._action_check import check_action
from .._validate import check_key, closest
from ._validation import params_of

P = TypeVar("P", bound="ParamsMethods")
E = TypeVar("E", bound="FinanceEnv")

__all__ = [
    "FinanceEnv",
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
    """Methods shared by the frozen params dataclasses of the finance envs."""

    def replace(self: P, **changes: Any) -> P:
        """A copy with the given fields changed (`env.params.replace(sigma=0.5)`)."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]  # a dataclass

    def as_arrays(self: P, dtype: Any = None) -> P:
        """Every leaf (nested cost and reward leaves too) as an array of `dtype`.

        A market model (`model=`) is kept as it is: it casts its own leaves when it runs
        (some are integers, e.g. `BlockBootstrap.block_size`).

        Args:
            dtype: a float dtype; default the default float dtype (float64 under x64).
        """
        from ._models import MarketModel

        dt = float_dtype() if dtype is None else dtype

        def cast(x: Any) -> Any:
            return x if isinstance(x, MarketModel) else jnp.asarray(x, dtype=dt)

        return jax.tree.map(cast, self, is_leaf=lambda x: isinstance(x, MarketModel))  # type: ignore[no-any-return]


def resolve_params(params: Any, default: P, *, dtype: Any = None, barrier: bool = True) -> P:
    """`params` (or `default` when None) as arrays of `dtype` (default: the float dtype).

    Args:
        params: a call's `params=` (None, or the env's params class).
        default: the env's own params.
        dtype: the float dtype of every leaf (default `float_dtype()`).
        barrier: pass the result through `opaque` (MarketMaking and OptimalExecution do,
            so that XLA does not constant-fold their divisions; Trading and Portfolio never
            did, and keep their compiled numerics).

    Raises:
        TypeError: `params` is neither None nor of `default`'s class.
    """
    p = params_of(params, default).as_arrays(dtype)
    return opaque(p) if barrier else p


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


_UNSET = object()


def check_step_inputs(env: Any, action: Any, *, any_shape: bool = False) -> None:
    """The trace-time check of a finance env's action (while `env.check_actions`).

    `any_shape`: the env takes any shape holding `action_space`'s number of elements (the
    sekai convention of the continuous envs and the order book envs).
    """
    if env.check_actions:
        check_action(env.action_space, action, f"{type(env).__name__}.step", any_shape=any_shape)


def check_reset_key(env: Any, key: Any) -> None:
    """One PRNG key per reset, or a `TypeError` that says to batch with `VmapWrapper`."""
    check_key(key, f"{type(env).__name__}.reset")


class FinanceEnv:
    """Base class of the four finance envs: params, `with_params` and parameters as attributes.

    - `params`: a frozen params pytree (a `ParamsMethods` dataclass); `reset`/`step` use it
      unless given `params=` per call.
    - `with_params(params)`: a shallow copy whose default params are `params`.
    - Reading `env.<name>` for a name in `attribute_params` returns the stored parameter;
      setting it validates the value as the constructor does and replaces `params` (the
      next `reset`/`step` use it, as sekai's `set_attr`). Jitted functions that closed over
      the env keep the params they were traced with: re-jit, or pass `params=` per call.
    - Names in `static_params` are read-only: they fix array shapes or the compiled program.
    - Any other new attribute name is refused with a did-you-mean (no dead attributes).

    Subclasses set `attribute_params`, `static_params` and implement `_set_param`; their
    `__init__` ends with `self._built = True` (assignments before it are plain).
    """

    params: Any
    attribute_params: ClassVar[tuple[str, ...]] = ()
    """Numeric parameters readable and settable as attributes (`env.sigma = 0.3`)."""
    static_params: ClassVar[dict[str, str]] = {}
    """Read-only parameters and why (they fix shapes or the compiled program)."""
    episode_equity_key: ClassVar[str | None] = None
    """The `info` key `RecordEpisodeStatistics` records at each episode's end as its
    `final_equity` (None: the env reports no equity)."""
    check_actions: bool = True
    """Whether `step` checks the action's shape and dtype kind at trace time
    (`parallax.check_action`; free at run time). Set it to False to skip the check."""

    def with_params(self: E, params: Any) -> E:
        """A shallow copy of this env whose default params are `params` (may be traced).

        Use it to run a wrapper stack (auto-reset included) with per-env randomised params:
        `jax.vmap(lambda p, s, a: AutoResetWrapper(env.with_params(p)).step(s, a))`, or
        pass `params=` to the stack's `reset`/`step`, which every wrapper forwards.
        """
        twin = copy.copy(self)
        object.__setattr__(twin, "params", params)
        return twin

    def _set_param(self, name: str, value: Any) -> Any:
        """The params with `name` set to `value`, validated as the constructor does."""
        raise NotImplementedError  # pragma: no cover - every subclass implements it

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: the numeric parameters live in `params`.
        if name.startswith("_") or "params" not in self.__dict__:
            raise AttributeError(name)
        params = self.__dict__["params"]
        if name in type(self).attribute_params or name in _field_names(params):
            return getattr(params, name)
        raise AttributeError(self._unknown(name))

    def __setattr__(self, name: str, value: Any) -> None:
        if not self.__dict__.get("_built", False):
            object.__setattr__(self, name, value)
            return
        cls = type(self)
        if name in cls.static_params:
            raise AttributeError(
                f"{cls.__name__}.{name} is read-only: {cls.static_params[name]}; build a new "
                f"env with {name}=..."
            )
        if name in cls.attribute_params:
            object.__setattr__(self, "params", self._set_param(name, value))
            return
        if name in _field_names(self.__dict__.get("params")):
            raise AttributeError(
                f"{cls.__name__}.{name} cannot be set as an attribute; use "
                f"env.with_params(env.params.replace({name}=...))"
            )
        prop = getattr(cls, name, None)
        if isinstance(prop, property) and prop.fset is None:
            raise AttributeError(f"{cls.__name__}.{name} is read-only (a derived property)")
        if name in self.__dict__ or hasattr(cls, name):
            object.__setattr__(self, name, value)
            return
        raise AttributeError(self._unknown(name) + " (setting it would have no effect)")

    def _unknown(self, name: str) -> str:
        cls = type(self)
        known = [n for n in (*dir(cls), *self.__dict__) if not n.startswith("_")]
        known += [*cls.attribute_params, *cls.static_params]
        known += _field_names(self.__dict__.get("params"))
        return f"{cls.__name__} has no attribute {name!r}{closest(name, known)}"


def _field_names(params: Any) -> tuple[str, ...]:
    """The field names of a params dataclass (none for anything else, None included)."""
    if not dataclasses.is_dataclass(params):
        return ()
    return tuple(f.name for f in dataclasses.fields(params))
