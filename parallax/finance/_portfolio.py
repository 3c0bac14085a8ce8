"""`PortfolioEnv` (`Portfolio-v0`): allocate wealth across n assets and cash every step.

- `PortfolioEnv`: sekai 0.2.0's `PortfolioEnv` as a pure Parallax env.
- `PortfolioParams`: its numeric parameters (a pytree; vmappable for domain randomisation).
- `PortfolioState`: the env state.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PyTree

from .._core import State
from .._spaces import Box, PyTreeSpace
from ._common import ParamsMethods, check_step_inputs, float_dtype, resolve_params
from ._costs import CostModel
from ._costs_numerics import sum_left_to_right
from ._env_parts import HistoryEnvParts, HistoryEnvState
from ._history import as_market_model
from ._market import MarketState, correlation_default, simple_return
from ._rewards import RewardFunction, as_reward
from ._validation import check_correlation, finite_array, finite_number, int_at_least, per_asset

__all__ = ["PortfolioEnv", "PortfolioParams", "PortfolioState"]

_S0 = 100.0  # sekai simulates every asset from 100


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PortfolioParams(ParamsMethods):
    """Numeric parameters of `PortfolioEnv` (every leaf float; cast to the env's dtype).

    Frozen: change fields with `replace` or set them on the env (`env.sigma = 0.3`,
    `env.corr = matrix`, validated as the constructor does).

    Attributes:
        mu, sigma: `(n,)` GBM drifts and volatilities (annualised).
        chol: `(n, n)` lower Cholesky factor of the shocks' correlation matrix (to change the
            correlation, set `chol=numpy.linalg.cholesky(corr)`).
        dt, capital: the step length in years and the account size in currency (read by
            `FixedCost`), `()`.
        cost, reward: the cost model and the reward function (their rates and weights are
            leaves).
        model: the market model (`model=`) simulated instead of the correlated GBM, or None;
            its numbers are leaves, so `vmap` over them randomises the market.
    """

    mu: Any
    sigma: Any
    chol: Any
    dt: Any
    capital: Any
    cost: CostModel
    reward: RewardFunction
    model: Any = None


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class PortfolioState(HistoryEnvState):
    """`PortfolioEnv`'s env state (the episode's key and market, then the account).

    Attributes:
        episode_key, market: the episode's `parallax.rng` key, uint32 `(2,)`, and the
            `MarketState` of the n assets.
        weights: float `(n + 1,)`, the drifted weights, cash last.
        portfolio_value: float `()`, relative to the start of the episode.
        reward_state: the state of the reward function.
    """

    weights: Float[Array, " n1"]
    portfolio_value: Float[Array, ""]
    reward_state: PyTree


class PortfolioEnv(HistoryEnvParts):
    """Allocate wealth across several assets and cash every step (sekai's `Portfolio-v0`).

    - Observation: a dict, `"returns"`: float32 `(lookback, n)` recent log returns, and
      `"weights"`: float32 `(n + 1,)` the drifted weights, cash last (in `[0, 1]` long-only,
      unbounded with `allow_short`).
    - Action, long-only: `Box(0, 1, (n + 1,))` scores: negatives clip to 0, the rest are
      normalised to sum to 1 (all cash if their sum is below 1e-12). With `allow_short`:
      `Box(-1, 1, (n,))` target asset weights, clipped, scaled down to gross exposure 1 if
      above it; cash takes `1 - sum`. Any action is reshaped to a flat vector first.
    - Dynamics (decision row `i = L + t`): `trades = target[:n] - weights[:n]`,
      `turnover = sum|trades|`, `cost = cost_model(trades)`, `r = P[i+1] / P[i] - 1` (as
      `expm1` of the log returns: finite when a float32 price underflows),
      `growth = (1 - cost)(1 + target[:n] . r)` (0 if `cost >= 1`); weights drift to
      `target (1 + r, 1) / sum(...)` (all cash after a wipe-out), value becomes
      `max(value * growth, 0)`.
    - Reward, termination and truncation as in `TradingEnv`.
    - Info (float64 under x64): `portfolio_value`, `equity`, `weights` `(n + 1,)`,
      `turnover`, `cost`, `asset_returns` `(n,)`, `dt`, `timestamp` (int32).

    The constructor takes sekai's arguments with the same names, defaults and checks; the
    default correlation is sekai's fixed matrix. `reset(key=..., start=row)` places the first
    decision at a history row. Numeric parameters are in `params` (`PortfolioParams`; change
    some with `env.params.replace(...)`).

    Args:
        prices: a price history `(T, n)` (a 1-D array is one asset), an array or a pandas
            DataFrame; None to simulate correlated GBM.
        data: a `MarketData` (`parallax.finance.MarketData`, or sekai's, converted) with
            a complete panel: its closes are the history, its dates the `timestamps`
            (`start=` may be a date or `Time`), its `volume`/`spread` fields feed the cost
            models that read them (`SquareRootImpact`, `SpreadCost()`), its warm-up rows
            are never traded on, and dated rows imply `dt`.
        model: a market model to simulate instead of the correlated GBM: a parallax model
            (`parallax.finance.GBM(corr=...)`, `Heston`, ...) or a sekai simulator
            (converted with `from_sekai`). It fixes `n_assets` (given as well, it must
            agree) and `dt` (unless given); `mu`, `sigma`, `corr` are then unused. Its
            parameters are `params.model` (vmappable).
        n_assets: number of assets for the simulation (default 5); with `prices` it must
            agree with them or be left out.
        episode_length, lookback: ints >= 1 (252, 30).
        transaction_cost: a rate or a cost model (1e-3).
        allow_short: a bool (False).
        mu, sigma: drifts (finite) and volatilities (finite >= 0), scalars or `(n,)`
            (defaults `0.06` and `linspace(0.15, 0.35, n)`).
        corr: `(n, n)` correlation matrix (symmetric, unit diagonal, positive definite);
            default sekai's fixed matrix.
        dt: step length in years, finite > 0 (default implied by dated prices, else 1/252).
        reward: a reward function (default `LogReturn()`).
        sampler: `"random"`, `"sequential"`, an int window position, or a sampler.
        capital: account size in currency, finite > 0 (1e6).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax.finance import PortfolioEnv
        >>> env = PortfolioEnv(n_assets=3, episode_length=5, lookback=4)
        >>> state = env.reset(key=jax.random.key(0))
        >>> state = env.step(state, jnp.ones(4) / 4)
        >>> state.observation["returns"].shape, state.observation["weights"].shape
        ((4, 3), (4,))
    """

    _name = "PortfolioEnv"
    attribute_params = ("mu", "sigma", "corr", "dt", "capital", "transaction_cost")
    static_params: ClassVar[dict[str, str]] = {
        "episode_length": "it sizes the price windows and the compiled program",
        "lookback": "it sizes the observation",
        "n_assets": "it sizes the observation, the action and the market",
        "allow_short": "it fixes the action space",
    }
    episode_equity_key = "portfolio_value"
    _repr_fields = ("n_assets", "episode_length", "lookback")

    def __init__(
        self,
        prices: Any = None,
        *,
        data: Any = None,
        n_assets: Any = None,
        episode_length: Any = 252,
        lookback: Any = 30,
        transaction_cost: Any = 1e-3,
        allow_short: Any = False,
        mu: Any = None,
        sigma: Any = None,
        corr: Any = None,
        dt: Any = None,
        model: Any = None,
        reward: Any = None,
        sampler: Any = "random",
        capital: Any = 1_000_000.0,
    ) -> None:
        episode_length, lookback = self._episode_args(prices, data, model, episode_length, lookback)
        if dt is not None:
            dt = finite_number("dt", dt, ">0")
        inputs, fields, cost = self._cost_source(data, transaction_cost, one_asset=False)
        history, implied_dt = self._price_history(prices, inputs, one_asset=False)
        if model is not None:
            model = as_market_model("PortfolioEnv", model)
            if dt is None:
                implied_dt = float(model.dt)
        if history is not None or model is not None:
            implied = history.shape[1] if history is not None else model.n_assets
            what = "the price history" if history is not None else "the model"
            if n_assets is not None and n_assets != implied:
                raise ValueError(
                    f"n_assets={n_assets} but {what} has {implied} "
                    "assets; leave n_assets out to follow it"
                )
            n = implied
        else:
            n = 5 if n_assets is None else int_at_least("n_assets", n_assets, 1)
        capital = finite_number("capital", capital, ">0")
        if isinstance(allow_short, bool | np.bool_) or (
            isinstance(allow_short, int | np.integer) and allow_short in (0, 1)
        ):
            allow_short = bool(allow_short)
        else:
            raise TypeError(f"allow_short must be a bool, got {allow_short!r}")
        mu_arr = np.full(n, 0.06) if mu is None else finite_array("mu", mu)
        sigma_arr = (
            np.linspace(0.15, 0.35, n) if sigma is None else finite_array("sigma", sigma, ">=0")
        )
        corr_arr = correlation_default(n) if corr is None else corr
        if np.ndim(corr_arr) == 2 and np.shape(corr_arr)[0] != n:
            raise ValueError(
                f"corr implies {np.shape(corr_arr)[0]} assets but n_assets implies {n}"
            )
        mu_arr = per_asset("mu", mu_arr, n)
        sigma_arr = per_asset("sigma", sigma_arr, n)
        corr_arr, chol = check_correlation(corr_arr, n)
        reward_fn = as_reward(reward)
        cost.check_assets(n)
        self._use_market(
            prices, history, inputs, fields, sampler, transaction_cost, n_assets=n, correlated=True
        )
        self.n_assets = n
        self.allow_short = allow_short
        self.corr = corr_arr
        resolved_dt = dt if dt is not None else (implied_dt if implied_dt else 1 / 252)
        self.params = PortfolioParams(
            mu=mu_arr,
            sigma=sigma_arr,
            chol=chol,
            dt=np.float64(resolved_dt),
            capital=np.float64(capital),
            cost=cost,
            reward=reward_fn,
            model=model,
        )
        w_low, w_high = (-np.inf, np.inf) if allow_short else (0.0, 1.0)
        self.observation_space = PyTreeSpace(
            {
                "returns": Box(-np.inf, np.inf, (lookback, n), jnp.float32),
                "weights": Box(w_low, w_high, (n + 1,), jnp.float32),
            }
        )
        if allow_short:
            self.action_space = Box(-1.0, 1.0, (n,), jnp.float32)
        else:
            self.action_space = Box(0.0, 1.0, (n + 1,), jnp.float32)
        self._built = True

    def _set_param(self, name: str, value: Any) -> PortfolioParams:
        n = self.n_assets
        if name == "transaction_cost":
            return self._set_cost(value)  # type: ignore[no-any-return]
        if name == "corr":
            corr, chol = check_correlation(value, n)
            object.__setattr__(self, "corr", corr)
            return self.params.replace(chol=chol)
        if name in ("mu", "sigma"):
            arr = finite_array(name, value, ">=0" if name == "sigma" else None)
            return self.params.replace(**{name: per_asset(name, arr, n)})
        return self.params.replace(**{name: np.float64(finite_number(name, value, ">0"))})

    @property
    def prices(self) -> np.ndarray | None:
        """The price history as float64 `(T, n)`, or None when simulated."""
        return self.market.history

    # -- dynamics ------------------------------------------------------------------------
    def _cash_only(self, dtype: Any) -> Array:
        return jnp.zeros((self.n_assets + 1,), dtype).at[-1].set(1.0)

    def action_to_weights(self, action: Any, dtype: Any = None) -> Array:
        """Map an action to target weights over (assets..., cash), as sekai does.

        Args:
            action: any array with `n + 1` (long-only) or `n` (`allow_short`) elements.
            dtype: the float dtype (default: the env's current one).

        Returns:
            float `(n + 1,)` target weights summing to 1.
        """
        dtype = float_dtype() if dtype is None else dtype
        a = jnp.reshape(jnp.asarray(action), (-1,)).astype(dtype)
        expected = self.action_space.shape[0]
        if a.shape[0] != expected:
            raise ValueError(
                f"PortfolioEnv: the action must have {expected} elements, got {a.shape[0]}"
            )
        if self.allow_short:
            a = jnp.clip(a, -1.0, 1.0)
            gross = sum_left_to_right(jnp.abs(a))
            over = gross > 1.0
            a = jnp.where(over, a / jnp.where(over, gross, 1.0), a)
            return jnp.concatenate([a, (1.0 - sum_left_to_right(a))[None]])
        a = jnp.maximum(a, 0.0)
        total = sum_left_to_right(a)
        small = total < 1e-12
        return jnp.where(small, self._cash_only(dtype), a / jnp.where(small, 1.0, total))

    def _s0_and_chol(self, p: PortfolioParams, dtype: Any) -> tuple[Array, Array]:
        return jnp.asarray(_S0, dtype), p.chol

    def _observation(self, env_state: PortfolioState) -> dict[str, Array]:
        return {
            "returns": env_state.market.window,
            "weights": env_state.weights.astype(jnp.float32),
        }

    def _account_info(self, env_state: PortfolioState) -> dict[str, Array]:
        """The `info` entries of the account: `portfolio_value` (also as `equity`), `weights`."""
        value = env_state.portfolio_value
        return {"portfolio_value": value, "equity": value, "weights": env_state.weights}

    def _start(
        self, p: PortfolioParams, episode_key: Array, market: MarketState, dtype: Any
    ) -> tuple[PortfolioState, dict[str, Array]]:
        """The first env state (all cash, value 1) and `info` flows of `reset`."""
        env_state = PortfolioState(
            episode_key=episode_key,
            market=market,
            weights=self._cash_only(dtype),
            portfolio_value=jnp.ones((), dtype),
            reward_state=p.reward.init(dtype),
        )
        zero = jnp.zeros((), dtype)
        flows = {
            "turnover": zero,
            "cost": zero,
            "asset_returns": jnp.zeros((self.n_assets,), dtype),
        }
        return env_state, flows

    def step(self, state: State, action: Any, params: PortfolioParams | None = None) -> State:
        """Rebalance to the action's target weights, then let the market move one row.

        Args:
            state: the current state.
            action: float array with `n + 1` (long-only) or `n` (`allow_short`) elements.
            params: optional `PortfolioParams` (default `self.params`).

        Returns:
            The next `State`.
        """
        check_step_inputs(self, action, any_shape=True)
        es: PortfolioState = state.env_state
        dtype = es.portfolio_value.dtype
        p = resolve_params(params, self.params, dtype=dtype, barrier=False)
        n = self.n_assets
        t = state.step_count
        target = self.action_to_weights(action, dtype)
        trades = target[:n] - es.weights[:n]
        turnover = sum_left_to_right(jnp.abs(trades))
        cost = self._trade_cost(es.market, t, p, trades, es.portfolio_value, dtype)
        market, log_returns, _ = self._advance(es.market, es.episode_key, t, p, dtype)
        # P[i+1] / P[i] - 1 from the log returns: finite even where a float32 price is not.
        asset_returns = simple_return(log_returns)
        gross = sum_left_to_right(target[:n] * asset_returns)
        growth = jnp.where(cost >= 1.0, 0.0, (1.0 - cost) * (1.0 + gross))
        drifted = target * jnp.concatenate([1.0 + asset_returns, jnp.ones((1,), dtype)])
        total = sum_left_to_right(drifted)
        # total > 0 too: in float32 a -100% move (expm1 = -1) can leave every drifted
        # weight 0 while rounding keeps growth a hair above 0 (weights 0/0 otherwise).
        alive = (growth > 0.0) & (total > 0.0)
        weights = jnp.where(alive, drifted / jnp.where(alive, total, 1.0), self._cash_only(dtype))
        value = jnp.maximum(es.portfolio_value * growth, 0.0)
        t_next = t + 1
        reward, reward_state, terminated, truncated = self._reward_and_flags(
            p, t_next, growth, value, es.portfolio_value, turnover, cost, es.reward_state
        )
        env_state = PortfolioState(es.episode_key, market, weights, value, reward_state)
        flows = {"turnover": turnover, "cost": cost, "asset_returns": asset_returns}
        return self._history_state(
            env_state, p, t_next, flows, reward, terminated, truncated, state.key
        )
