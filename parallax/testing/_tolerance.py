"""The comparison rule of the battery, written down once.

- `Tolerance`: exact for bools, integers and PRNG keys; for floats, a stated number of ulp
  and/or `atol + rtol * |expected|`, optionally per field; a list of near-threshold rules.
- `NearThreshold`: a flag flip explained by a value within k ulp of a threshold.
- `ulp_distance`: the number of representable floats between two values.
- `EXACT`: `Tolerance()`, bit-identical comparison.
- `TRANSFORM_TOLERANCE`: what `check_env` allows between eager and jit/vmap/scan runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "EXACT",
    "TRANSFORM_TOLERANCE",
    "FloatRule",
    "NearThreshold",
    "Tolerance",
    "ulp_distance",
]


def _is_float(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.floating) or dtype.name == "bfloat16"


def ulp_distance(a: Any, b: Any, dtype: Any = None) -> np.ndarray:
    """How many representable floats of `dtype` lie between `a` and `b` (element-wise).

    Both values are first rounded to `dtype` (default: the dtype of `a`). `+0.0` and `-0.0`
    are 0 ulp apart; a NaN is infinitely far from everything (including another NaN).

    Args:
        a: float array-like.
        b: float array-like, broadcastable with `a`.
        dtype: a float dtype (float16, bfloat16, float32 or float64).

    Returns:
        A float64 array (inf where either value is NaN, or one is infinite and they differ).

    Example:
        >>> import numpy as np
        >>> from parallax.testing import ulp_distance
        >>> int(ulp_distance(np.float32(1.0), np.nextafter(np.float32(1.0), np.float32(2.0))))
        1
    """
    dt = np.dtype(dtype) if dtype is not None else np.asarray(a).dtype
    if not _is_float(dt):
        raise TypeError(f"ulp_distance: dtype must be a float dtype, got {dt}")
    xa = np.asarray(a).astype(dt)
    xb = np.asarray(b).astype(dt)
    ints = np.dtype(f"i{dt.itemsize}")
    ia = xa.view(ints).astype(np.float64)
    ib = xb.view(ints).astype(np.float64)
    # Map the sign-magnitude bit patterns onto a monotonic integer line (-0.0 -> 0).
    low = -float(2 ** (8 * dt.itemsize - 1))
    oa = np.where(ia < 0, low - ia, ia)
    ob = np.where(ib < 0, low - ib, ib)
    dist = np.abs(oa - ob)
    fa = xa.astype(np.float64)
    fb = xb.astype(np.float64)
    bad = np.isnan(fa) | np.isnan(fb) | ((np.isinf(fa) | np.isinf(fb)) & (fa != fb))
    return np.where(bad, np.inf, dist)


@dataclass(frozen=True)
class FloatRule:
    """How far two floats may be apart: within `ulp` ulp, or within `atol + rtol * |expected|`.

    Either criterion suffices. All zero means bit-identical (NaN matches NaN in the same
    place; `+0.0` matches `-0.0`).
    """

    ulp: int = 0
    rtol: float = 0.0
    atol: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.ulp, bool) or not isinstance(self.ulp, int | np.integer):
            raise TypeError(f"Tolerance: ulp must be a non-negative int, got {self.ulp!r}")
        if self.ulp < 0:
            raise ValueError(f"Tolerance: ulp must be a non-negative int (>= 0), got {self.ulp}")
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
                raise TypeError(f"Tolerance: {name} must be a non-negative float, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"Tolerance: {name} must be a finite non-negative float, got {value}"
                )

    def describe(self) -> str:
        """The rule in words, for error messages."""
        if self.ulp == 0 and self.rtol == 0 and self.atol == 0:
            return "exact"
        parts = []
        if self.ulp:
            parts.append(f"within {self.ulp} ulp")
        if self.rtol or self.atol:
            parts.append(f"|got - expected| <= {self.atol:g} + {self.rtol:g} * |expected|")
        return " or ".join(parts)

    def close(self, got: np.ndarray, expected: np.ndarray) -> np.ndarray:
        """Element-wise: whether `got` (any float dtype) matches `expected` under this rule."""
        g = np.asarray(got)
        dt = g.dtype if _is_float(g.dtype) else np.dtype(np.float64)
        g = g.astype(dt)
        e = np.asarray(expected).astype(dt)
        gf = g.astype(np.float64)
        ef = e.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            ok = (gf == ef) | (np.isnan(gf) & np.isnan(ef))
            if self.ulp:
                ok |= ulp_distance(g, e, dt) <= self.ulp
            if self.rtol or self.atol:
                finite = np.isfinite(gf) & np.isfinite(ef)
                ok |= finite & (np.abs(gf - ef) <= self.atol + self.rtol * np.abs(ef))
        return np.asarray(ok)


FlipHook = Callable[[str, Mapping[str, np.ndarray], Mapping[str, np.ndarray]], bool]
"""`hook(field, got_record, expected_record) -> bool`: whether a bool flip is explained."""


@dataclass(frozen=True)
class NearThreshold:
    """Explain a flip of the bool field `flag` by `value` lying at `threshold`.

    A flag such as `termination = energy <= 0` can legitimately differ between two
    implementations whose `energy` differs by a rounding error, if `energy` sits at the
    threshold. This rule accepts the flip when the `value` field (a dotted record path,
    e.g. `"env_state.energy"`) of *either* record is within `ulp` ulp of `threshold` (in
    that record's dtype) or within `atol` of it (use `atol` for a threshold of 0, where
    ulp are tiny). An explained flip ends the comparison of that episode, because the two
    trajectories legitimately part there.

    Args:
        flag: dotted path of the bool field, e.g. `"termination"`.
        value: dotted path of the float field the flag is computed from.
        threshold: the threshold the flag compares `value` with.
        ulp: how close, in ulp of `value`'s dtype, counts as "at the threshold".
        atol: how close, in absolute terms, counts as "at the threshold".

    Example:
        >>> import numpy as np
        >>> from parallax.testing import NearThreshold
        >>> rule = NearThreshold("termination", "env_state.energy", 0.0, ulp=4)
        >>> got = {"termination": np.bool_(True), "env_state.energy": np.float32(-1e-45)}
        >>> want = {"termination": np.bool_(False), "env_state.energy": np.float32(1e-45)}
        >>> rule("termination", got, want)
        True
    """

    flag: str
    value: str
    threshold: float = 0.0
    ulp: int = 4
    atol: float = 0.0

    def __post_init__(self) -> None:
        for name in ("flag", "value"):
            text = getattr(self, name)
            if not isinstance(text, str) or not text:
                raise TypeError(f"NearThreshold: {name} must be a non-empty string, got {text!r}")
        if isinstance(self.ulp, bool) or not isinstance(self.ulp, int | np.integer):
            raise TypeError(f"NearThreshold: ulp must be a non-negative int, got {self.ulp!r}")
        if self.ulp < 0:
            raise ValueError(f"NearThreshold: ulp must be a non-negative int, got {self.ulp}")
        if not math.isfinite(float(self.threshold)):
            raise ValueError(f"NearThreshold: threshold must be finite, got {self.threshold}")
        if not math.isfinite(float(self.atol)) or self.atol < 0:
            raise ValueError(
                f"NearThreshold: atol must be a finite non-negative float, got {self.atol}"
            )

    def __call__(
        self, field: str, got: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray]
    ) -> bool:
        if field != self.flag:
            return False
        for record in (got, expected):
            if self.value not in record:
                continue
            x = np.asarray(record[self.value])
            dt = x.dtype if _is_float(x.dtype) else np.dtype(np.float64)
            if np.any(ulp_distance(x, np.full(x.shape, self.threshold), dt) <= self.ulp):
                return True
            with np.errstate(invalid="ignore"):
                if np.any(np.abs(x.astype(np.float64) - self.threshold) <= self.atol):
                    return True
        return False


@dataclass(frozen=True)
class Tolerance:
    """The comparison rule: exact for bools, ints and keys; a stated rule for floats.

    Floats compare with `FloatRule(ulp, rtol, atol)`: equal when bit-identical, when within
    `ulp` ulp (in the dtype of the value under test; the expected value is first rounded
    to that dtype), or when `|got - expected| <= atol + rtol * |expected|`. NaN matches NaN
    at the same place. `per_field` overrides the float rule for fields whose dotted path
    starts with a given prefix (the longest prefix wins), e.g.
    `{"info.cash": FloatRule(rtol=1e-6)}`. `near_threshold` holds hooks (such as
    `NearThreshold`) that may explain a differing bool field; the first that returns True
    explains it.

    Args:
        ulp: allowed distance in ulp for floats (non-negative int).
        rtol: relative tolerance for floats (non-negative).
        atol: absolute tolerance for floats (non-negative).
        per_field: mapping from a dotted field prefix to a `FloatRule`.
        near_threshold: sequence of `hook(field, got_record, expected_record) -> bool`.

    Example:
        >>> import numpy as np
        >>> from parallax.testing import Tolerance
        >>> tol = Tolerance(ulp=2)
        >>> one = np.float32(1.0)
        >>> bool(tol.close("reward", one + np.finfo(np.float32).eps, one).all())
        True
        >>> tol.describe("reward")
        'within 2 ulp'
    """

    ulp: int = 0
    rtol: float = 0.0
    atol: float = 0.0
    per_field: Mapping[str, FloatRule] = field(default_factory=dict)
    near_threshold: Sequence[FlipHook] = ()

    def __post_init__(self) -> None:
        FloatRule(self.ulp, self.rtol, self.atol)  # validates the three numbers
        if not isinstance(self.per_field, Mapping):
            raise TypeError(
                f"Tolerance: per_field must be a mapping of field prefix -> FloatRule, got "
                f"{type(self.per_field).__name__}"
            )
        for prefix, rule in self.per_field.items():
            if not isinstance(prefix, str) or not isinstance(rule, FloatRule):
                raise TypeError(
                    "Tolerance: per_field must map str prefixes to FloatRule, got "
                    f"{prefix!r}: {rule!r}"
                )
        hooks = tuple(self.near_threshold)
        for hook in hooks:
            if not callable(hook):
                raise TypeError(f"Tolerance: near_threshold hooks must be callable, got {hook!r}")
        object.__setattr__(self, "near_threshold", hooks)
        object.__setattr__(self, "per_field", dict(self.per_field))

    def rule(self, field: str) -> FloatRule:
        """The float rule that applies to the dotted field path `field`."""
        best: str | None = None
        for prefix in self.per_field:
            matches = prefix in ("", field) or field.startswith((prefix + ".", prefix + "["))
            if matches and (best is None or len(prefix) > len(best)):
                best = prefix
        if best is not None:
            return self.per_field[best]
        return FloatRule(self.ulp, self.rtol, self.atol)

    def describe(self, field: str) -> str:
        """The rule for `field` in words."""
        return self.rule(field).describe()

    def close(self, field: str, got: Any, expected: Any) -> np.ndarray:
        """Element-wise match of `got` against `expected` for the field `field`.

        Non-float values (bools, ints, key data) must be equal; floats follow `rule(field)`.
        Shapes must already agree (the callers check them first).
        """
        g = np.asarray(got)
        e = np.asarray(expected)
        if _is_float(g.dtype) or _is_float(e.dtype):
            return self.rule(field).close(g, e)
        return np.asarray(g == e)

    def explains_flip(
        self, field: str, got: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray]
    ) -> bool:
        """Whether a near-threshold hook explains a differing bool field."""
        return any(bool(hook(field, got, expected)) for hook in self.near_threshold)


EXACT = Tolerance()
"""Bit-identical comparison (the default of `check_matches_reference` and batch checks)."""

TRANSFORM_TOLERANCE = Tolerance(ulp=16, atol=1e-6)
"""Eager versus `jit`/`vmap`/`lax.scan` in `check_env`: XLA may fuse and reorder float
arithmetic under a transform, so floats may differ by 16 ulp or by 1e-6 absolute (for
values near zero); ints, bools and keys must be identical."""
