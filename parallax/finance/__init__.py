"""Finance environments in JAX, compatible with sekai 0.2.0's finance envs.

- `TradingEnv` (`Trading-v0`): one asset, a discrete set of target positions.
- `PortfolioEnv` (`Portfolio-v0`): n assets, continuous target weights.
- `MarketMakingEnv` (`MarketMaking-v0`): quote bid/ask offsets around a mid price.
- `OptimalExecutionEnv` (`OptimalExecution-v0`): liquidate a block of shares under impact.
- `LimitOrderBookEnv` (`LimitOrderBook-v0`) and `LimitOrderBookMarketEnv`
  (`LimitOrderBookMarket-v0`, multi-agent): quote and trade in a price-time-priority book
  with zero-intelligence background flow (`docs/finance/lob.md`); `load_lobster` reads a
  LOBSTER message file and its orderbook file for `lob.process_messages`.
- `LimitOrderBookReplayEnv` (`LimitOrderBookReplay-v0`) and
  `LimitOrderBookReplayExecutionEnv` (`LimitOrderBookReplayExecution-v0`, with the
  `twap_policy` and `immediate_policy` baselines): trade, or sell a block, against a replayed
  LOBSTER day.
- `MarketData` (prices, volume, spread, dates) and `market_inputs`, the arrays the envs read
  from it; `SquareRootImpact` and the quoted `SpreadCost()` read its volume and spread.
- market models (`GBM`, `Heston`, `MertonJumpDiffusion`, `RegimeSwitching`, `GARCH`,
  `MeanReverting`, `CointegratedPair`, `BlockBootstrap`, `Randomized`, `from_sekai`): pure
  JAX price processes of the counter RNG (`docs/finance/models.md`).
- cost models, reward functions, samplers and closed-form baselines (Avellaneda-Stoikov,
  Almgren-Chriss), see the submodules.
- performance metrics as pure JAX functions (`sharpe_ratio`, `max_drawdown`, ...,
  `performance_metrics`), `evaluate` (a per-episode `EpisodeReport` table) and episode
  figures (`plot_episode`, `render_episode`).

Names are resolved lazily, so importing one env does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY: dict[str, str] = {
    # market models (pure JAX, counter RNG; sekai's `simulators`), see docs/finance/models.md
    "MarketModel": "._models",
    "ModelState": "._models",
    "Simulation": "._models",
    "GBM": "._models",
    "Heston": "._models",
    "MertonJumpDiffusion": "._models",
    "RegimeSwitching": "._models",
    "GARCH": "._models",
    "MeanReverting": "._models",
    "CointegratedPair": "._models",
    "BlockBootstrap": "._models",
    "Randomized": "._models",
    "from_sekai": "._models",
    # Trading / Portfolio and their shared market, cost and reward machinery
    "TradingEnv": "._trading",
    "TradingParams": "._trading",
    "PortfolioEnv": "._portfolio",
    "PortfolioParams": "._portfolio",
    "TradingState": "._trading",
    "PortfolioState": "._portfolio",
    "MarketState": "._market",
    "SLOTS": "._market",
    "CostModel": "._costs",
    "NoCost": "._costs",
    "ProportionalCost": "._costs",
    "SpreadCost": "._costs",
    "FixedCost": "._costs",
    "CompositeCost": "._costs",
    "as_cost_model": "._costs_convert",
    "SquareRootImpact": "._costs",
    "check_cost_inputs": "._costs_convert",
    "fill_from_median": "._costs_numerics",
    "MarketData": "._data",
    "MarketInputs": "._data_inputs",
    "Time": "._data",
    "market_inputs": "._data_inputs",
    "StepOutcome": "._rewards",
    "RewardFunction": "._rewards",
    "LogReturn": "._rewards",
    "SimpleReturn": "._rewards",
    "ProfitAndLoss": "._rewards",
    "MeanVariance": "._rewards",
    "TurnoverPenalty": "._rewards",
    "DrawdownPenalty": "._rewards",
    "DifferentialSharpe": "._rewards",
    "as_reward": "._rewards",
    "RandomStart": "._samplers",
    "FixedStart": "._samplers",
    "SequentialStart": "._samplers",
    "as_sampler": "._samplers",
    "reset_with_start": "._samplers",
    # the limit order book (docs/finance/lob.md)
    "LimitOrderBookEnv": "._lob",
    "LimitOrderBookParams": "._lob",
    "LimitOrderBookMarketEnv": "._lob",
    "load_lobster": "._lob._lobster",
    "LimitOrderBookReplayEnv": "._lob._replay_env",
    "LimitOrderBookReplayParams": "._lob._replay_env",
    "LimitOrderBookReplayExecutionEnv": "._lob._replay_execution",
    "twap_policy": "._lob._replay_execution",
    "immediate_policy": "._lob._replay_execution",
    # MarketMaking / OptimalExecution and the closed-form baselines
    "MarketMakingEnv": "._market_making",
    "MarketMakingParams": "._market_making",
    "OptimalExecutionEnv": "._execution",
    "OptimalExecutionParams": "._execution",
    "avellaneda_stoikov_action": "._baselines",
    "avellaneda_stoikov_quotes": "._baselines",
    "almgren_chriss_trajectory": "._baselines",
    "almgren_chriss_actions": "._baselines",
    "expected_shortfall": "._baselines",
    "avellaneda_stoikov_policy": "._baselines",
    "almgren_chriss_policy": "._baselines",
    # performance metrics, the per-episode evaluation table and episode figures
    "total_return": "._metrics",
    "annualized_return": "._metrics",
    "annualized_volatility": "._metrics",
    "sharpe_ratio": "._metrics",
    "sortino_ratio": "._metrics",
    "max_drawdown": "._metrics",
    "calmar_ratio": "._metrics",
    "value_at_risk": "._metrics",
    "conditional_value_at_risk": "._metrics",
    "hit_rate": "._metrics",
    "drawdown_series": "._metrics",
    "equity_curve": "._metrics",
    "returns_from_equity": "._metrics",
    "performance_metrics": "._metrics_summary",
    "pnl_metrics": "._metrics_summary",
    "EpisodeReport": "._evaluate",
    "evaluate": "._evaluate",
    "plot_episode": "._plots",
    "render_episode": "._plots",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'parallax.finance' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
