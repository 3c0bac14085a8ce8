"""Reward functions for the finance envs, as small pytrees with pure `__call__`.

- `StepOutcome` and `outcome_from_growth`: what happened to the account over one step.
- `RewardFunction`: the base class. `reward(outcome, state) -> (value, state)`; `init(dtype)`
  gives the reward state at the start of an episode (the env keeps it in its state and
  re-initialises it on reset). Rewards combine with `+`, `-`, scalar `*` and unary `-` into
  a linear combination, evaluated as `0.0 + sum(weight * term)` in order, as sekai does.
- `LogReturn` (the default), `SimpleReturn`, `ProfitAndLoss`, `MeanVariance(risk_aversion)`,
  `TurnoverPenalty`, `DrawdownPenalty` (state: peak, drawdown), `DifferentialSharpe(eta)`
  (state: the moving moments A, B): sekai 0.2.0's rewards, with the same formulas.
- `as_reward(x)`: ours as is, `None` as `LogReturn()`, sekai's reward objects converted.

A reward is an `equinox.Module`: its numbers (weights, `risk_aversion`, `eta`) are leaves, so
it can sit in an env's params pytree and be vmapped; its structure is static.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

__all__ = [
    "DifferentialSharpe",
    "DrawdownPenalty",
    "LogReturn",
    "MeanVariance",
    "ProfitAndLoss",
    "RewardFunction",
    "SimpleReturn",
    "StepOutcome",
    "TurnoverPenalty",
    "as_reward",
    "outcome_from_growth",
]

_GROWTH_FLOOR = 1e-12
_VARIANCE_FLOOR = 1e-12


class StepOutcome(NamedTuple):
    """What happened to the account over one step (all float scalars of the env's dtype).

    Attributes:
        log_return: `log(max(growth, 1e-12))`, net of costs.
        simple_return: `max(growth, 1e-12) - 1`.
        equity: equity after the step, relative to the start of the episode.
        turnover: the sum of absolute weight changes traded.
        cost: the trading cost as a fraction of equity.
        pnl: equity after minus equity before the step.
    """

    log_return: Array
    simple_return: Array
    equity: Array
    turnover: Array
    cost: Array
    pnl: Array


def outcome_from_growth(
    growth: Array, *, equity: Array, turnover: Array, cost: Array, previous_equity: Array
) -> StepOutcome:
    """Build a `StepOutcome` from the step's equity multiplier (floored at 1e-12).

    Args:
        growth: the equity multiplier of the step (0 or below on a wipe-out), float `()`.
        equity: equity after the step; turnover, cost, previous_equity: float `()`.

    Returns:
        The `StepOutcome`; a wipe-out gives `log_return = log(1e-12) = -27.631...`.

    Example:
        >>> import jax.numpy as jnp
        >>> o = outcome_from_growth(jnp.float32(0.0), equity=jnp.float32(0.0),
        ...     turnover=jnp.float32(1.0), cost=jnp.float32(0.0),
        ...     previous_equity=jnp.float32(1.0))
        >>> round(float(o.log_return), 3), float(o.pnl)
        (-27.631, -1.0)
    """
    g = jnp.maximum(growth, _GROWTH_FLOOR)
    return StepOutcome(
        log_return=jnp.log(g),
        simple_return=g - 1.0,
        equity=equity,
        turnover=turnover,
        cost=cost,
        pnl=equity - previous_equity,
    )


def _scalar(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _as(x: Any, like: Array) -> Array:
    return jnp.asarray(x, dtype=like.dtype)


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float | np.integer | np.floating)


class RewardFunction(eqx.Module):
    """Maps a `StepOutcome` (and the reward state) to a reward; combine with `+ - *`.

    Subclasses implement `__call__(outcome, state) -> (reward, new_state)` and, when they
    keep state, `init(dtype)`.
    """

    def init(self, dtype: Any) -> PyTree:
        """The reward state at the start of an episode (an empty tuple when stateless)."""
        return ()

    def __call__(self, outcome: StepOutcome, state: PyTree) -> tuple[Array, PyTree]:
        raise NotImplementedError

    def __add__(self, other: Any) -> RewardFunction:
        return Combination([(1.0, self), (1.0, _as_term(other))])

    def __radd__(self, other: Any) -> RewardFunction:
        return Combination([(1.0, _as_term(other)), (1.0, self)])

    def __sub__(self, other: Any) -> RewardFunction:
        return Combination([(1.0, self), (-1.0, _as_term(other))])

    def __rsub__(self, other: Any) -> RewardFunction:
        return Combination([(1.0, _as_term(other)), (-1.0, self)])

    def __mul__(self, scale: Any) -> RewardFunction:
        if not _is_number(scale):
            return NotImplemented
        return Combination([(float(scale), self)])

    __rmul__ = __mul__

    def __neg__(self) -> RewardFunction:
        return Combination([(-1.0, self)])


class Constant(RewardFunction):
    """A constant reward (what a number becomes in a combination)."""

    value: Any

    def __init__(self, value: Any) -> None:
        self.value = _scalar(value)

    def __call__(self, outcome: StepOutcome, state: PyTree) -> tuple[Array, PyTree]:
        like = outcome.log_return
        return jnp.zeros_like(like) + _as(self.value, like), state

    def __repr__(self) -> str:
        return repr(float(self.value))


def _as_term(x: Any) -> RewardFunction:
    if isinstance(x, RewardFunction):
        return x
    if _is_number(x):
        return Constant(float(x))
    raise TypeError(f"cannot combine a reward function with {x!r}")


class Combination(RewardFunction):
    """A linear combination `sum(weight_i * term_i)` of rewards (build it with `+ - *`).

    Args:
        terms: `(weight, reward)` pairs; nested combinations are flattened.

    Example:
        >>> reward = LogReturn() - 0.5 * DrawdownPenalty()
        >>> reward
        LogReturn() - 0.5 * DrawdownPenalty()
    """

    weights: tuple[Any, ...]
    terms: tuple[RewardFunction, ...]

    def __init__(self, terms: Sequence[tuple[Any, RewardFunction]]) -> None:
        flat: list[tuple[float, RewardFunction]] = []
        for weight, fn in terms:
            if isinstance(fn, Combination):
                flat.extend((float(weight) * float(w), f) for w, f in zip(fn.weights, fn.terms))
            else:
                flat.append((float(weight), fn))
        self.weights = tuple(_scalar(w) for w, _ in flat)
        self.terms = tuple(f for _, f in flat)

    def init(self, dtype: Any) -> PyTree:
        """One state per term, in order."""
        return tuple(term.init(dtype) for term in self.terms)

    def __call__(self, outcome: StepOutcome, state: PyTree) -> tuple[Array, PyTree]:
        like = outcome.log_return
        total = jnp.zeros_like(like)
        new_states = []
        for weight, term, sub in zip(self.weights, self.terms, state):
            value, sub = term(outcome, sub)
            total = total + _as(weight, like) * value
            new_states.append(sub)
        return total, tuple(new_states)

    def __repr__(self) -> str:
        out = ""
        for i, (weight, fn) in enumerate(zip(self.weights, self.terms)):
            w = float(weight)
            size = abs(w)
            term = repr(fn) if size == 1.0 else f"{size:g} * {fn!r}"
            if i == 0:
                out += f"-{term}" if w < 0 else term
            else:
                out += f" {'-' if w < 0 else '+'} {term}"
        return out


class _OutcomeField(RewardFunction):
    """A stateless reward that is one field of the `StepOutcome`, the one named `_field`."""

    _field: ClassVar[str]

    def __call__(self, outcome: StepOutcome, state: PyTree) -> tuple[Array, PyTree]:
        return getattr(outcome, self._field), state

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class LogReturn(_OutcomeField):
    """Log growth of equity; summed over an episode, `log(final / initial equity)`.

    Example:
        >>> LogReturn()
        LogReturn()
    """

    _field = "log_return"


class SimpleReturn(_OutcomeField):
    """The step's percentage return, `max(growth, 1e-12) - 1`.

    Example:
        >>> SimpleReturn()
        SimpleReturn()
    """

    _field = "simple_return"


class ProfitAndLoss(_OutcomeField):
    """Change in equity over the step, in units of the initial equity (exact on a wipe-out).

    Example:
        >>> ProfitAndLoss()
        ProfitAndLoss()
    """

    _field = "pnl"


class MeanVariance(RewardFunction):
    """`r - (risk_aversion / 2) r^2` on the log return: a per-step mean-variance utility.

    Args:
        risk_aversion: a number >= 0 (default 1.0).

    Example:
        >>> MeanVariance(2.0)
        MeanVariance(2)
    """

    risk_aversion: Any

    def __init__(self, risk_aversion: Any = 1.0) -> None:
        if not _is_number(risk_aversion) or not np.isfinite(risk_aversion):
            raise ValueError(f"risk_aversion must be a finite number >= 0, got {risk_aversion!r}")
        if risk_aversion < 0:
            raise ValueError(f"risk_aversion must be non-negative, got {risk_aversion!r}")
        self.risk_aversion = _scalar(risk_aversion)

    def __call__(self, outcome: StepOutcome, state: PyTree) -> tuple[Array, PyTree]:
        r = outcome.log_return
        # numpy's order: ((0.5 * ra) * r) * r
        return r - 0.5 * _as(self.risk_aversion, r) * r * r, state

    def __repr__(self) -> str:
        return f"MeanVariance({float(self.risk_aversion):g})"


class TurnoverPenalty(_OutcomeField):
    """The step's turnover; subtract it to discourage trading beyond explicit costs.

    Example:
        >>> LogReturn() - 1e-3 * TurnoverPenalty()
        LogReturn() - 0.001 * TurnoverPenalty()
    """

    _field = "turnover"


class DrawdownPenalty(RewardFunction):
    """How much the drawdown `1 - equity / running_peak` deepened this step (>= 0).

    State: `(peak, drawdown)`, `(1, 0)` at the start of an episode.

    Example:
        >>> import jax.numpy as jnp
        >>> DrawdownPenalty().init(jnp.float32)
        (Array(1., dtype=float32), Array(0., dtype=float32))
    """

    def init(self, dtype: Any) -> PyTree:
        """Peak 1, drawdown 0."""
        return (jnp.ones((), dtype), jnp.zeros((), dtype))

    def __call__(self, outcome: StepOutcome, state: PyTree) -> tuple[Array, PyTree]:
        equity = outcome.equity
        peak_before, drawdown_before = state
        peak = jnp.maximum(peak_before, equity)
        positive = peak > 0
        drawdown = jnp.where(positive, 1.0 - equity / jnp.where(positive, peak, 1.0), 1.0)
        penalty = jnp.maximum(drawdown - drawdown_before, 0.0)
        return penalty, (peak, drawdown)

    def __repr__(self) -> str:
        return "DrawdownPenalty()"


class DifferentialSharpe(RewardFunction):
    """The differential Sharpe ratio of Moody and Saffell (2001) on the simple return.

    `D = (B dA - A dB / 2) / (B - A^2)^1.5` with `dA = R - A`, `dB = R^2 - B`; 0 until the
    variance estimate exceeds 1e-12; then `A += eta dA`, `B += eta dB`. State: `(A, B)`,
    `(0, 0)` at the start of an episode.

    Args:
        eta: adaptation rate, in (0, 1) (default 0.01).

    Example:
        >>> DifferentialSharpe(eta=0.05)
        DifferentialSharpe(eta=0.05)
    """

    eta: Any

    def __init__(self, eta: Any = 0.01) -> None:
        if not _is_number(eta) or not 0.0 < eta < 1.0:
            raise ValueError(f"eta must be in (0, 1), got {eta!r}")
        self.eta = _scalar(eta)

    def init(self, dtype: Any) -> PyTree:
        """A = B = 0."""
        return (jnp.zeros((), dtype), jnp.zeros((), dtype))

    def __call__(self, outcome: StepOutcome, state: PyTree) -> tuple[Array, PyTree]:
        r = outcome.simple_return
        a, b = state
        d_a = r - a
        d_b = r * r - b
        var = b - a * a
        v = jnp.maximum(var, _VARIANCE_FLOOR)
        ratio = (b * d_a - 0.5 * a * d_b) / (v * jnp.sqrt(v))
        d = jnp.where(var > _VARIANCE_FLOOR, ratio, jnp.zeros_like(ratio))
        eta = _as(self.eta, r)
        return d, (a + eta * d_a, b + eta * d_b)

    def __repr__(self) -> str:
        return f"DifferentialSharpe(eta={float(self.eta):g})"


_SEKAI_SIMPLE = {
    "LogReturn": LogReturn,
    "SimpleReturn": SimpleReturn,
    "ProfitAndLoss": ProfitAndLoss,
    "TurnoverPenalty": TurnoverPenalty,
    "DrawdownPenalty": DrawdownPenalty,
}


def _from_sekai(reward: Any) -> RewardFunction:
    name = type(reward).__name__
    if name in _SEKAI_SIMPLE:
        return _SEKAI_SIMPLE[name]()
    if name == "MeanVariance":
        return MeanVariance(reward.risk_aversion)
    if name == "DifferentialSharpe":
        return DifferentialSharpe(reward.eta)
    if name == "_Constant":
        return Constant(reward.value)
    if name == "_Combination":
        return Combination([(w, _from_sekai(f)) for w, f in reward.terms])
    raise TypeError(f"unsupported sekai reward function {reward!r}")


def as_reward(reward: Any, name: str = "reward") -> RewardFunction:
    """A reward function from ours, a sekai one (converted), or `None` (`LogReturn()`).

    Args:
        reward: a `RewardFunction`, a `sekai.finance` reward, or None.
        name: the parameter name used in error messages.

    Returns:
        A `RewardFunction`.

    Raises:
        TypeError: anything else.

    Example:
        >>> as_reward(None)
        LogReturn()
    """
    if reward is None:
        return LogReturn()
    if isinstance(reward, RewardFunction):
        return reward
    if type(reward).__module__.startswith("sekai."):
        return _from_sekai(reward)
    raise TypeError(f"{name} must be a RewardFunction (or None for LogReturn()), got {reward!r}")
