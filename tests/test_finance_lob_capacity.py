"""The book's capacity, derived from the flow's rates (`default_capacity`).

The count of background orders on a side is at most the seed orders still resting plus the
limit orders still resting, a Binomial plus a Poisson count at every time. These tests
compute that distribution exactly (scipy) and check the derived capacity both ways: the
count reaches it with probability at most `tail` at any time, and it is not much above the
exact quantile. Then the envs: a capacity left out follows their flow, one given is kept.
No compilation here: every check is at construction.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from parallax.finance._lob import (
    FlowParams,
    LimitOrderBookEnv,
    LimitOrderBookMarketEnv,
    default_capacity,
)

SEED = 30  # the seed book's orders a side (10 levels of 3)
HORIZON = 320.0  # sekai's default warm-up and session
FLOWS = {
    "default": FlowParams(),
    "thin": FlowParams(cancel_rate=1.0),
    "deep": FlowParams(cancel_rate=0.1),
    "fast cancels": FlowParams(cancel_rate=4.0, limit_rate=25.0),
    "no cancels, short": FlowParams(cancel_rate=0.0),
}


def _exact_tails(flow: FlowParams, horizon: float, k_max: int) -> np.ndarray:
    """`out[k]`: the max over t in [0, horizon] (a fine grid) of P(S_t + A_t >= k), exactly,
    for k = 0..k_max."""
    lam, c = float(flow.limit_rate), float(flow.cancel_rate)
    t = np.unique(
        np.concatenate([np.linspace(0, horizon, 1001), np.geomspace(1e-5, horizon, 1001)])
    )
    survive = np.exp(-c * t)
    mean = lam * t if c == 0 else lam * -np.expm1(-c * t) / c
    j = np.arange(SEED + 1)
    seeds = stats.binom.pmf(j[None, :], SEED, np.where(survive < 1e-200, 0.0, survive)[:, None])
    k = np.arange(k_max + 1)
    # P(S + A >= k) = sum_j P(S = j) P(A >= k - j), every term positive (no 1 - cdf)
    need = k[None, :, None] - j[None, None, :]  # (1, K, J)
    arrivals = np.where(need <= 0, 1.0, stats.poisson.sf(need - 1, mean[:, None, None]))
    return np.max(np.sum(seeds[:, None, :] * arrivals, axis=-1), axis=0)


def _exact_quantile(tails: np.ndarray, tail: float) -> int:
    """The least k whose exact tail is <= `tail`."""
    return int(np.argmax(tails <= tail))


@pytest.mark.parametrize("name", ["default", "thin", "deep", "fast cancels"])
def test_capacity_holds_the_resting_orders_but_little_more(name: str) -> None:
    flow, tail = FLOWS[name], 1e-9
    capacity = default_capacity(flow, HORIZON, reserved=0, tail=tail)
    assert capacity % 16 == 0
    tails = _exact_tails(flow, HORIZON, capacity)
    # safe: the exact count reaches the capacity with probability <= tail at every time
    assert tails[capacity] <= tail
    # tight: within the Chernoff bound's slack and the rounding of the exact quantile
    q = _exact_quantile(tails, tail)
    assert tails[q - 1] > tail
    assert capacity <= q + 3 * math.sqrt(q) + 16, (capacity, q)


def test_capacity_without_cancellations_grows_with_the_horizon() -> None:
    flow = FLOWS["no cancels, short"]
    short, longer = default_capacity(flow, 5.0), default_capacity(flow, 50.0)
    assert _exact_tails(flow, 5.0, short)[short - 1] <= 1e-9  # one slot kept for the agent
    assert short < longer
    assert longer >= SEED + 10.0 * 50.0  # every limit order of the horizon rests


def test_capacity_values_for_sekais_flows() -> None:
    """The values the docs give: sekai's default flow keeps the former fixed 64."""
    assert default_capacity(FLOWS["default"], HORIZON) == 64
    assert default_capacity(FLOWS["thin"], HORIZON) == 48
    assert default_capacity(FLOWS["deep"], HORIZON) == 176
    # a smaller tail or more reserved slots never give less room
    assert default_capacity(FLOWS["deep"], HORIZON, tail=1e-15) >= 176
    assert default_capacity(FLOWS["default"], HORIZON, reserved=40) == 112


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"horizon": 0.0}, "horizon must be finite and > 0, got 0.0"),
        ({"horizon": math.inf}, "horizon must be finite and > 0, got inf"),
        ({"tail": 1.0}, r"tail must be in \(0, 1\), got 1.0"),
        ({"reserved": -1}, "reserved must be an integer >= 0, got -1"),
        ({"seed_orders": 2.5}, "seed_orders must be an integer >= 0, got 2.5"),
    ],
)
def test_capacity_arguments_are_checked(kwargs: dict[str, float], message: str) -> None:
    args = {"horizon": HORIZON, **kwargs}
    with pytest.raises(ValueError, match=message):
        default_capacity(FlowParams(), args.pop("horizon"), **args)  # type: ignore[arg-type]


def test_an_unbounded_flow_asks_for_a_capacity() -> None:
    with pytest.raises(ValueError, match=r"may rest more than 65536 orders .* pass capacity"):
        default_capacity(FlowParams(cancel_rate=0.0), 10_000.0)
    with pytest.raises(ValueError, match="pass capacity explicitly"):
        LimitOrderBookEnv(flow=FlowParams(cancel_rate=0.0), session_length=10_000.0)
    # given one, the env takes it (a full side is then flagged, never silent)
    assert LimitOrderBookEnv(flow=FlowParams(cancel_rate=0.0), capacity=256).capacity == 256


def test_envs_derive_their_capacity_from_their_flow() -> None:
    assert LimitOrderBookEnv().capacity == 64
    deep = LimitOrderBookEnv(flow=FLOWS["deep"])
    assert deep.capacity == default_capacity(FLOWS["deep"], 320.0, reserved=1) == 176
    short = LimitOrderBookEnv(flow=FLOWS["deep"], session_length=10.0, warmup=2.0)
    assert short.capacity == default_capacity(FLOWS["deep"], 12.0, reserved=1) < 176
    assert LimitOrderBookEnv(flow=FLOWS["deep"], capacity=32).capacity == 32  # given: kept
    # the market keeps a slot a side per trader, and at least 2 + 2 * n_agents
    assert LimitOrderBookMarketEnv().capacity == 64
    market = LimitOrderBookMarketEnv(40)
    assert market.capacity == default_capacity(FlowParams(), 320.0, reserved=40) == 112
    with pytest.raises(ValueError, match=r"capacity must be >= 2 \+ 2 \* n_agents = 82, got 64"):
        LimitOrderBookMarketEnv(40, capacity=64)
