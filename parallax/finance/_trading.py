"""`TradingEnv` (`Trading-v0`): trade one asset by choosing a target position each step.

- `TradingEnv`: sekai 0.2.0's `TradingEnv` as a pure Parallax env.
- `TradingParams`: its numeric parameters (a pytree; vmappable for domain randomisation).
- `TradingState`: the env state.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PyTree

from .._core import State
from .._spaces import Box, Discrete
from ._common import ParamsMethods, check_step_inputs, resolve_params
from ._costs import CostModel
from ._env_parts import HistoryEnvParts, HistoryEnvState
from ._history import as_market_model
from ._market import MarketState, simple_return
from ._rewards import RewardFunction, as_reward
from ._validation import Bound, finite_array, finite_number

__all__ = ["TradingEnv", "TradingParams", "TradingState"]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TradingParams(ParamsMethods):
    """Numeric parameters of `TradingEnv` (every leaf float; the env casts them to its dtype).

    Frozen: change fields with `replace` (`env.params.replace(sigma=0.5)`) or set them on
    the env (`env.sigma = 0.5`, validated as the constructor does).

    Attributes:
        positions: `(k,)` target positions (fractions of equity) that actions index.
        mu, sigma, s0: GBM drift, volatility (annualised) and initial price, `()`.
        dt: step length in years, `()`.
        capital: account size in currency (read by `FixedCost`), `()`.
        cost: the cost model (its rates are leaves).
        reward: the reward function (its weights and rates are leaves).
        model: the market model simulated instead of the built-in GBM (`model=`; its
            numbers are leaves, so `vmap` over them randomises the market), or None.
    """

    positions: Any
    mu: Any
    sigma: Any
    s0: Any
    dt: Any
    capital: Any
    cost: CostModel
    reward: RewardFunction
    model: Any = None


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class TradingState(HistoryEnvState):
    """`TradingEnv`'s env state: `episode_key` and `market` (one asset), then the account.

    Attributes:
        episode_key: uint32 `(2,)`, the `parallax.rng` key of the episode.
        market: the `MarketState` of the asset.
        position: float `()`, the drifted position.
        equity: float `()`, equity relative to the start of the episode.
        reward_state: the reward function's state.
    """

    position: Float[Array, ""]
    equity: Float[Array, ""]
    reward_state: PyTree


class TradingEnv(HistoryEnvParts):
    """Trade a single asset by choosing a target position each step (sekai's `Trading-v0`).

    - Observation: float32 `(lookback + 1,)`: the last `lookback` log returns, then the
      drifted position. The position's bounds are `[0 or -inf, 1 or inf]` as sekai's.
    - Action: `Discrete(len(positions))`, an index into `positions` (out-of-range indices
      are clamped; wrap the env in `parallax.CheckedWrapper` to stop on them).
    - Dynamics (decision row `i = L + t`): `trade = w - p`, `cost = cost_model(trade)`,
      `r = P[i+1] / P[i] - 1` (computed as `expm1` of the log return, so it stays finite
      when a float32 price underflows), `growth = (1 - cost)(1 + w r)` (0 if `cost >= 1`); the
      position drifts to `w (1 + r) / (w (1 + r) + 1 - w)` (0 after a wipe-out) and equity
      becomes `max(equity * growth, 0)`.
    - Reward: `reward(outcome)`, by default the log growth. Termination: `growth <= 0`.
      Truncation: `t >= episode_length` and not terminated.
    - Info (float64 under x64, else float32): `equity`, `position`, `price`, `asset_return`,
      `cost`, `turnover`, `dt`, and `timestamp` (int32: the decision row for a history,
      the step for a simulated market).

    The constructor takes sekai's arguments with the same names, defaults and checks.
    `reset(key=..., start=row)` places the first decision at `row` (sekai's
    `options={"start": row}`). Numeric parameters are in `params` (`TradingParams`; change
    some with `env.params.replace(sigma=0.5)`);
    pass other params to `reset`/`step` (or use `with_params`) to randomise the market.

    Args:
        prices: a price history: a 1-D array (or `(T, 1)`), or a pandas Series/one-column
            DataFrame; None to simulate GBM.
        data: a one-asset `MarketData` (`parallax.finance.MarketData`, or sekai's,
            converted): its close prices are the history, its dates the `timestamps` (and
            `start=` may be a date or `Time`), its `volume`/`spread` fields feed the cost
            models that read them (`SquareRootImpact`, `SpreadCost()`), its warm-up rows
            are never traded on (samplers choose among the windows after them), and dated
            rows imply `dt`.
        model: a one-asset market model to simulate instead of GBM: a parallax model
            (`parallax.finance.Heston(...)`, ...) or a sekai simulator (converted with
            `from_sekai`). The path starts at the model's `s0`; `mu`, `sigma`, `s0` are
            then unused and `dt` defaults to the model's. A reset runs `init` and `L`
            model steps (the observation window); step `t` is one model step at path
            row `L + t`. Its parameters are `params.model` (vmappable).
        episode_length: steps per episode, int >= 1 (252).
        lookback: log returns in the observation, int >= 1 (30).
        positions: the allowed target positions, >= 2 finite numbers ((-1, 0, 1)).
        transaction_cost: a rate (`ProportionalCost`) or a cost model (1e-3).
        mu, sigma, s0: GBM drift (finite), volatility (finite >= 0) and initial price
            (finite > 0) (0.05, 0.2, 100).
        dt: step length in years, finite > 0 (default: implied by dated pandas prices, else
            1/252).
        reward: a reward function (default `LogReturn()`); sekai's are converted.
        sampler: `"random"`, `"sequential"`, an int window position, or a sampler.
        capital: account size in currency, finite > 0 (1e6).

    Example:
        >>> import jax
        >>> from parallax.finance import TradingEnv
        >>> env = TradingEnv(episode_length=5, lookback=3)
        >>> state = env.reset(key=jax.random.key(0))
        >>> state = env.step(state, 2)
        >>> state.observation.shape, int(state.step_count), bool(state.truncation)
        ((4,), 1, False)
    """

    _name = "TradingEnv"
    attribute_params = ("mu", "sigma", "s0", "dt", "capital", "transaction_cost")
    static_params: ClassVar[dict[str, str]] = {
        "episode_length": "it sizes the price windows and the compiled program",
        "lookback": "it sizes the observation",
        "positions": "their number fixes the action space (change their values with "
        "env.params.replace(positions=...))",
    }
    episode_equity_key = "equity"

    def __init__(
        self,
        prices: Any = None,
        *,
        data: Any = None,
        episode_length: Any = 252,
        lookback: Any = 30,
        positions: Any = (-1.0, 0.0, 1.0),
        transaction_cost: Any = 1e-3,
        mu: Any = 0.05,
        sigma: Any = 0.2,
        dt: Any = None,
        s0: Any = 100.0,
        model: Any = None,
        reward: Any = None,
        sampler: Any = "random",
        capital: Any = 1_000_000.0,
    ) -> None:
        episode_length, lookback = self._episode_args(prices, data, model, episode_length, lookback)
        try:
            count = len(positions)
        except TypeError:
            raise TypeError(f"positions must be a sequence of numbers, got {positions!r}") from None
        if count < 2:
            raise ValueError(f"positions needs at least two choices, got {positions!r}")
        if model is not None and getattr(model, "n_assets", 1) != 1:
            raise ValueError(f"TradingEnv needs a one-asset model, got {model.n_assets} assets")
        if model is not None:
            model = as_market_model("TradingEnv", model)
        if dt is not None:
            dt = finite_number("dt", dt, ">0")
        positions_arr = finite_array("positions", positions)
        if positions_arr.ndim != 1:
            raise ValueError(f"positions must be 1-D, got shape {positions_arr.shape}")
        inputs, fields, cost = self._cost_source(data, transaction_cost, one_asset=True)
        mu = finite_number("mu", mu)
        sigma = finite_number("sigma", sigma, ">=0")
        s0 = finite_number("s0", s0, ">0")
        reward_fn = as_reward(reward)
        capital = finite_number("capital", capital, ">0")
        history, implied_dt = self._price_history(prices, inputs, one_asset=True)
        cost.check_assets(1)
        self._use_market(
            prices, history, inputs, fields, sampler, transaction_cost, n_assets=1, correlated=False
        )
        if dt is None and model is not None:
            implied_dt = float(model.dt)
        resolved_dt = dt if dt is not None else (implied_dt if implied_dt else 1 / 252)
        self.params = TradingParams(
            positions=positions_arr,
            mu=np.float64(mu),
            sigma=np.float64(sigma),
            s0=np.float64(s0),
            dt=np.float64(resolved_dt),
            capital=np.float64(capital),
            cost=cost,
            reward=reward_fn,
            model=model,
        )
        pos_low = 0.0 if positions_arr.min() >= 0 else -np.inf
        pos_high = 1.0 if positions_arr.max() <= 1 else np.inf
        low = np.concatenate([np.full(lookback, -np.inf), [pos_low]])
        high = np.concatenate([np.full(lookback, np.inf), [pos_high]])
        self.observation_space = Box(low, high, (lookback + 1,), jnp.float32)
        self.action_space = Discrete(count)
        self._built = True

    def _set_param(self, name: str, value: Any) -> TradingParams:
        if name == "transaction_cost":
            return self._set_cost(value)  # type: ignore[no-any-return]
        bound: Bound = None if name == "mu" else (">=0" if name == "sigma" else ">0")
        return self.params.replace(**{name: np.float64(finite_number(name, value, bound))})

    @property
    def prices(self) -> np.ndarray | None:
        """The price history as float64 `(T,)`, or None when simulated."""
        return None if self.market.history is None else self.market.history[:, 0]

    # -- protocol ------------------------------------------------------------------------
    def _s0_and_chol(self, p: TradingParams, dtype: Any) -> tuple[Array, None]:
        return p.s0, None

    def _observation(self, env_state: TradingState) -> Array:
        position = env_state.position.astype(jnp.float32)
        return jnp.concatenate([env_state.market.window[:, 0], position[None]])

    def _account_info(self, env_state: TradingState) -> dict[str, Array]:
        """The `info` entries of the account: `equity` and `position`."""
        return {"equity": env_state.equity, "position": env_state.position}

    def _start(
        self, p: TradingParams, episode_key: Array, market: MarketState, dtype: Any
    ) -> tuple[TradingState, dict[str, Array]]:
        """The first env state (flat, equity 1) and `info` flows of `reset` (`HistoryEnvParts`)."""
        zero = jnp.zeros((), dtype)
        env_state = TradingState(
            episode_key=episode_key,
            market=market,
            position=zero,
            equity=jnp.ones((), dtype),
            reward_state=p.reward.init(dtype),
        )
        flows = {"price": market.price[0], "asset_return": zero, "cost": zero, "turnover": zero}
        return env_state, flows

    def step(self, state: State, action: Any, params: TradingParams | None = None) -> State:
        """Trade to `positions[action]`, then let the market move one row.

        Args:
            state: the current state.
            action: int scalar, an index into `positions`.
            params: optional `TradingParams` (default `self.params`).

        Returns:
            The next `State`.
        """
        check_step_inputs(self, action)
        dtype = state.env_state.equity.dtype
        p = resolve_params(params, self.params, dtype=dtype, barrier=False)
        es: TradingState = state.env_state
        t = state.step_count
        # clamp as documented: a negative index must not wrap around to the last position
        index = jnp.clip(jnp.asarray(action), 0, p.positions.shape[0] - 1)
        target = p.positions[index]
        trade = target - es.position
        cost = self._trade_cost(es.market, t, p, trade[None], es.equity, dtype)
        market, log_return, after = self._advance(es.market, es.episode_key, t, p, dtype)
        # P[i+1] / P[i] - 1 from the log return: finite even where a float32 price is not.
        asset_return = simple_return(log_return)[0]
        growth = jnp.where(cost >= 1.0, 0.0, (1.0 - cost) * (1.0 + target * asset_return))
        held = target * (1.0 + asset_return)
        value = held + (1.0 - target)
        alive = (growth > 0.0) & (value > 0.0)
        position = jnp.where(alive, held / jnp.where(alive, value, 1.0), 0.0)
        equity = jnp.maximum(es.equity * growth, 0.0)
        turnover = jnp.abs(trade)
        t_next = t + 1
        reward, reward_state, terminated, truncated = self._reward_and_flags(
            p, t_next, growth, equity, es.equity, turnover, cost, es.reward_state
        )
        env_state = TradingState(es.episode_key, market, position, equity, reward_state)
        flows = {
            "price": after[0],
            "asset_return": asset_return,
            "cost": cost,
            "turnover": turnover,
        }
        return self._history_state(
            env_state, p, t_next, flows, reward, terminated, truncated, state.key
        )
