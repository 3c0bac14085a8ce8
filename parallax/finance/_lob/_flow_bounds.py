"""The background flow's sizes from its rates: the loop's bound and the book's capacity.

- `default_max_events`: a bound on the loop's iterations for an interval, from the rates.
- `default_capacity`: the slots per side that the flow fills with probability at most
  `tail`, from the rates and the book's lifetime.
- `_SEED_LEVELS`, `_SEED_ORDERS_PER_LEVEL`: the seed book's defaults (`initialise`).
"""

from __future__ import annotations

import math

import numpy as np

from ._flow_params import FlowParams

__all__ = ["default_capacity", "default_max_events"]


def default_max_events(
    params: FlowParams, duration: float, capacity: int, *, sigmas: float = 10.0
) -> int:
    """A bound on the loop iterations of one interval of length `duration`.

    Limit orders and cancellations take one iteration each, at a rate of at most
    `2 limit_rate + cancel_rate * 2 capacity` (every slot a background order); a market
    order takes one per resting order it executes against, at most its size, so market
    orders add `2 market_rate * s` iterations per unit time for sizes `s` (mean
    `mean_size`). The bound is twice (each event may be followed by a refill) the mean of
    that compound Poisson count plus `sigmas` of its standard deviations plus 16.

    Args:
        params: Python-number parameters.
        duration: The interval's length, > 0.
        capacity: The book's slots per side.
        sigmas: Standard deviations of margin.

    Returns:
        The bound, a Python int.
    """
    single = 2 * float(params.limit_rate) + float(params.cancel_rate) * 2 * int(capacity)
    market = 2 * float(params.market_rate)
    size = float(params.mean_size)
    mean = (single + market * size) * float(duration)
    # a compound Poisson count's variance: rate * E[s^2], with Var(s) = mean_size - 1
    variance = (single + market * (size * size + size - 1)) * float(duration)
    return int(2 * math.ceil(mean + sigmas * math.sqrt(variance) + 16))


# The seed book of `initialise` (and `warm_up`) at its defaults: 10 levels of 3 orders a side.
_SEED_LEVELS = 10
_SEED_ORDERS_PER_LEVEL = 3
_SEED_ORDERS = _SEED_LEVELS * _SEED_ORDERS_PER_LEVEL
# A side's derived capacity is a multiple of this (16 int32 lanes of an AVX-512 register).
_CAPACITY_STEP = 16
# Above this a derived capacity is refused: the caller chooses one (see `default_capacity`).
_CAPACITY_LIMIT = 1 << 16


def default_capacity(
    params: FlowParams,
    horizon: float,
    *,
    reserved: int = 1,
    seed_orders: int = _SEED_ORDERS,
    tail: float = 1e-9,
) -> int:
    """Slots per side that the flow fills with probability at most `tail` at any time.

    The count of background orders resting on a side is bounded from the rates. Limit
    orders of a side arrive at `limit_rate` and rest on that side (they are priced off the
    opposite best, so they never cross). Each resting background order is cancelled at
    `cancel_rate` (a cancellation picks one of `n` orders at total rate `cancel_rate * n`).
    Market orders and the agents' orders only take background orders away. So at time `t`
    the count is at most `S_t + A_t`: the seed orders still resting, `S_t ~ Binomial(seed,
    exp(-c t))`, and the arrivals still resting, `A_t ~ Poisson(limit_rate (1 - exp(-c t))
    / c)` (`limit_rate t` without cancellations). The capacity is `reserved` (the agents'
    orders) plus the least `k` whose Chernoff bound `P(S_t + A_t >= k) <= tail` holds at
    every `t` of `[0, horizon]` (513 times, spread evenly and geometrically from
    `1e-6 horizon`), rounded up to a multiple of 16.

    sekai's default flow gets 64 (its fullest side in 12 x 400 time units of sekai's own
    runs: 35 orders); `cancel_rate=1.0` 48; `cancel_rate=0.1` 176 (115 seen).

    Args:
        params: Python-number parameters.
        horizon: The time the book lives, finite and > 0 (warm-up plus session).
        reserved: Slots kept for the agents' resting orders, an int >= 0.
        seed_orders: Orders per side of the seed book, an int >= 0.
        tail: The bound's probability, in (0, 1).

    Returns:
        The capacity, a Python int.

    Raises:
        ValueError: If an argument is out of range, or if the capacity would exceed 65,536
            slots (as without cancellations over a long session): pass the env a
            `capacity` of your own then (overflow is flagged in `info`).

    Example:
        >>> from parallax.finance._lob import FlowParams, default_capacity
        >>> default_capacity(FlowParams(), 320.0), default_capacity(FlowParams(cancel_rate=0.1), 320.0)
        (64, 176)
    """
    for name, value, minimum in (("reserved", reserved, 0), ("seed_orders", seed_orders, 0)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    if not (isinstance(horizon, int | float | np.number) and 0 < float(horizon) < math.inf):
        raise ValueError(f"horizon must be finite and > 0, got {horizon!r}.")
    if not (isinstance(tail, int | float | np.number) and 0 < float(tail) < 1):
        raise ValueError(f"tail must be in (0, 1), got {tail!r}.")
    lam, c = float(params.limit_rate), float(params.cancel_rate)
    # times spread evenly and, for the seed book's quick changes at the start, geometrically
    t = np.unique(
        np.concatenate([np.linspace(0.0, h := float(horizon), 257), np.geomspace(h * 1e-6, h, 257)])
    )
    survive = np.exp(-c * t)
    # the arrivals' mean, lam (1 - exp(-c t)) / c, continuous at c = 0 (lam t)
    arrivals = lam * t if c == 0 else lam * -np.expm1(-c * t) / c
    seed = float(seed_orders)

    def log_tail(k: float) -> float:
        # max over t of min over theta > 0 of log E[exp(theta N_t)] - theta k: the
        # log-MGF's derivative in theta rises, so its root (the best theta) is bisected
        def slope(theta: np.ndarray) -> np.ndarray:
            e = np.exp(theta)
            return seed * survive * e / (1.0 + survive * np.expm1(theta)) + arrivals * e - k

        lo, hi = np.zeros_like(t), np.full_like(t, 50.0)
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            up = slope(mid) > 0
            hi, lo = np.where(up, mid, hi), np.where(up, lo, mid)
        theta = 0.5 * (lo + hi)
        log_mgf = seed * np.log1p(survive * np.expm1(theta)) + arrivals * np.expm1(theta)
        return float(np.max(np.minimum(log_mgf - theta * k, 0.0)))

    # the least k with log_tail(k) <= log(tail), by bisection (log_tail falls as k rises)
    target = math.log(float(tail))
    lo_k, hi_k = 0, max(1, int(seed + arrivals.max()))
    while log_tail(hi_k) > target:
        lo_k, hi_k = hi_k, 2 * hi_k
        if hi_k > 4 * _CAPACITY_LIMIT:
            break
    while hi_k - lo_k > 1:
        mid_k = (lo_k + hi_k) // 2
        lo_k, hi_k = (lo_k, mid_k) if log_tail(mid_k) <= target else (mid_k, hi_k)
    step = _CAPACITY_STEP
    capacity = -(-(hi_k + int(reserved)) // step) * step
    if capacity > _CAPACITY_LIMIT:
        raise ValueError(
            f"the flow (limit_rate={params.limit_rate!r}, cancel_rate={params.cancel_rate!r})"
            f" may rest more than {_CAPACITY_LIMIT} orders on a side within {horizon!r} time"
            " units: pass capacity explicitly (a full side then sets info['overflow'])."
        )
    return int(capacity)
