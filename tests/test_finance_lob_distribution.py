"""`LimitOrderBook-v0` and `LimitOrderBookMarket-v0` in distribution against sekai 0.2.0.

The step-by-step tests (`test_finance_lob_env.py`, `test_finance_lob_market.py`) feed sekai
our draws. Here sekai runs on its own numpy generator (`reset(seed=...)`) and ours on its own
float32 stream, `M` independent sessions each under the same fixed policy, and the
per-session statistics must agree: for each statistic the difference of the two sample
means, over the standard error from both samples, is at most `Z_MAX` in absolute value.

Per session (read from `info` and the observation, except the trade counts):

- `spread`: the mean of `info["spread"]` after each step, in ticks;
- `depth`: the mean resting volume of the observed levels, both sides (the observation's
  `"book"` sizes);
- `mid_variance`: the realized variance of the mid per unit time, the sum of the squared
  changes of `info["mid_price"]` over the session (from reset on) divided by its length;
- `trades`: trades per unit time: ours, the advance of the trade log's ring head (64 slots,
  more than any step's trades), sekai's, the fills its flow's `advance` returns (counted by
  `CountingFlow`); the fixed policies never cross the book, so every trade is the flow's;
- `fills`: the agent's executions per unit time (`info["fills"]`; zero for the passive
  policy, on both sides, exactly).

Sessions, not steps, are the samples: the steps of a session are correlated. Cases: sekai's
default flow and a thin book (`cancel_rate=1.0`) under a passive policy (no quotes, no
market orders), the default flow under a quoting one (join both best quotes), and the market
with two quoting traders on jittered clocks. A planted change (our flow's `cancel_rate` 0.5
-> 0.65, the same keys) must fail the comparison. One compiled program per env serves every
flow and policy (the flow's parameters and the action are arguments).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.typing import ArrayLike

from parallax.finance._lob import (
    FlowParams,
    LimitOrderBookEnv,
    LimitOrderBookMarketEnv,
    LimitOrderBookParams,
)

lob_env = pytest.importorskip("sekai.envs.finance.lob_env")
lob = pytest.importorskip("sekai.finance.lob")

Z_MAX = 4.0
M = 32  # independent sessions per side
SESSION = 50.0  # session length (decision interval 1: 50 steps)
WARMUP = 10.0  # the book's warm-up before the session (sekai's default is 20)
# sekai's default flow stays below 36 orders per side in long runs (test_finance_lob_flow);
# 48 slots keep every program small, and no session may overflow (asserted)
CAPACITY = 48
MAX_TRADES = 64  # the trade log: far more than a step's trades, so its head counts them
ENV_KWARGS: dict[str, Any] = {
    "session_length": SESSION,
    "warmup": WARMUP,
    "max_trades": MAX_TRADES,
}
STATISTICS = ("spread", "depth", "mid_variance", "trades", "fills")
SETTINGS: dict[str, dict[str, Any]] = {"default": {}, "thin": {"cancel_rate": 1.0}}
POLICIES = {"passive": (0, 0, 1), "quoting": (1, 1, 1)}  # no quotes / join both best quotes
# One compiled program serves every flow: the bounds of the most active one (thin) are used.
BOUNDS_FLOW = FlowParams(cancel_rate=1.0)
PLANTED = {"cancel_rate": 0.65}  # ours only, against sekai's default flow


def _step_row(state: Any, new: Any, book: jax.Array) -> tuple[jax.Array, ...]:
    """What one step records: spread, depth of the observed `book` rows, mid, trades (the
    advance of the trade log's head), the agent's fills and the overflow flag."""
    head = new.env_state.trades.head - state.env_state.trades.head
    return (
        new.info["spread"],
        jnp.sum(book[:, 1]) + jnp.sum(book[:, 3]),
        new.info["mid_price"],
        jnp.remainder(head, MAX_TRADES),
        new.info["fills"],
        new.info["overflow"],
    )


@dataclasses.dataclass(frozen=True)
class CountingFlow(lob.ZeroIntelligenceFlow):  # type: ignore[misc,name-defined]
    """sekai's flow, recording how many trades each `advance` made (warm-up first)."""

    counts: list[int] = dataclasses.field(default_factory=list, compare=False, repr=False)

    def advance(self, book: Any, rng: Any, until: float) -> list[Any]:
        fills = super().advance(book, rng, until)
        self.counts.append(len(fills))
        return fills


def session_statistics(
    spread: ArrayLike,
    depth: ArrayLike,
    mids: ArrayLike,
    trades: ArrayLike,
    fills: ArrayLike,
    length: float,
) -> np.ndarray:
    """The statistics of one session from its per-step records (`mids` starts at reset;
    `fills` may have a column per trader, which gives a column each)."""
    mid = np.asarray(mids, np.float64)
    return np.array(
        [
            np.mean(np.asarray(spread, np.float64)),
            np.mean(np.asarray(depth, np.float64)),
            np.sum(np.diff(mid) ** 2) / length,
            np.sum(np.asarray(trades)) / length,
            *np.atleast_1d(np.sum(np.asarray(fills), axis=0) / length),
        ]
    )


def z_scores(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """The difference of the sample means over its standard error, per column.

    A column with no variance on either side gives 0 if the means are equal, inf if not.
    """
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    se = np.sqrt(ours.var(axis=0, ddof=1) / len(ours) + theirs.var(axis=0, ddof=1) / len(theirs))
    diff = ours.mean(axis=0) - theirs.mean(axis=0)
    safe = np.where(se > 0, se, 1.0)
    return np.where(se > 0, diff / safe, np.where(diff == 0, 0.0, np.inf))


def report(z: np.ndarray, ours: np.ndarray, theirs: np.ndarray, names: tuple[str, ...]) -> str:
    rows = zip(names, z, ours.mean(axis=0), theirs.mean(axis=0), strict=True)
    return "; ".join(f"{n}: z={zi:+.2f} ours {o:.4g} sekai {t:.4g}" for n, zi, o, t in rows)


# -- the single-agent env ------------------------------------------------------------------


@functools.cache
def sekai_single(setting: str, policy: str, first_seed: int) -> np.ndarray:
    """`(M, 5)` statistics of sekai's env over seeds `first_seed ...`, its own generator."""
    out = []
    action = np.array(POLICIES[policy])
    for seed in range(first_seed, first_seed + M):
        flow = CountingFlow(**SETTINGS[setting])
        env = lob_env.LimitOrderBookEnv(flow=flow, **ENV_KWARGS)
        first = env.reset(seed=seed)
        mids, spread, depth, fills = [first.info["mid_price"]], [], [], []
        for _ in range(env.n_steps):
            result = env.step(action)
            assert result.info["spread"] is not None
            book = result.observation["book"]
            mids.append(result.info["mid_price"])
            spread.append(result.info["spread"])
            depth.append(book[:, 1].sum() + book[:, 3].sum())
            fills.append(result.info["fills"])
        assert result.terminated
        trades = np.asarray(flow.counts[1:])  # [0] is the warm-up
        assert len(trades) == env.n_steps and trades.max() < MAX_TRADES // 2
        out.append(session_statistics(spread, depth, mids, trades, fills, SESSION))
    return np.asarray(out)


@pytest.fixture(scope="module")
def single() -> Any:
    """One jitted program running `M` sessions of our env (float32), for every flow."""
    env = LimitOrderBookEnv(flow=BOUNDS_FLOW, capacity=CAPACITY, **ENV_KWARGS)

    @jax.jit
    def sessions(keys: jax.Array, params: LimitOrderBookParams, action: jax.Array) -> Any:
        def one(key: jax.Array) -> Any:
            state = env.reset(key=key, params=params)

            def step(state: Any, _: None) -> tuple[Any, tuple[jax.Array, ...]]:
                new = env.step(state, action, params)
                return new, _step_row(state, new, new.observation["book"])

            last, rows = jax.lax.scan(step, state, None, length=env.n_steps)
            return state.info["mid_price"], rows, last.termination

        # sessions one after the other: a vmapped flow loop runs every book for as many
        # events as the busiest one has
        return jax.lax.map(one, keys)

    return sessions


def ours_single(single: Any, flow: dict[str, Any], policy: str, seed: int) -> np.ndarray:
    """`(M, 5)` statistics of our env over `M` keys split from `seed`."""
    params = LimitOrderBookParams(flow=FlowParams(**flow))
    keys = jax.random.split(jax.random.key(seed), M)
    first_mid, rows, done = jax.tree.map(
        np.asarray, single(keys, params, jnp.asarray(POLICIES[policy], jnp.int32))
    )
    spread, depth, mids, trades, fills, overflow = rows
    assert not overflow.any() and done.all()
    assert trades.max() < MAX_TRADES // 2  # the head difference counts every trade
    return np.asarray(
        [
            session_statistics(
                spread[i],
                depth[i],
                np.concatenate([[first_mid[i]], mids[i]]),
                trades[i],
                fills[i],
                SESSION,
            )
            for i in range(M)
        ]
    )


# the quoting policy in the default flow only (the market test quotes too): the module's time
CASES = [("default", "passive"), ("default", "quoting"), ("thin", "passive")]


@pytest.mark.parametrize(("setting", "policy"), CASES)
def test_env_matches_sekai_in_distribution(single: Any, setting: str, policy: str) -> None:
    index = CASES.index((setting, policy))
    ours = ours_single(single, SETTINGS[setting], policy, seed=index)
    theirs = sekai_single(setting, policy, 1000 * (index + 1))
    z = z_scores(ours, theirs)
    assert np.all(np.abs(z) <= Z_MAX), report(z, ours, theirs, STATISTICS)
    # the sessions exercised what the statistics measure
    mean = theirs.mean(axis=0)
    assert mean[0] >= 1.0 and mean[1] > 0 and mean[2] > 0 and mean[3] > 1.0
    if policy == "passive":
        assert not ours[:, 4].any() and not theirs[:, 4].any()
    else:
        assert mean[4] > 0.1 and ours[:, 4].mean() > 0.1


def test_a_planted_flow_change_is_detected(single: Any) -> None:
    """Ours with `cancel_rate=0.65` against sekai's default 0.5: some |z| > 4."""
    planted = {**SETTINGS["default"], **PLANTED}
    ours = ours_single(single, planted, "passive", seed=0)  # the keys of the default case
    theirs = sekai_single("default", "passive", 1000)
    z = z_scores(ours, theirs)
    assert np.max(np.abs(z)) > Z_MAX, report(z, ours, theirs, STATISTICS)


# -- the market: two traders ----------------------------------------------------------------

MARKET_KWARGS: dict[str, Any] = {"decision_intervals": [1.0, 0.7], "jitter": 0.2, **ENV_KWARGS}
MARKET_POLICY = ((1, 1, 1), (2, 2, 1))  # trader 0 joins the best quotes, trader 1 one behind
# at most 50 / 0.8 + 50 / 0.56 decisions, plus the end; steps after it change nothing
MARKET_STEPS = 160
MARKET_STATISTICS = (*STATISTICS[:4], "fills_0", "fills_1")


def sekai_market(first_seed: int) -> np.ndarray:
    """`(M, 6)` statistics of sekai's market over seeds `first_seed ...`, its own generator."""
    out = []
    names = [f"trader_{i}" for i in range(2)]
    for seed in range(first_seed, first_seed + M):
        flow = CountingFlow()
        env = lob_env.LimitOrderBookMarket(2, flow=flow, **MARKET_KWARGS)
        first = env.reset(seed=seed)
        mids, spread, depth, fills = [first.info[names[0]]["mid_price"]], [], [], []
        while env.agents:
            result = env.step({a: np.array(MARKET_POLICY[names.index(a)]) for a in env.acting})
            info = result.info[names[0]]
            book = next(iter(result.observations.values()))["book"]
            mids.append(info["mid_price"])
            spread.append(info["spread"])
            depth.append(book[:, 1].sum() + book[:, 3].sum())
            fills.append([result.info[a]["fills"] for a in names])
        trades = np.asarray(flow.counts[1:])
        assert len(trades) == len(spread) <= MARKET_STEPS and trades.max() < MAX_TRADES // 2
        out.append(session_statistics(spread, depth, mids, trades, fills, SESSION))
    return np.asarray(out)


def ours_market(seed: int) -> np.ndarray:
    """`(M, 6)` statistics of our market over `M` keys split from `seed` (one compile)."""
    env = LimitOrderBookMarketEnv(2, flow=BOUNDS_FLOW, capacity=CAPACITY, **MARKET_KWARGS)
    params = LimitOrderBookParams(flow=FlowParams())
    action = jnp.asarray(MARKET_POLICY, jnp.int32)

    def one(key: jax.Array) -> Any:
        state = env.reset(key=key, params=params)

        def step(state: Any, _: None) -> tuple[Any, tuple[jax.Array, ...]]:
            new = env.step(state, action, params)
            first_active = jnp.argmax(new.agents.active)
            book = new.agents.observation["book"][first_active]  # inactive slots are zeros
            # a step of the session, not one after its end, then the step's statistics
            return new, (~state.termination, *_step_row(state, new, book))

        last, rows = jax.lax.scan(step, state, None, length=MARKET_STEPS)
        return state.info["mid_price"], rows, last.termination

    keys = jax.random.split(jax.random.key(seed), M)
    first_mid, rows, done = jax.tree.map(np.asarray, jax.jit(lambda k: jax.lax.map(one, k))(keys))
    live, spread, depth, mids, trades, fills, overflow = rows
    assert not overflow.any() and done.all()
    assert trades.max() < MAX_TRADES // 2
    out = []
    for i in range(M):
        n = int(live[i].sum())
        assert live[i, :n].all() and n < MARKET_STEPS  # the session ended inside the scan
        mid = np.concatenate([[first_mid[i]], mids[i, :n]])
        out.append(
            session_statistics(
                spread[i, :n], depth[i, :n], mid, trades[i, :n], fills[i, :n], SESSION
            )
        )
    return np.asarray(out)


def test_market_matches_sekai_in_distribution() -> None:
    """Two traders on jittered clocks (1.0 and 0.7, jitter 0.2), sekai's default flow."""
    ours, theirs = ours_market(seed=10), sekai_market(9000)
    z = z_scores(ours, theirs)
    assert np.all(np.abs(z) <= Z_MAX), report(z, ours, theirs, MARKET_STATISTICS)
    mean = theirs.mean(axis=0)
    assert mean[3] > 1.0 and mean[4] > 0.1 and mean[5] > 0.05, mean
