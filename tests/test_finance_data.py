"""`MarketData`, `Time` and `market_inputs` against sekai 0.2.0's `sekai.finance.data`.

Construction (arrays, pandas, date strings, numeric timestamps), validation error types,
row lookups, splits and warm-up offsets are compared with sekai's own objects; a Trading-v0
built from `market_inputs(data).prices` today equals sekai's env built with `data=`, and the
cost inputs of a row (`context_at`) are the ones sekai's env hands its cost model.
"""

from __future__ import annotations

import datetime

import jax
import numpy as np
import pandas as pd
import pytest
import sekai
import sekai.finance as sf
from finance_support import run_against_sekai
from sekai.finance import sampling

from parallax import finance as pf

SHORT = {"episode_length": 12, "lookback": 4}


def _closes(rows, n=1, seed=0):
    steps = np.random.default_rng(seed).normal(0.0, 0.01, (rows, n))
    return 100 * np.exp(np.cumsum(steps, axis=0))


def _frame(rows, n=2, seed=0):
    index = pd.bdate_range("2021-01-04", periods=rows)
    return pd.DataFrame(_closes(rows, n, seed), index=index, columns=[f"X{i}" for i in range(n)])


def _same(ours, theirs):
    """Our MarketData holds what sekai's does."""
    assert ours.n_steps == theirs.n_steps and ours.n_assets == theirs.n_assets
    assert ours.assets == theirs.assets
    assert ours.warmup == theirs.warmup
    assert ours.is_datetime == theirs.is_datetime
    assert np.array_equal(ours.timestamps, theirs.timestamps)
    assert sorted(ours.fields) == sorted(theirs.fields)
    for name, values in theirs.fields.items():
        assert np.array_equal(ours.field(name), values, equal_nan=True), name
    assert ours.periods_per_year == theirs.periods_per_year
    assert repr(ours) == repr(theirs)


# ------------------------------------------------------------------------- construction
def test_arrays_with_date_strings_match_sekai():
    closes = _closes(6, 2)
    dates = ["2024-01-02", "2024-01-03", "2024-01-05", "2024-01-08", "2024-01-09", "2024-01-10"]
    volume = np.where(np.arange(12).reshape(6, 2) == 3, np.nan, 1e5)
    ours = pf.MarketData(closes, volume=volume, timestamps=dates, assets=["a", "b"])
    theirs = sf.MarketData(closes, fields={"volume": volume}, timestamps=dates, assets=["a", "b"])
    _same(ours, theirs)
    assert ours.volume is not None and ours.spread is None
    assert ours.close.shape == (6, 2) and not ours.close.flags.writeable


def test_pandas_input_is_aligned_as_sekais_from_pandas():
    prices = _frame(30)
    volume = (prices * 1000).iloc[3:, ::-1]  # fewer rows, columns in another order
    spread = pd.DataFrame(2e-4, index=prices.index, columns=prices.columns)
    ours = pf.MarketData(prices, volume=volume, spread=spread)
    theirs = sf.MarketData.from_pandas(prices, fields={"volume": volume, "spread": spread})
    _same(ours, theirs)
    assert np.isnan(ours.volume[:3]).all() and ours.volume[3, 0] == 1000 * prices.iloc[3, 0]
    series = prices["X1"]
    one = pf.MarketData(series, volume=series * 10)
    _same(
        one, sf.MarketData.from_pandas(series.to_frame(), fields={"volume": series.to_frame() * 10})
    )
    # pandas without dates: rows are numbered, as sekai numbers them
    plain = pf.MarketData(series.reset_index(drop=True))
    assert plain.timestamps.tolist() == list(range(30)) and not plain.is_datetime


def test_numeric_timestamps_and_from_sekai():
    closes = _closes(40)
    epochs = 1_700_000_000 + 60 * np.arange(40)
    theirs = sf.MarketData(closes, timestamps=epochs, fields={"spread": np.full((40, 1), 1e-4)})
    ours = pf.MarketData.from_sekai(theirs)
    _same(ours, theirs)
    assert ours.periods_per_year is None
    for when in (5, -3, pf.Time(1_700_000_125), sf.Time(1_700_000_125), 1_700_000_130.5):
        value = when.value if isinstance(when, pf.Time) else when
        assert ours.index_of(when) == theirs.index_of(
            sf.Time(value) if isinstance(when, pf.Time) else value
        )
    with pytest.raises(TypeError, match="sekai MarketData"):
        pf.MarketData.from_sekai(ours)


def _bad_inputs():
    closes = _closes(10)
    tz = pd.date_range("2024-01-01", periods=10, tz="UTC")
    return [
        ({"prices": np.ones((10, 1, 1))}, "prices must be 2-D"),
        (
            {"prices": np.where(np.arange(10) == 2, np.inf, closes[:, 0])},
            "prices contains infinite",
        ),
        ({"prices": -closes}, "prices must be > 0"),
        ({"prices": closes[:1]}, "at least 2 rows"),
        ({"prices": None}, "needs prices"),
        ({"prices": closes, "fields": {"volume": np.ones((9, 1))}}, "'volume' has shape"),
        ({"prices": closes, "fields": {"spread": np.full((10, 1), -np.inf)}}, "spread contains"),
        ({"prices": closes, "timestamps": np.arange(10)[::-1]}, "strictly increasing"),
        ({"prices": closes, "timestamps": np.arange(9)}, "timestamps has shape"),
        ({"prices": closes, "timestamps": np.full(10, True)}, "timestamps must be"),
        ({"prices": closes, "timestamps": [*["2024-01-01"] * 9, "NaT"]}, "timestamps"),
        ({"prices": closes, "timestamps": tz}, "timezone-aware"),
        ({"prices": closes, "timestamps": np.where(np.arange(10) == 4, np.nan, 1.0)}, "finite"),
        ({"prices": closes, "assets": ["a", "b"]}, "assets has 2 ids"),
        ({"prices": _closes(10, 2), "assets": ["a", "a"]}, "assets must be unique"),
        ({"prices": closes, "warmup": True}, "warmup must be an int"),
        ({"prices": closes, "warmup": 1.5}, "warmup must be an int"),
        ({"prices": closes, "warmup": 11}, r"warmup must be in \[0, 10\]"),
    ]


@pytest.mark.parametrize(("kwargs", "message"), _bad_inputs())
def test_validation_raises_sekais_error_types_naming_the_argument(kwargs, message):
    with pytest.raises((ValueError, TypeError)) as want:
        sf.MarketData(**kwargs)
    ours = dict(kwargs)
    ours.update(ours.pop("fields", {}))  # our volume= / spread= are sekai's fields
    with pytest.raises(want.type, match=message):
        pf.MarketData(**ours)


def test_row_lookups_match_sekai():
    frame = _frame(60, 1)
    ours, theirs = pf.MarketData(frame), sf.MarketData.from_pandas(frame)
    whens = [
        0,
        17,
        -1,
        np.int64(-5),
        "2021-02-01",
        "2021-01-30",
        np.datetime64("2021-03-01"),
        datetime.date(2021, 2, 10),
        pd.Timestamp("2021-02-15 12:00"),
        sf.Time("2021-02-03"),
    ]
    for when in whens:
        assert ours.index_of(when) == theirs.index_of(when), when
    assert ours.index_of(pf.Time("2021-02-03")) == theirs.index_of("2021-02-03")
    for bad in (True, 3.5, "not a date", "2021-02-01T00:00+02:00", np.datetime64("NaT")):
        with pytest.raises((ValueError, TypeError)) as want:
            theirs.index_of(bad)
        with pytest.raises(want.type):
            ours.index_of(bad)
    with pytest.raises(TypeError, match="Time takes"):
        pf.Time([1, 2])


def test_splits_keep_sekais_warmup_rows():
    frame = _frame(120, 2)
    ours, theirs = pf.MarketData(frame), sf.MarketData.from_pandas(frame)
    for args, kwargs in (
        ((0.5,), {}),
        ((0.6, 0.8), {"embargo": 3, "history": 10}),
        (("2021-04-01",), {"history": 30}),
        ((70,), {"history": 100}),
    ):
        parts, expected = ours.split(*args, **kwargs), theirs.split(*args, **kwargs)
        assert len(parts) == len(expected)
        for part, want in zip(parts, expected, strict=True):
            _same(part, want)
            _same(pf.MarketData.from_sekai(want), want)
    _same(ours.split(0.5, history=8)[1][3:], theirs.split(0.5, history=8)[1][3:])
    for args, kwargs in (((1.5,), {}), ((80, 40), {}), ((0.5,), {"embargo": -1}), ((), {})):
        with pytest.raises(ValueError):
            theirs.split(*args, **kwargs)
        with pytest.raises(ValueError):
            ours.split(*args, **kwargs)


# ------------------------------------------------------------------- warm-up and starts
@pytest.mark.parametrize(("lookback", "warmup"), [(4, 0), (4, 3), (4, 10), (1, 25)])
def test_starts_follow_sekais_warmup_offsets(lookback, warmup):
    data = pf.MarketData(_frame(60, 1), warmup=warmup)
    inputs = pf.market_inputs(data, lookback=lookback, episode_length=12, one_asset=True)
    assert inputs.first_start == sampling.first_start(lookback, warmup)
    assert inputs.n_starts == 60 - (lookback + 12 + 1) + 1
    rng = np.random.default_rng(0)
    for position in (0, inputs.n_valid - 1):
        expected = sampling.sample_start(
            sf.FixedStart(position),
            rng,
            n_starts=inputs.n_starts,
            episode_length=12,
            lookback=lookback,
            warmup=warmup,
        )
        assert inputs.window_start(position) == expected
    with pytest.raises(ValueError, match="outside the"):
        inputs.window_start(inputs.n_valid)
    stamps = data.timestamps
    for start in (lookback, warmup, 30, -14, "2021-02-01", sf.Time("2021-02-01"), -1, 3):
        try:
            window = sampling.resolve_start(
                start,
                timestamps=stamps,
                lookback=lookback,
                n_starts=inputs.n_starts,
                warmup=warmup,
            )
        except ValueError:
            with pytest.raises(ValueError, match="valid range"):
                inputs.decision_row(start)
            continue
        assert inputs.decision_row(start) == window + lookback
    with pytest.raises(TypeError):
        inputs.decision_row(True)


def test_market_inputs_refuse_what_sekais_envs_refuse():
    good = pf.MarketData(_closes(40))
    cases = [
        (pf.MarketData(_closes(10)), "at least 17"),
        (pf.MarketData(np.where(np.arange(40)[:, None] == 5, np.nan, _closes(40))), "complete"),
        (pf.MarketData(_closes(40, 2)), "one asset"),
        (pf.MarketData(_closes(40), warmup=38), "no episode fits"),
    ]
    for data, message in cases:
        theirs = sf.MarketData(data.close, warmup=data.warmup)
        with pytest.raises(ValueError):
            sekai.make("Trading-v0", data=theirs, **SHORT).reset(seed=0)
        with pytest.raises(ValueError, match=message):
            pf.market_inputs(data, one_asset=True, **SHORT)
    with pytest.raises(TypeError, match="MarketData"):
        pf.market_inputs(good.close, **SHORT)
    assert pf.market_inputs(sf.MarketData(_closes(40)), **SHORT).prices.shape == (40, 1)


# ---------------------------------------------------------------- against sekai's envs
def _test_period():
    """A dated single-asset test split with warm-up rows, volume and quoted spreads."""
    frame = _frame(140, 1, seed=4)
    rng = np.random.default_rng(5)
    volume = pd.DataFrame(rng.uniform(1e3, 1e5, (140, 1)), index=frame.index, columns=frame.columns)
    volume.iloc[[60, 75, 90]] = [[0.0], [np.nan], [0.0]]
    spread = pd.DataFrame(rng.uniform(0, 2e-3, (140, 1)), index=frame.index, columns=frame.columns)
    spread.iloc[[70, 80, 95]] = [[np.nan], [-1.0], [np.nan]]
    theirs = sf.MarketData.from_pandas(frame, fields={"volume": volume, "spread": spread})
    return theirs.split(0.4, history=9)[1]


def test_trading_on_market_inputs_equals_sekai_with_data():
    theirs_data = _test_period()
    data = pf.MarketData.from_sekai(theirs_data)
    inputs = pf.market_inputs(data, one_asset=True, **SHORT)
    assert inputs.first_start == 5 and inputs.dt is not None
    actions = np.random.default_rng(1).integers(0, 3, 12).astype(np.int32)
    with jax.enable_x64(True):
        for position in (0, 17):
            env = pf.TradingEnv(
                inputs.prices,
                dt=inputs.dt,
                sampler=inputs.window_start(position),
                transaction_cost=2e-3,
                **SHORT,
            )
            theirs = sekai.make(
                "Trading-v0", data=theirs_data, sampler=position, transaction_cost=2e-3, **SHORT
            )
            assert float(env.params.dt) == theirs.dt
            steps = run_against_sekai(
                env, theirs, jax.random.key(0), actions, timestamps=inputs.timestamps
            )
            assert steps == 12
        # a dated start, resolved on the host: the same decision row as sekai's
        row = inputs.decision_row("2021-06-01")
        first = theirs.reset(options={"start": "2021-06-01"}).info["timestamp"]
        assert inputs.timestamp(row) == first
        assert (
            run_against_sekai(
                env, theirs, jax.random.key(2), actions, start=row, timestamps=inputs.timestamps
            )
            == 12
        )
        with pytest.raises(ValueError, match="warm-up"):
            inputs.decision_row(int(inputs.warmup) - 1)


class _Recorder(sf.CostModel):
    """A sekai cost model that records every call's trades and context."""

    def __init__(self, inner, calls):
        self.inner, self.calls = inner, calls
        self.requires, self.fallbacks = inner.requires, inner.fallbacks

    def __call__(self, trades, **context):
        cost = self.inner(trades, **context)
        self.calls.append((np.array(trades), dict(context), float(cost)))
        return cost


def test_row_context_is_what_sekais_env_gives_its_costs(x64):
    theirs_data = _test_period()
    data = pf.MarketData.from_sekai(theirs_data)
    inputs = pf.market_inputs(data, one_asset=True, **SHORT)
    sekai_cost = sf.SpreadCost(fallback_spread=1e-3) + sf.SquareRootImpact(0.5) + sf.FixedCost(1.0)
    ours = pf.as_cost_model(sekai_cost, fields=inputs.fields, lookback=SHORT["lookback"])
    dtype = np.float64 if x64 else np.float32
    rows = set()
    for position in (3, 10):
        calls = []
        env = sekai.make(
            "Trading-v0",
            data=theirs_data,
            sampler=position,
            transaction_cost=_Recorder(sekai_cost, calls),
            capital=1e5,
            **SHORT,
        )
        env.reset(seed=0)
        for action in np.random.default_rng(position).integers(0, 3, 12):
            if env.step(int(action)).terminated:  # a trade on a row without volume
                break
        start = inputs.window_start(position)
        for t, (trades, context, cost) in enumerate(calls):
            row = start + SHORT["lookback"] + t
            rows.add(row)
            at = jax.jit(inputs.context_at, static_argnums=1)(row, dtype)
            for name in ("volume", "spread"):
                assert np.allclose(at[name], context[name], rtol=1e-6, equal_nan=True), name
            window = np.diff(np.log(inputs.prices[row - SHORT["lookback"] : row + 1]))
            assert np.allclose(window.std(), context["volatility"], rtol=1e-12, atol=0)
            got = ours(
                trades.astype(dtype),
                equity=context["equity"],
                volatility=context["volatility"],
                **at,
            )
            assert float(got) == pytest.approx(cost, rel=1e-12 if x64 else 2e-5, abs=1e-15)
    # the episodes crossed a zero volume (full-frame row 60), a missing spread (70) and a
    # missing volume (75); the test split starts at full-frame row 47
    # the zero and the missing volume ended each episode (a wipe-out, cost >= 1)
    assert {60 - 47, 70 - 47, 75 - 47} <= rows and max(rows) == 75 - 47, sorted(rows)
