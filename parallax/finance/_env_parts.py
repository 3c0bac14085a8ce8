"""The construction, parameter and `State` plumbing the four finance envs share (not their steps).

- `HistoryEnvParts`: the base of `TradingEnv` and `PortfolioEnv` (on top of `HistoryEnv`):
  the constructor's checks and loads of the episode shape, the price source, the cost model
  and the sampler; the cost parameter; the shape properties; the market calls of
  `reset`/`step`; the trade cost; a step's reward, termination and truncation (the rule
  both envs document); `reset`; the `State` builder; and `repr`.
- `HistoryEnvState`: the fields that open both envs' states (the episode key, the market).
- `SessionEnv`: the base of `MarketMakingEnv` and `OptimalExecutionEnv` (fixed-horizon
  sessions of `n_steps` steps of length `total_time / n_steps`): bounded params, the period,
  the time-left observation, the scaffolding of `reset`/`step` and the `State` builder.

Each env keeps its own dynamics in its `step`; what lives here is the same code for both
envs of a family, so a change to it changes both.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, UInt32

from .. import rng
from .._core import KeyArray, State
from ._common import (
    FinanceEnv,
    check_reset_key,
    check_step_inputs,
    divide,
    float_dtype,
    resolve_params,
)
from ._costs_convert import as_cost_model
from ._data_inputs import market_inputs
from ._history import HistoryEnv, check_sources
from ._market import Market, MarketState, load_prices
from ._plots import EpisodeRender
from ._rewards import outcome_from_growth
from ._samplers import as_sampler
from ._validation import Bound, finite_number, int_at_least

__all__ = ["HistoryEnvParts", "HistoryEnvState", "SessionEnv"]


# -- the price-history envs (TradingEnv, PortfolioEnv) ------------------------------------------
def _timestamps(prices: Any, history: np.ndarray | None) -> np.ndarray | None:
    """Host timestamps of the history rows: the dates of dated pandas input, else row numbers."""
    if history is None:
        return None
    index = getattr(prices, "index", None)
    if index is not None and type(index).__name__ == "DatetimeIndex":
        return np.asarray(index.values, dtype="datetime64[ns]")
    return np.arange(history.shape[0])


@dataclasses.dataclass
class HistoryEnvState:
    """The fields that open `TradingState` and `PortfolioState` (each adds its account and
    `reward_state` after them).

    Attributes:
        episode_key: uint32 `(2,)`, the `parallax.rng` key of the episode.
        market: the `MarketState`.
    """

    episode_key: UInt32[Array, "2"]
    market: MarketState


class HistoryEnvParts(HistoryEnv):
    """What `TradingEnv` and `PortfolioEnv` share beyond `HistoryEnv` (see those envs).

    Subclasses implement `_s0_and_chol(p, dtype)`: the GBM start price and Cholesky factor
    (None: uncorrelated) handed to the market with the params' `mu`, `sigma`, `dt`, `model`;
    `_start(p, episode_key, market, dtype)`: the first env state and `info` flows of `reset`;
    `_observation(env_state)`: the observation of an env state; and `_account_info(env_state)`:
    the `info` entries read off an env state (the account), which precede the step's flows.
    Both render `repr` as `Name(source, field=value, ...)` of `_repr_fields`.
    """

    _repr_fields: ClassVar[tuple[str, ...]] = ("episode_length", "lookback")

    transaction_cost: Any
    _cost_fields: dict[str, Any]

    # -- construction ------------------------------------------------------------------------
    def _episode_args(
        self, prices: Any, data: Any, model: Any, episode_length: Any, lookback: Any
    ) -> tuple[int, int]:
        """`(episode_length, lookback)` as ints `>= 1` (stored), after sekai's checks of the
        price sources (`check_sources`)."""
        check_sources(self._name, prices=prices, data=data, model=model)
        self._episode_length = int_at_least("episode_length", episode_length, 1)
        self._lookback = int_at_least("lookback", lookback, 1)
        return self._episode_length, self._lookback

    def _cost_source(
        self, data: Any, transaction_cost: Any, *, one_asset: bool
    ) -> tuple[Any, dict[str, Any], Any]:
        """`(inputs, fields, cost)`: `data=`'s `MarketInputs` (None without data), the data
        fields the cost models read (`as_cost_model` keywords), the `transaction_cost` model."""
        lookback = self._lookback
        inputs = (
            None
            if data is None
            else market_inputs(
                data, lookback=lookback, episode_length=self._episode_length, one_asset=one_asset
            )
        )
        fields: dict[str, Any] = (
            {} if inputs is None else {"fields": inputs.fields, "lookback": lookback}
        )
        return inputs, fields, as_cost_model(transaction_cost, **fields)

    def _price_history(
        self, prices: Any, inputs: Any, *, one_asset: bool
    ) -> tuple[np.ndarray | None, float | None]:
        """`(history, implied_dt)`: float64 `(T, n)` prices of `prices=` or `data=` (None when
        simulated) and the step length their dates imply (None if undated)."""
        window = self._lookback + self._episode_length + 1
        ndim = 1 if one_asset else 2
        history, implied_dt = (
            (None, None) if prices is None else load_prices(prices, ndim=ndim, min_rows=window)
        )
        if inputs is not None:
            closes = inputs.prices[:, None] if one_asset else np.asarray(inputs.prices, np.float64)
            history, implied_dt = closes, inputs.dt
        return history, implied_dt

    def _use_market(
        self,
        prices: Any,
        history: np.ndarray | None,
        inputs: Any,
        fields: dict[str, Any],
        sampler: Any,
        transaction_cost: Any,
        *,
        n_assets: int,
        correlated: bool,
    ) -> None:
        """Store the market (of `history`, or simulated) with its data and timestamps, the
        sampler (checked against the history), `transaction_cost` and the cost fields."""
        self.sampler = as_sampler(sampler)
        self.transaction_cost = transaction_cost
        self.market = Market(
            lookback=self._lookback,
            episode_length=self._episode_length,
            n_assets=n_assets,
            history=history,
            correlated=correlated,
        )
        self.inputs = inputs
        self._cost_fields = fields
        if inputs is not None:
            self.market.use_data(inputs)
        self.timestamps = (
            _timestamps(prices, history) if inputs is None else np.asarray(inputs.timestamps)
        )
        self._check_sampler()

    def _set_cost(self, value: Any) -> Any:
        """The params with the cost model of `transaction_cost=value` (as the constructor)."""
        cost = as_cost_model(value, **self._cost_fields)
        cost.check_assets(self.market.n_assets)
        object.__setattr__(self, "transaction_cost", value)
        return self.params.replace(cost=cost)

    # -- read-only shape parameters ------------------------------------------------------------
    @property
    def episode_length(self) -> int:
        """Steps per episode (fixed: it sizes the windows)."""
        return self._episode_length

    @property
    def lookback(self) -> int:
        """Rows of log returns in the observation (fixed: it sizes the observation)."""
        return self._lookback

    # -- reset / step plumbing -----------------------------------------------------------------
    def _s0_and_chol(self, p: Any, dtype: Any) -> tuple[Array, Array | None]:
        raise NotImplementedError  # pragma: no cover - both subclasses implement it

    def _market_args(self, p: Any, dtype: Any) -> dict[str, Any]:
        """The params' market keywords of `Market.reset` and `Market.advance`."""
        s0, chol = self._s0_and_chol(p, dtype)
        return {"mu": p.mu, "sigma": p.sigma, "s0": s0, "dt": p.dt, "chol": chol, "model": p.model}

    def reset(
        self,
        *,
        key: KeyArray,
        start: Any = None,
        params: Any = None,
        previous: State | None = None,
    ) -> State:
        """Start an episode: `TradingEnv` flat with equity 1, `PortfolioEnv` all cash with
        value 1; reward 0, flags False, `step_count` 0.

        Args:
            key: a PRNG key (typed or raw).
            start: optional first-decision row of a history (sekai's
                `options={"start": row}`); an int (negative counts from the end), a
                timestamp, or a traced int32 scalar.
            params: optional params of the env's class (default `self.params`).
            previous: optional state of the episode that just ended; a sequential sampler
                starts the window after its window (`reset_uses_previous`; the auto-reset
                wrappers pass it). Ignored by the other samplers and when `start` is given.

        Returns:
            The first `State`.
        """
        check_reset_key(self, key)
        dtype = float_dtype()
        p = resolve_params(params, self.params, dtype=dtype, barrier=False)
        ek = rng.episode_key(key)
        window_start = self._window_start(ek, start, previous)
        market = self.market.reset(ek, window_start, dtype=dtype, **self._market_args(p, dtype))
        env_state, flows = self._start(p, ek, market, dtype)
        no = jnp.bool_(False)
        zero = jnp.zeros((), dtype)
        return self._history_state(env_state, p, jnp.zeros((), jnp.int32), flows, zero, no, no, key)

    def _start(
        self, p: Any, episode_key: Array, market: MarketState, dtype: Any
    ) -> tuple[Any, dict[str, Array]]:
        raise NotImplementedError  # pragma: no cover - both subclasses implement it

    def _trade_cost(
        self, market: MarketState, t: Array, p: Any, trades: Array, equity: Array, dtype: Any
    ) -> Array:
        """The cost model's cost (a fraction of equity) of `trades` at decision `t`."""
        data_inputs = self.market.cost_inputs(market, t, p.cost.requires, dtype)
        return p.cost(trades, equity=p.capital * equity, **data_inputs)  # type: ignore[no-any-return]

    def _advance(
        self, market: MarketState, episode_key: Array, t: Array, p: Any, dtype: Any
    ) -> tuple[MarketState, Array, Array]:
        """`Market.advance` by one row: `(market, log_returns (n,), prices after (n,))`."""
        return self.market.advance(market, episode_key, t, **self._market_args(p, dtype))  # type: ignore[no-any-return]

    def _timestamp(self, market: MarketState, t: Array) -> Array:
        """int32 `info["timestamp"]`: the decision row of a history, else the step."""
        if self.market.simulated:
            return t.astype(jnp.int32)
        return (market.start + self.lookback + t).astype(jnp.int32)

    def _observation(self, env_state: Any) -> Any:
        raise NotImplementedError  # pragma: no cover - both subclasses implement it

    def _account_info(self, env_state: Any) -> dict[str, Array]:
        raise NotImplementedError  # pragma: no cover - both subclasses implement it

    def _reward_and_flags(
        self,
        p: Any,
        t_next: Array,
        growth: Array,
        equity: Array,
        previous_equity: Array,
        turnover: Array,
        cost: Array,
        reward_state: Any,
    ) -> tuple[Array, Any, Array, Array]:
        """`(reward, reward_state, terminated, truncated)` of the step to `t_next`: the reward
        function's value of the step's outcome (`outcome_from_growth`), termination on a
        wipe-out (`growth <= 0`), else truncation after `episode_length` steps."""
        terminated = growth <= 0.0
        truncated = ~terminated & (t_next >= self.episode_length)
        outcome = outcome_from_growth(
            growth, equity=equity, turnover=turnover, cost=cost, previous_equity=previous_equity
        )
        reward, reward_state = p.reward(outcome, reward_state)
        return reward, reward_state, terminated, truncated

    def _history_state(
        self,
        env_state: Any,
        p: Any,
        t: Array,
        flows: dict[str, Array],
        reward: Array,
        terminated: Array,
        truncated: Array,
        key: KeyArray,
    ) -> State:
        """The `State` after `t` steps: it observes `_observation(env_state)`; its `info` is
        `_account_info(env_state)`, then the step's `flows`, then `timestamp` and `dt`."""
        return State(
            env_state=env_state,
            observation=self._observation(env_state),
            reward=reward,
            termination=terminated,
            truncation=truncated,
            info={
                **self._account_info(env_state),
                **flows,
                "timestamp": self._timestamp(env_state.market, t),
                "dt": p.dt,
            },
            step_count=t,
            key=key,
        )

    def __repr__(self) -> str:
        """`Name(source, field=value, ...)`: the price source, then the `_repr_fields`."""
        fields = "".join(f", {name}={getattr(self, name)}" for name in self._repr_fields)
        return f"{self._name}({self._source()}{fields})"

    def _source(self) -> str:
        """The price source for `repr`: `GBM`, the model's class name, or `prices[T]`."""
        if not self.market.simulated:
            return f"prices[{self.market.n_rows}]"
        model = self.params.model
        return "GBM" if model is None else type(model).__name__


# -- the session envs (MarketMakingEnv, OptimalExecutionEnv) -------------------------------------
class SessionEnv(FinanceEnv, EpisodeRender):
    """What `MarketMakingEnv` and `OptimalExecutionEnv` share (see those envs).

    A session of `n_steps` steps of length `total_time / n_steps`, whose numeric parameters
    (the params dataclass's fields) are finite numbers within `_bounds` (checked by the
    constructor and by `env.name = value`). Subclasses set `_bounds` and `n_steps`.
    """

    n_steps: int
    _bounds: ClassVar[dict[str, Bound]] = {}
    """The bound of each numeric parameter (`finite_number`'s `bound`)."""

    def _checked(self, cls: Any, given: dict[str, Any]) -> Any:
        """`cls(**given)` after checking each value against its bound."""
        return cls(
            **{name: finite_number(name, v, self._bounds[name]) for name, v in given.items()}
        )

    def _set_param(self, name: str, value: Any) -> Any:
        return self.params.replace(**{name: finite_number(name, value, self._bounds[name])})

    def _params(self, params: Any) -> Any:
        """The params of a call (`self.params` when None) as opaque arrays of the float dtype."""
        return resolve_params(params, self.params)

    def _reset_params(self, key: KeyArray, params: Any) -> tuple[Any, Array]:
        """`(p, episode_key)` of a reset, after checking `key`."""
        check_reset_key(self, key)
        return self._params(params), rng.episode_key(key)

    def _step_action(self, action: Any, params: Any, high: Any) -> tuple[Any, Array]:
        """`(p, action)` of a step: the params and the action clipped to `[0, high]` in their
        float dtype (after the trace-time action check)."""
        check_step_inputs(self, action, any_shape=True)
        p = self._params(params)
        return p, jnp.clip(self._action(action).astype(p.s0.dtype), 0.0, high)

    def _action(self, action: Any) -> Array:
        raise NotImplementedError  # pragma: no cover - both subclasses implement it

    def _period(self, p: Any) -> Array:
        """The step length `total_time / n_steps` (a true division)."""
        return divide(p.total_time, self.n_steps)

    def _time_left(self, k: Array, dtype: Any) -> Array:
        """The fraction of the session left after `k` steps, `(n_steps - k) / n_steps`."""
        return divide(jnp.maximum(self.n_steps - k, 0).astype(dtype), self.n_steps)

    def _session_state(
        self,
        env_state: Any,
        k: Array,
        p: Any,
        observation: Array,
        info: dict[str, Array],
        reward: Array,
        terminated: Array,
        key: KeyArray,
    ) -> State:
        """The `State` after `k` steps (never truncated): `observation` is cast to float32;
        `info` gains `timestamp` (`k` times the period) and `dt` (the period); `reward` takes
        the float dtype."""
        fdt = p.s0.dtype
        period = self._period(p)
        return State(
            env_state=env_state,
            observation=observation.astype(jnp.float32),
            reward=jnp.asarray(reward, fdt),
            termination=jnp.asarray(terminated),
            truncation=jnp.bool_(False),
            info={**info, "timestamp": k.astype(fdt) * period, "dt": period},
            step_count=k,
            key=key,
        )
