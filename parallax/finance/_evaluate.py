"""`evaluate`: run a policy for a batch of episodes and report the metrics of each episode.

- `evaluate(env, policy, key, num_episodes)`: one episode per copy of `env`, run with
  `parallax.rollout` over `VmapWrapper(env, num_episodes)`, summarised per episode with
  `parallax.finance.performance_metrics` (envs that report `info["equity"]`),
  `pnl_metrics` (envs that report a P&L from zero, `info["wealth"]`) and the execution
  figures (`info["implementation_shortfall"]`);
- `EpisodeReport`: the table, a read-only mapping from column name to a NumPy array with one
  entry per episode, printed as a plain-text table with a mean row.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._rollout import rollout
from .._validate import positive_int
from .._wrappers.base import episode_length
from .._wrappers.vmap import VmapWrapper
from ._metrics import returns_from_equity
from ._metrics_kernels import _check_finite, _check_level, _check_positive
from ._metrics_summary import performance_metrics, pnl_metrics

__all__ = ["EpisodeReport", "evaluate"]

# column -> (header, format) for the text table; unknown columns use "{:.4g}"
_PERCENT = "{:.2%}"
_COLUMNS: dict[str, tuple[str, str]] = {
    "length": ("steps", "{:.0f}"),
    "total_reward": ("reward", "{:.4g}"),
    "final_equity": ("equity", "{:.6g}"),
    "total_return": ("return", _PERCENT),
    "annualized_return": ("ann. return", _PERCENT),
    "annualized_volatility": ("ann. vol", _PERCENT),
    "sharpe_ratio": ("Sharpe", "{:.3f}"),
    "sortino_ratio": ("Sortino", "{:.3f}"),
    "max_drawdown": ("max DD", _PERCENT),
    "calmar_ratio": ("Calmar", "{:.3f}"),
    "value_at_risk": ("VaR", _PERCENT),
    "conditional_value_at_risk": ("CVaR", _PERCENT),
    "hit_rate": ("hit rate", _PERCENT),
    "total_pnl": ("P&L", "{:.6g}"),
    "mean_pnl": ("mean P&L", "{:.4g}"),
    "pnl_volatility": ("P&L vol", "{:.4g}"),
    "implementation_shortfall": ("shortfall", "{:.6g}"),
    "shortfall_bps": ("shortfall bps", "{:.3f}"),
    "final_inventory": ("inventory", "{:.6g}"),
}


class EpisodeReport(Mapping[str, np.ndarray]):
    """Per-episode metrics: a mapping from column name to an array of shape `(num_episodes,)`.

    `str(report)` is a plain-text table (one row per episode, at most `max_rows` shown,
    then the mean over all episodes); `report.mean()` gives the means as floats.

    Example:
        >>> import numpy as np
        >>> from parallax.finance import EpisodeReport
        >>> report = EpisodeReport({"length": np.array([5, 5]), "sharpe_ratio": np.array([1.0, 0.5])})
        >>> report.mean()["sharpe_ratio"], report.num_episodes
        (0.75, 2)
    """

    max_rows = 20

    def __init__(
        self, columns: Mapping[str, Any], formats: Mapping[str, str] | None = None
    ) -> None:
        arrays = {name: np.asarray(value) for name, value in columns.items()}
        lengths = {a.shape for a in arrays.values()}
        if len(lengths) > 1 or any(len(shape) != 1 for shape in lengths):
            raise ValueError(
                "EpisodeReport: every column must be a 1-D array of the same length, got "
                f"shapes { ({k: v.shape for k, v in arrays.items()}) }"
            )
        self._columns = arrays
        self._formats = {n: _COLUMNS.get(n, (n, "{:.4g}"))[1] for n in arrays}
        self._formats.update(formats or {})

    def __getitem__(self, name: str) -> np.ndarray:
        return self._columns[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    @property
    def num_episodes(self) -> int:
        """The number of episodes (rows)."""
        return next(iter(self._columns.values())).shape[0] if self._columns else 0

    def mean(self) -> dict[str, float]:
        """Each column's mean over the episodes (`inf` where an episode's value is `inf`)."""
        return {name: float(np.mean(value)) for name, value in self._columns.items()}

    def __str__(self) -> str:
        names = list(self._columns)
        headers = ["episode"] + [_COLUMNS.get(n, (n, ""))[0] for n in names]

        def cells(values: dict[str, float]) -> list[str]:
            out = []
            for n in names:
                fmt = self._formats[n]
                v = float(values[n])
                out.append(fmt.format(v) if np.isfinite(v) else str(v))
            return out

        rows = [
            [str(i), *cells({n: self._columns[n][i] for n in names})]
            for i in range(min(self.num_episodes, self.max_rows))
        ]
        if self.num_episodes > self.max_rows:
            rows.append(["...", *([""] * len(names))])
        rows.append(["mean", *cells(self.mean())])
        widths = [max(len(r[c]) for r in [headers, *rows]) for c in range(len(headers))]
        lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(cell.rjust(w) for cell, w in zip(r, widths)) for r in rows]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"EpisodeReport(num_episodes={self.num_episodes}, columns={list(self._columns)})"


def _key_state_policy(policy: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    """`policy` as `policy(key, state)`: a policy that takes exactly one positional
    argument (the finance baselines, `almgren_chriss_policy(env)`) is called with the state
    alone; any other is called with the key and the state."""
    try:
        parameters = inspect.signature(policy).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a C callable): as given
        return policy
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return policy
    if len([p for p in parameters if p.kind in positional]) == 1:
        return lambda key, state: policy(state)
    return policy


def evaluate(
    env: Any,
    policy: Callable[[Any, Any], Any] | Callable[[Any], Any],
    key: Any,
    num_episodes: int,
    *,
    num_steps: int | None = None,
    periods_per_year: float = 252,
    risk_free: float = 0.0,
    level: float = 0.95,
) -> EpisodeReport:
    """Run `num_episodes` episodes of `policy` in `env` and report each episode's metrics.

    The episodes run side by side in `VmapWrapper(env, num_episodes)` with
    `parallax.rollout` (jitted, one compile per call), each from its own reset key, for
    `num_steps` steps; the steps after an episode ends are left out of its metrics
    (`where=` masks), so episodes that end early (a wiped-out account) are summarised over
    their own length.

    Columns of the report, by what the env's `info` holds:

    - always: `length` (steps) and `total_reward`;
    - `info["equity"]` (Trading-v0, Portfolio-v0): `final_equity` and every
      `performance_metrics` column, from the returns of equity;
    - `info["wealth"]` (MarketMaking-v0, a P&L from zero): every `pnl_metrics` column;
    - `info["implementation_shortfall"]` (OptimalExecution-v0): its final value,
      `shortfall_bps` and `final_inventory`.

    Args:
        env: a single (unbatched) environment without auto-reset, wrapped or not.
        policy: `policy(key, state) -> actions` over the *batched* state, as for
            `parallax.rollout` on a vector env, or `policy(state) -> actions` (a policy
            that takes one positional argument is called without the key), so the finance
            baselines go in as they are: `evaluate(env, almgren_chriss_policy(env), ...)`.
        key: a PRNG key.
        num_episodes: positive int, the number of episodes (rows of the report).
        num_steps: steps to run; by default the env's episode length (`TimeLimit`'s
            `max_steps`, `episode_length` or `n_steps`, the smallest found).
        periods_per_year, risk_free, level: as in `performance_metrics`.

    Returns:
        An `EpisodeReport`; `print(report)` shows the table.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import parallax
        >>> from parallax.finance import evaluate
        >>> env = parallax.make("Trading-v0", episode_length=8, lookback=2)
        >>> always_long = lambda key, state: jnp.full(state.reward.shape, 2, jnp.int32)
        >>> report = evaluate(env, always_long, jax.random.key(0), num_episodes=3)
        >>> report["sharpe_ratio"].shape, report["length"].tolist()
        ((3,), [8, 8, 8])
    """
    if getattr(env, "num_envs", None) is not None:
        raise TypeError(
            "evaluate: env must be a single (unbatched) environment; it is batched into "
            f"num_episodes copies, got a vector env of num_envs={env.num_envs}"
        )
    if getattr(env, "autoreset_mode", "off") != "off":
        raise ValueError(
            "evaluate runs exactly one episode per copy of env: pass it without "
            f"AutoResetWrapper (its autoreset_mode is {env.autoreset_mode!r})"
        )
    if not callable(policy):
        raise TypeError(f"evaluate: policy must be callable, got {type(policy).__name__}")
    policy = _key_state_policy(policy)
    num_episodes = positive_int(num_episodes, "num_episodes", "evaluate")
    if num_steps is None:
        num_steps = episode_length(env)
        if num_steps is None:
            raise ValueError(
                "evaluate: env declares no episode length (no TimeLimit, episode_length or "
                "n_steps); pass num_steps="
            )
    num_steps = positive_int(num_steps, "num_steps", "evaluate")
    _check_positive(periods_per_year, "periods_per_year")
    _check_finite(risk_free, "risk_free")
    _check_level(level)
    vec = VmapWrapper(env, num_episodes)

    def run(key: Any) -> dict[str, jax.Array]:
        reset_key, run_key = jax.random.split(key)
        first = vec.reset(key=reset_key)
        _, traj = rollout(vec, policy, run_key, num_steps, state=first)
        done = traj.done.T  # (num_episodes, num_steps)
        ended_before = jnp.cumsum(done, axis=1, dtype=jnp.int32) - done.astype(jnp.int32)
        valid = ended_before == 0
        length = jnp.sum(valid, axis=1, dtype=jnp.int32)
        last = (jnp.maximum(length, 1) - 1)[:, None]
        reward = traj.reward.T
        columns: dict[str, jax.Array] = {
            "length": length,
            "total_reward": jnp.sum(jnp.where(valid, reward, jnp.zeros_like(reward)), axis=1),
        }
        info, info0 = traj.info, first.info

        def path(name: str) -> jax.Array:
            return jnp.concatenate([info0[name][None], info[name]], axis=0).T

        def final(name: str) -> jax.Array:
            return jnp.take_along_axis(info[name].T, last, axis=1)[:, 0]

        if "equity" in info:
            columns["final_equity"] = final("equity")
            returns = returns_from_equity(path("equity"))
            columns.update(
                performance_metrics(
                    returns, periods_per_year, risk_free=risk_free, level=level, where=valid
                )
            )
            del columns["n_periods"]
        elif "wealth" in info:
            wealth = path("wealth")
            pnl = wealth[:, 1:] - wealth[:, :-1]
            seen = jnp.concatenate([jnp.ones((num_episodes, 1), bool), valid], axis=1)
            scale = jnp.max(jnp.where(seen, jnp.abs(wealth), jnp.zeros_like(wealth)), axis=1)
            columns.update(pnl_metrics(pnl, periods_per_year, scale=scale, where=valid))
            del columns["n_periods"]
        if "implementation_shortfall" in info:
            columns["implementation_shortfall"] = final("implementation_shortfall")
            if "shortfall_bps" in info:
                columns["shortfall_bps"] = final("shortfall_bps")
            if "inventory" in info:
                columns["final_inventory"] = final("inventory")
        return columns

    columns = jax.jit(run)(key)  # a dict comes back with sorted keys: restore the order
    order = [name for name in _COLUMNS if name in columns]
    order += sorted(set(columns) - set(order))
    # a P&L drawdown is an amount, not a fraction
    formats = {"max_drawdown": "{:.6g}"} if "total_pnl" in columns else {}
    return EpisodeReport({name: np.asarray(columns[name]) for name in order}, formats)
