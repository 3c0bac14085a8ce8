"""The data-reading cost models (`SquareRootImpact`, quoted `SpreadCost()`) against sekai 0.2.0.

Random fills (trade sizes, equity, volatilities, volumes, spreads, with missing, negative and
zero entries) are priced by our JAX models and by sekai's numpy models; float64 results agree
to the last ulp, float32 ones to float32 rounding. Where sekai raises (a traded row without any
valid input and no fallback) our cost is NaN.
"""

from __future__ import annotations

import doctest
import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sekai.finance as sf
from hypothesis import example, given, settings
from hypothesis import strategies as st

from parallax import finance as pf


def _fills(seed, batch=64, n=4):
    """Random fills: trades (some zero), equity, volatility, volume (currency), spread."""
    rng = np.random.default_rng(seed)
    trades = rng.normal(0.0, 0.3, (batch, n))
    trades[rng.random((batch, n)) < 0.25] = 0.0
    equity = rng.uniform(1e4, 1e7, batch)
    volatility = rng.uniform(0.0, 0.05, (batch, n))
    volatility[rng.random((batch, n)) < 0.2] = np.nan
    volatility[rng.random((batch, n)) < 0.05] = -0.01
    volume = rng.uniform(0.0, 1e7, (batch, n))
    volume[rng.random((batch, n)) < 0.15] = 0.0
    volume[rng.random((batch, n)) < 0.1] = np.nan
    spread = rng.uniform(0.0, 1e-2, (batch, n))
    spread[rng.random((batch, n)) < 0.25] = np.nan
    spread[rng.random((batch, n)) < 0.1] = -1e-3
    spread[rng.random((batch, n)) < 0.05] = 0.0
    # a few rows where no asset has a valid input
    spread[:3] = np.nan
    volatility[3:6] = np.nan
    return trades, equity, volatility, volume, spread


def _sekai_rows(model, trades, equity, volatility, volume, spread):
    """sekai's cost row by row; NaN where sekai raises (a traded row it cannot price)."""
    out = []
    for i in range(trades.shape[0]):
        try:
            value = model(
                trades[i],
                equity=equity[i],
                volatility=volatility[i],
                volume=volume[i],
                spread=spread[i],
            )
        except ValueError as error:
            assert "no valid" in str(error)
            value = np.nan
        out.append(float(value))
    return np.array(out)


SEKAI_MODELS = [
    sf.SquareRootImpact(),
    sf.SquareRootImpact(0.8, fallback_volatility=0.01),
    sf.SpreadCost(),
    sf.SpreadCost(fallback_spread=2e-3),
    sf.SpreadCost() + sf.SquareRootImpact(0.3) + sf.FixedCost(5.0),
    sf.ProportionalCost([1e-3, 2e-3, 0.0, 5e-4]) + sf.SpreadCost(fallback_spread=1e-3),
]


@pytest.mark.parametrize("model", SEKAI_MODELS, ids=repr)
def test_costs_match_sekai_on_random_fills(model, x64):
    ours = pf.as_cost_model(model, fields={"volume", "spread"})
    assert repr(ours) == repr(model)
    assert ours.requires == model.requires
    assert ours.fallbacks == model.fallbacks
    dtype = np.float64 if x64 else np.float32
    price = jax.jit(lambda t, e, vol, v, s: ours(t, equity=e, volatility=vol, volume=v, spread=s))
    for seed in range(3):
        fills = [x.astype(dtype) for x in _fills(seed)]
        ref = _sekai_rows(model, *[x.astype(np.float64) for x in fills])
        got = np.asarray(price(*fills))
        assert got.dtype == dtype
        assert np.array_equal(np.isnan(got), np.isnan(ref)), (got, ref)
        if x64:  # the spec's float64 rule (XLA may contract a multiply-add: last-ulp)
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)
        else:
            np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-12)
        # the fills exercised every branch: unpriced rows, illiquid and free assets
        filled = model.requires & {"volatility", "spread"}
        assert np.isnan(ref).any() == bool(filled - model.fallbacks)


def test_zero_and_missing_volume_cost_the_whole_trade_as_sekai(x64):
    trades = np.array([[0.2, -0.1, 0.05, 0.0]])
    volume = np.array([[0.0, np.nan, -5.0, 0.0]])
    volatility = np.full((1, 4), 0.02)
    ours = pf.SquareRootImpact(0.5)(trades, equity=1e6, volatility=volatility, volume=volume)
    theirs = sf.SquareRootImpact(0.5)(trades, equity=1e6, volatility=volatility, volume=volume)
    assert float(ours[0]) == pytest.approx(0.35, rel=1e-6)  # min(unit=1, 1) * |t| summed
    assert float(ours[0]) == pytest.approx(float(theirs[0]), rel=1e-6)


def test_impact_grows_as_the_trade_to_the_power_three_halves():
    impact = pf.SquareRootImpact(0.5)
    with jax.enable_x64(True):
        sizes = jnp.array([[0.01], [0.04]])
        cost = impact(sizes, equity=jnp.full(2, 1e6), volatility=0.02, volume=1e8)
        assert float(cost[1] / cost[0]) == pytest.approx(8.0)


def test_unpriceable_rows_are_nan_only_when_traded():
    spread = jnp.array([jnp.nan, -1.0])
    quoted = pf.SpreadCost()
    assert np.isnan(float(quoted(jnp.array([0.1, 0.0]), equity=1.0, spread=spread)))
    assert float(quoted(jnp.array([0.0, 0.0]), equity=1.0, spread=spread)) == 0.0
    fallback = pf.SpreadCost(fallback_spread=4e-3)
    assert float(fallback(jnp.array([0.5, 0.0]), equity=1.0, spread=spread)) == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="no valid 'spread'"):
        sf.SpreadCost()(np.array([0.1, 0.0]), spread=np.array([np.nan, -1.0]))
    impact = pf.SquareRootImpact()
    vol = jnp.array([jnp.nan, jnp.nan])
    # sekai raises even when the traded asset is illiquid (the fill comes first): NaN too
    cost = impact(jnp.array([0.1, 0.0]), equity=1e6, volatility=vol, volume=jnp.zeros(2))
    assert np.isnan(float(cost))


def test_fill_from_median_uses_numpys_median():
    values = np.array([[3.0, np.nan, 1.0, 2.0, -1.0], [4.0, 1.0, np.inf, 2.0, 8.0]])
    with jax.enable_x64(True):
        filled, missing = pf.fill_from_median(values)
    assert filled.tolist() == [[3.0, 2.0, 1.0, 2.0, 2.0], [4.0, 1.0, 3.0, 2.0, 8.0]]
    assert missing.tolist() == [False, False]
    filled, missing = pf.fill_from_median(jnp.array([jnp.nan, -2.0]), fallback=0.5)
    assert filled.tolist() == [0.5, 0.5] and bool(missing)


def test_missing_context_inputs_are_named():
    with pytest.raises(ValueError, match="SpreadCost\\(\\) needs spread="):
        pf.SpreadCost()(jnp.array([0.1]), equity=1.0)
    with pytest.raises(ValueError, match="SquareRootImpact needs volume="):
        pf.SquareRootImpact()(jnp.array([0.1]), equity=1.0, volatility=jnp.array([0.01]))


BAD_PARAMETERS = [
    ("SquareRootImpact", (-0.1,), {}),
    ("SquareRootImpact", (np.nan,), {}),
    ("SquareRootImpact", ([0.1, 0.2],), {}),
    ("SquareRootImpact", (), {"fallback_volatility": -1.0}),
    ("SquareRootImpact", (), {"fallback_volatility": [0.1]}),
    ("SpreadCost", (), {"fallback_spread": np.inf}),
    ("SpreadCost", (1e-3,), {"fallback_spread": 1e-3}),
    ("SpreadCost", (-1e-3,), {}),
]


@pytest.mark.parametrize(("name", "args", "kwargs"), BAD_PARAMETERS)
def test_parameters_are_checked_with_sekais_error_types(name, args, kwargs):
    with pytest.raises((ValueError, TypeError)) as want:
        getattr(sf, name)(*args, **kwargs)
    word = next(iter(kwargs), "coefficient" if name == "SquareRootImpact" else "half_spread")
    with pytest.raises(want.type, match=word):
        getattr(pf, name)(*args, **kwargs)


def test_data_costs_need_the_fields_and_a_volatility_estimate():
    for model in (sf.SpreadCost(), pf.SpreadCost()):
        with pytest.raises(ValueError, match="'spread' data field"):
            pf.as_cost_model(model)
        assert pf.as_cost_model(model, fields={"close", "spread"}).quoted
    with pytest.raises(ValueError, match="'volume' data field"):
        pf.as_cost_model(pf.SquareRootImpact() + pf.ProportionalCost(1e-3), fields={"spread"})
    with pytest.raises(ValueError, match="lookback=1"):
        pf.as_cost_model(sf.SquareRootImpact(), fields={"volume"}, lookback=1)
    ours = pf.as_cost_model(sf.SquareRootImpact(0.2, fallback_volatility=0.03), fields={"volume"})
    assert ours == pf.SquareRootImpact(0.2, fallback_volatility=0.03)
    # price arrays keep refusing them in the envs
    with pytest.raises(ValueError, match="volume"):
        pf.TradingEnv(np.linspace(100.0, 120.0, 40), transaction_cost=pf.SquareRootImpact())


def test_cost_models_are_pytrees_for_domain_randomisation():
    trades = jnp.array([0.3, -0.2])
    volume = jnp.array([1e6, 4e6])

    def price(model):
        return model(trades, equity=1e6, volatility=jnp.array([0.01, 0.02]), volume=volume)

    pair = (pf.SquareRootImpact(0.1), pf.SquareRootImpact(0.2))
    models = jax.tree.map(lambda *x: jnp.stack([jnp.asarray(v) for v in x]), *pair)
    batched = jax.vmap(price)(models)
    assert batched.shape == (2,)
    assert float(batched[1]) == pytest.approx(2 * float(batched[0]), rel=1e-6)
    grad = jax.grad(lambda t: pf.SpreadCost()(t, equity=1.0, spread=jnp.array([2e-3, 4e-3])))
    assert grad(trades).tolist() == pytest.approx([1e-3, -2e-3])


_INPUT = st.one_of(
    st.floats(0.0, 1e9, allow_nan=False, width=32), st.sampled_from([np.nan, -1.0, 0.0])
)


# a fill whose traded value over the volume overflows float32 (the smallest normal volume)
_OVERFLOW = {
    "trades": [0.0, 0.0, 2.0],
    "equity": 2.0,
    "volume": [0.0, 0.0, 1.1754943508222875e-38],
    "spread": [0.0, 0.0, 0.0],
}


@settings(max_examples=40, deadline=None)
@given(
    trades=st.lists(st.floats(-3.0, 3.0, width=32), min_size=3, max_size=3),
    equity=st.floats(0.0, 1e9, width=32),
    volatility=st.lists(_INPUT, min_size=3, max_size=3),
    volume=st.lists(_INPUT, min_size=3, max_size=3),
    spread=st.lists(_INPUT, min_size=3, max_size=3),
    coefficient=st.floats(0.0, 2.0, width=32),
)
# found by a randomised run: q / V = 2 * 2 / 1.2e-38 overflowed float32, and 0 * inf gave NaN
@example(**_OVERFLOW, volatility=[0.0, 0.0, 0.0], coefficient=0.0)
@example(**_OVERFLOW, volatility=[0.01, 0.01, 0.01], coefficient=0.5)  # a unit cost of 1
def test_float32_costs_are_finite_non_negative_and_sekais(
    trades, equity, volatility, volume, spread, coefficient
):
    """Any fill with a fallback for every filled input: a finite cost >= 0, sekai's."""
    theirs = sf.SquareRootImpact(coefficient, fallback_volatility=0.01) + sf.SpreadCost(
        fallback_spread=1e-3
    )
    ours = pf.as_cost_model(theirs, fields={"volume", "spread"})
    inputs = {
        "equity": np.float32(equity),
        "volatility": np.array(volatility, np.float32),
        "volume": np.array(volume, np.float32),
        "spread": np.array(spread, np.float32),
    }
    t = np.array(trades, np.float32)
    got = float(ours(t, **inputs))
    want = float(theirs(t.astype(np.float64), **{k: np.float64(v) for k, v in inputs.items()}))
    assert np.isfinite(got) and got >= 0.0
    assert got == pytest.approx(want, rel=2e-5, abs=1e-30)


@pytest.mark.parametrize(
    "name",
    [
        "parallax.finance._costs",
        "parallax.finance._costs_convert",
        "parallax.finance._costs_numerics",
        "parallax.finance._data",
        "parallax.finance._data_inputs",
    ],
)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
