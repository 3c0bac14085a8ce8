"""`model=` and `data=` on Trading-v0 and Portfolio-v0, against sekai 0.2.0 step by step.

- `model=`: our env with a parallax market model (or a sekai simulator, converted) equals
  sekai's env built with the same sekai model and fed our draws (`env.sekai_draws`, which
  for a model are `model.sekai_draws(episode_key, L + E)`): observations, rewards, flags
  and every info key, on every step (the tolerance rule of `finance_support`). Trading:
  Heston, Merton, RegimeSwitching, GARCH, MeanReverting, BlockBootstrap, a Randomized Heston
  family (sekai gets a factory that draws as ours does); CointegratedPair refused with
  sekai's error. Portfolio: correlated Heston/GBM/Merton/GARCH/MeanReverting,
  BlockBootstrap, CointegratedPair, three-asset RegimeSwitching (one correlated regime), a
  Randomized mixture; each from our model and from the sekai object; float32 runs finite;
- per-env model params through `make_vec` (Heston's `kappa`) equal the single envs, with
  one compilation;
- `data=` (ours and sekai's `MarketData`): fixed, date and random starts after warm-up
  rows, with the data-reading costs `SquareRootImpact` and the quoted `SpreadCost()`.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
import sekai
import sekai.finance as sf
from finance_support import rollout, run_against_sekai
from test_finance_models import build_model

import parallax
from parallax import AutoResetWrapper, rng
from parallax import finance as pf

SHORT = {"episode_length": 10, "lookback": 4}
CORR3 = [[1.0, 0.5, 0.2], [0.5, 1.0, 0.1], [0.2, 0.1, 1.0]]
TRANSITION = [[0.9, 0.1], [0.2, 0.8]]


def _regimes(lib):
    return [lib.GBM(0.1, 0.1), lib.GBM(-0.3, 0.6)]


# (sekai class name, keyword arguments); `regimes="GBMS"` is replaced by each library's GBMs
TRADING_MODELS = {
    "heston": ("Heston", {"xi": 0.9, "kappa": 1.5, "rho": -0.5, "s0": 40.0}),
    "merton": ("MertonJumpDiffusion", {"jump_intensity": 40.0, "jump_std": 0.05}),
    "regime": ("RegimeSwitching", {"regimes": "GBMS", "transition": TRANSITION}),
    "garch": ("GARCH", {"omega": 2e-5, "alpha": 0.2, "beta": 0.7}),
    "mean_reverting": ("MeanReverting", {"theta": 3.0, "mean": 90.0}),
}


def _model(lib, name, table=TRADING_MODELS):
    return build_model(lib, table[name], {"GBMS": _regimes, "GBMS3": _regimes3})


def _actions(count, n, seed):
    return np.random.default_rng(seed).integers(0, n, count).astype(np.int32)


def _weights(count, n, seed):
    return np.random.default_rng(seed).dirichlet(np.ones(n + 1), count).astype(np.float32)


# ------------------------------------------------------------------------------ model=
@pytest.mark.parametrize("name", list(TRADING_MODELS))
def test_trading_with_a_model_matches_sekai(name):
    with jax.enable_x64(True):
        ours = pf.TradingEnv(model=_model(pf, name), **SHORT)
        theirs = sekai.make("Trading-v0", model=_model(sf, name), **SHORT)
        assert ours.params.dt == theirs.dt
        for seed in (0, 1):
            key = jax.random.key(seed)
            steps = run_against_sekai(ours, theirs, key, _actions(10, 3, seed))
            assert steps == 10
        # the model moved the market: not the built-in GBM path
        plain = pf.TradingEnv(**SHORT)
        a = ours.reset(key=jax.random.key(0)).observation
        b = plain.reset(key=jax.random.key(0)).observation
        assert not np.allclose(np.asarray(a), np.asarray(b))


def test_trading_converts_a_sekai_model_and_takes_its_s0_and_dt():
    with jax.enable_x64(True):
        model = sf.Heston(xi=0.5, s0=25.0, dt=1 / 52)
        ours = pf.TradingEnv(model=model, **SHORT)
        assert isinstance(ours.params.model, pf.Heston)
        assert float(ours.params.dt) == 1 / 52
        theirs = sekai.make("Trading-v0", model=model, **SHORT)
        assert run_against_sekai(ours, theirs, jax.random.key(5), _actions(10, 3, 5)) == 10
        first = ours.reset(key=jax.random.key(5))
        assert 0.5 * 25.0 < float(first.info["price"]) < 2.0 * 25.0
        # an explicit dt= is the info's, as sekai's (the model keeps its own)
        assert float(pf.TradingEnv(model=model, dt=0.01, **SHORT).params.dt) == 0.01
    with pytest.raises(ValueError, match="one-asset model, got 3 assets"):
        pf.TradingEnv(model=pf.GBM(n_assets=3), **SHORT)


@pytest.mark.parametrize("convert", [False, True], ids=["parallax_model", "sekai_model"])
def test_portfolio_with_a_correlated_model_matches_sekai(convert):
    config = {"xi": 0.8, "rho": [-0.9, 0.0, 0.5], "corr": CORR3, "s0": [50.0, 100.0, 9.0]}
    with jax.enable_x64(True):
        model = sf.Heston(**config) if convert else pf.Heston(**config)
        ours = pf.PortfolioEnv(model=model, **SHORT)
        theirs = sekai.make("Portfolio-v0", model=sf.Heston(**config), **SHORT)
        assert ours.n_assets == theirs.n_assets == 3
        for seed in (0, 1):
            steps = run_against_sekai(ours, theirs, jax.random.key(seed), _weights(10, 3, seed))
            assert steps == 10
    with pytest.raises(ValueError, match="n_assets=2 but the model has 3 assets"):
        pf.PortfolioEnv(model=pf.Heston(corr=CORR3), n_assets=2, **SHORT)


def test_portfolio_with_a_correlated_gbm_model_matches_sekai():
    config = {"mu": 0.1, "sigma": [0.2, 0.3, 0.5], "corr": CORR3}
    with jax.enable_x64(True):
        ours = pf.PortfolioEnv(model=pf.GBM(**config), allow_short=True, **SHORT)
        theirs = sekai.make("Portfolio-v0", model=sf.GBM(**config), allow_short=True, **SHORT)
        actions = np.random.default_rng(3).uniform(-1, 1, (10, 3)).astype(np.float32)
        assert run_against_sekai(ours, theirs, jax.random.key(3), actions) == 10


def test_model_envs_run_in_float32():
    env = pf.TradingEnv(model=pf.MertonJumpDiffusion(jump_intensity=50.0), **SHORT)
    state = env.reset(key=jax.random.key(0))
    step = jax.jit(env.step)
    for t in range(12):
        state = step(state, t % 3)
    assert state.observation.dtype == jnp.float32
    assert np.all(np.isfinite(np.asarray(state.observation)))
    assert np.isfinite(float(state.info["equity"]))


def test_make_vec_with_per_env_model_params_matches_single_envs():
    n, steps = 4, 14  # past the 10-step episodes: auto-resets use the per-env params too
    kwargs = {**SHORT, "model": pf.Heston(xi=0.9)}
    vec = parallax.make_vec("Trading-v0", n, **kwargs)
    env = vec.unwrapped
    kappa = jnp.asarray([[0.5], [1.0], [4.0], [20.0]])
    params = env.params.replace(model=env.params.model.replace(kappa=kappa))
    actions = jnp.asarray(_actions(steps, 3, 7))
    chex.clear_trace_counter()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(key, params):
        first = vec.reset(key=key, params=params)

        def body(state, a):
            nxt = vec.step(state, jnp.full((n,), a), params=params)
            return nxt, nxt

        return jax.lax.scan(body, first, actions)[1]

    single_env = AutoResetWrapper(parallax.make("Trading-v0", **kwargs))

    @jax.jit
    def single(key, params):
        first = single_env.reset(key=key, params=params)

        def body(state, a):
            nxt = single_env.step(state, a, params=params)
            return nxt, nxt

        return jax.lax.scan(body, first, actions)[1]

    key = jax.random.key(11)
    states = run(key, params)
    keys = jax.random.split(key, n)
    for i in range(n):
        row = params.replace(model=params.model.replace(kappa=kappa[i]))
        want = single(keys[i], row)
        for name in ("equity", "price", "asset_return"):
            np.testing.assert_allclose(
                np.asarray(states.info[name][:, i]), np.asarray(want.info[name]), rtol=1e-6
            )
        np.testing.assert_allclose(
            np.asarray(states.observation[:, i]), np.asarray(want.observation), rtol=1e-6
        )
    prices = np.asarray(states.info["price"])
    assert not np.allclose(prices[:, 0], prices[:, 3])  # kappa changed the paths
    # other numbers, same shapes: no retrace (assert_max_traces raises on a second trace)
    again = run(jax.random.key(12), params.replace(model=params.model.replace(kappa=kappa * 2)))
    assert not np.array_equal(np.asarray(again.info["price"]), prices)


# ------------------------------------------------------------------------------- data=
T = 60
WARMUP = 9


def _frame(n_assets, seed=0):
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0.0, 0.01, (T, n_assets)), axis=0))
    volume = rng.uniform(1e3, 1e5, (T, n_assets))
    spread = rng.uniform(1e-4, 2e-3, (T, n_assets))
    return close, volume, spread, pd.bdate_range("2021-03-01", periods=T).values


def _data(lib, n_assets, seed=0):
    close, volume, spread, dates = _frame(n_assets, seed)
    if lib is sf:
        fields = {"volume": volume, "spread": spread}
        return sf.MarketData(close, fields=fields, timestamps=dates, warmup=WARMUP)
    return pf.MarketData(close, volume=volume, spread=spread, timestamps=dates, warmup=WARMUP)


COSTS = {
    "impact": lambda lib: lib.SquareRootImpact(0.8),
    "quoted_spread": lambda lib: lib.SpreadCost(),
    "both": lambda lib: lib.SpreadCost() + lib.SquareRootImpact(),
}
STARTS = [None, 25, -12, "2021-04-05"]


@pytest.mark.parametrize("cost", list(COSTS))
@pytest.mark.parametrize("ours_lib", [pf, sf], ids=["parallax_data", "sekai_data"])
def test_trading_with_data_matches_sekai(cost, ours_lib):
    with jax.enable_x64(True):
        data = _data(ours_lib, 1)
        ours = pf.TradingEnv(data=data, transaction_cost=COSTS[cost](pf), **SHORT)
        theirs = sekai.make(
            "Trading-v0", data=_data(sf, 1), transaction_cost=COSTS[cost](sf), **SHORT
        )
        assert ours.params.dt == theirs.dt
        for i, start in enumerate(STARTS):
            actions = _actions(10, 3, i)
            key = jax.random.key(i)
            steps = run_against_sekai(
                ours, theirs, key, actions, start=start, timestamps=ours.timestamps
            )
            assert steps == 10
        # random starts never decide on a warm-up row
        rows = [int(ours.reset(key=jax.random.key(s)).info["timestamp"]) for s in range(20)]
        assert min(rows) >= WARMUP and len(set(rows)) > 1


def test_trading_fixed_start_and_sequential_walk_skip_the_warmup():
    with jax.enable_x64(True):
        ours = pf.TradingEnv(data=_data(pf, 1), sampler=3, **SHORT)
        theirs = sekai.make("Trading-v0", data=_data(sf, 1), sampler=3, **SHORT)
        steps = run_against_sekai(
            ours, theirs, jax.random.key(0), _actions(10, 3, 0), timestamps=ours.timestamps
        )
        assert steps == 10
        first = ours.reset(key=jax.random.key(0))
        assert int(first.info["timestamp"]) == max(WARMUP - 4, 0) + 3 + 4
        walk = pf.TradingEnv(data=_data(pf, 1), sampler="sequential", **SHORT)
        rows = walk.sequential_starts(3)
        ref = sekai.make("Trading-v0", data=_data(sf, 1), sampler="sequential", **SHORT)
        ref_rows = [ref.reset(seed=0).info["timestamp"] for _ in range(3)]
        assert [walk.timestamps[r] for r in rows] == ref_rows
        # the walk inside the env (reset from the previous state) visits the same rows
        state = walk.reset(key=jax.random.key(0))
        seen = [int(state.info["timestamp"])]
        for i in range(2):
            state = walk.reset(key=jax.random.key(i + 1), previous=state)
            seen.append(int(state.info["timestamp"]))
        assert seen == rows.tolist() and min(seen) >= WARMUP
    with pytest.raises(ValueError, match="outside the valid range"):
        pf.TradingEnv(data=_data(pf, 1), **SHORT).reset(key=jax.random.key(0), start=5)


@pytest.mark.parametrize("cost", ["impact", "quoted_spread"])
def test_portfolio_with_data_matches_sekai(cost):
    with jax.enable_x64(True):
        ours = pf.PortfolioEnv(data=_data(pf, 3), transaction_cost=COSTS[cost](pf), **SHORT)
        theirs = sekai.make(
            "Portfolio-v0", data=_data(sf, 3), transaction_cost=COSTS[cost](sf), **SHORT
        )
        assert ours.n_assets == 3
        for i, start in enumerate(STARTS):
            steps = run_against_sekai(
                ours,
                theirs,
                jax.random.key(i),
                _weights(10, 3, i),
                start=start,
                timestamps=ours.timestamps,
            )
            assert steps == 10


def test_data_costs_need_their_fields():
    close, _, _, _ = _frame(1)
    with pytest.raises(ValueError, match="volume"):
        pf.TradingEnv(data=pf.MarketData(close), transaction_cost=pf.SquareRootImpact(), **SHORT)
    with pytest.raises(ValueError, match="spread"):
        pf.PortfolioEnv(data=pf.MarketData(close), transaction_cost=pf.SpreadCost(), **SHORT)
    with pytest.raises(ValueError, match="trades one asset"):
        pf.TradingEnv(data=_data(pf, 2), **SHORT)
    with pytest.raises(TypeError, match="pass a MarketData as data="):
        pf.TradingEnv(_data(pf, 1), **SHORT)


def test_data_envs_run_in_float32_and_under_vmap():
    env = pf.PortfolioEnv(
        data=_data(pf, 2), transaction_cost=pf.SquareRootImpact() + pf.SpreadCost(), **SHORT
    )
    keys = jax.random.split(jax.random.key(0), 3)
    states = jax.vmap(lambda k: env.reset(key=k))(keys)
    action = jnp.broadcast_to(jnp.asarray([0.5, 0.3, 0.2], jnp.float32), (3, 3))
    states = jax.jit(jax.vmap(env.step))(states, action)
    cost = np.asarray(states.info["cost"])
    assert cost.dtype == np.float32 and np.all(np.isfinite(cost)) and np.all(cost > 0)
    rows = np.asarray(states.info["timestamp"])
    assert np.all(rows >= WARMUP + 1)


# ------------------------------------------------------------ model= (every other model)
# BlockBootstrap, CointegratedPair, Randomized and multi-asset RegimeSwitching in the envs
# (issue 17): ours, built from the same arguments or converted from the sekai object, equals
# sekai's env with the sekai model, step by step.
CORR2 = [[1.0, 0.6], [0.6, 1.0]]
RETURNS1 = np.random.default_rng(4).normal(0.0003, 0.012, 9)  # short: blocks wrap around
RETURNS3 = np.random.default_rng(5).normal(0.0002, 0.015, (40, 3))
SWITCHY = [[0.7, 0.3], [0.4, 0.6]]  # both regimes within one 14-step path


def _regimes3(lib):
    s0 = [50.0, 100.0, 9.0]
    calm = lib.GBM(0.1, 0.1, n_assets=3, s0=s0)
    stressed = lib.GBM(-0.3, [0.4, 0.6, 0.5], corr=CORR3, s0=s0)
    return [calm, stressed]


PORTFOLIO_MODELS = {
    "bootstrap": (
        "BlockBootstrap",
        {"returns": RETURNS3, "block_size": 3, "s0": [20.0, 5.0, 70.0]},
    ),
    "cointegrated": ("CointegratedPair", {"theta": 20.0, "spread_sigma": 0.3, "s0": (50, 60)}),
    "regime": ("RegimeSwitching", {"regimes": "GBMS3", "transition": SWITCHY}),
    "mean_reverting": ("MeanReverting", {"theta": 3.0, "mean": [90.0, 110.0, 9.5], "corr": CORR3}),
    "garch": ("GARCH", {"omega": 2e-5, "alpha": 0.2, "beta": 0.7, "mu": 0.1, "corr": CORR3}),
    "merton": ("MertonJumpDiffusion", {"jump_intensity": [5.0, 60.0, 0.0], "corr": CORR3}),
}


def _portfolio_model(lib, name):
    return _model(lib, name, PORTFOLIO_MODELS)


@pytest.mark.parametrize("convert", [False, True], ids=["parallax_model", "sekai_model"])
@pytest.mark.parametrize("name", list(PORTFOLIO_MODELS))
def test_portfolio_with_a_model_matches_sekai(name, convert):
    with jax.enable_x64(True):
        theirs_model = _portfolio_model(sf, name)
        model = theirs_model if convert else _portfolio_model(pf, name)
        ours = pf.PortfolioEnv(model=model, **SHORT)
        assert type(ours.params.model) is type(pf.from_sekai(theirs_model))
        theirs = sekai.make("Portfolio-v0", model=theirs_model, **SHORT)
        assert ours.n_assets == theirs.n_assets == theirs_model.n_assets
        assert float(ours.params.dt) == theirs.dt
        for seed in (0, 1):
            actions = _weights(10, ours.n_assets, seed)
            assert run_against_sekai(ours, theirs, jax.random.key(seed), actions) == 10
        if name == "regime" and not convert:
            # the compared episodes visit both regimes (the correlated one included)
            window = SHORT["lookback"] + SHORT["episode_length"]
            seen = set()
            for seed in (0, 1):
                ek = rng.episode_key(jax.random.key(seed))
                regime = ours.params.model.simulate(ek, window).state["regime"]
                seen |= set(np.asarray(regime).astype(int).tolist())
            assert seen == {0, 1}


@pytest.mark.parametrize("convert", [False, True], ids=["parallax_model", "sekai_model"])
def test_trading_with_a_block_bootstrap_matches_sekai(convert):
    config = {"returns": RETURNS1, "block_size": 3, "s0": 30.0}
    with jax.enable_x64(True):
        model = sf.BlockBootstrap(**config) if convert else pf.BlockBootstrap(**config)
        ours = pf.TradingEnv(model=model, **SHORT)
        assert isinstance(ours.params.model, pf.BlockBootstrap)
        theirs = sekai.make("Trading-v0", model=sf.BlockBootstrap(**config), **SHORT)
        wrapped = False
        for seed in (0, 1):
            key = jax.random.key(seed)
            assert run_against_sekai(ours, theirs, key, _actions(10, 3, seed)) == 10
            starts = ours.sekai_draws(key)[0][2]  # sekai's block starts for this episode
            wrapped |= bool(np.any(starts > len(RETURNS1) - 3))
        assert wrapped  # a block ran past the last row and wrapped to the first
        # every return of the episode is a row of the history
        first = ours.reset(key=jax.random.key(0))
        state, returns = first, []
        for t in range(10):
            state = ours.step(state, t % 3)
            returns.append(float(state.info["asset_return"]))
        logs = np.log1p(np.asarray(returns))
        assert np.all(np.min(np.abs(logs[:, None] - RETURNS1[None, :]), axis=1) < 1e-12)


@pytest.mark.parametrize("lib", [pf, sf], ids=["parallax_model", "sekai_model"])
def test_trading_refuses_a_cointegrated_pair_as_sekai_does(lib):
    message = "TradingEnv needs a one-asset model, got 2 assets"
    with pytest.raises(ValueError, match=message):
        sekai.make("Trading-v0", model=sf.CointegratedPair(), **SHORT)
    with pytest.raises(ValueError, match=message):
        pf.TradingEnv(model=lib.CointegratedPair(), **SHORT)
    with pytest.raises(ValueError, match=message):
        parallax.make("Trading-v0", model=lib.CointegratedPair(), **SHORT)


# Randomized: sekai's `Randomized(factory)` takes Python; a factory that draws as ours does
# (one `random()` for the choice by sekai's categorical rule, then one per range, in order)
# gives sekai our episode.
HESTON_RANGES = {"xi": (0.3, 1.2), "kappa": (0.5, 4.0)}
MIXED_PROBS = [0.3, 0.3, 0.4]
MIXED_RANGES = [{"mu": (-0.2, 0.2), "sigma": (0.1, 0.5)}, {"theta": (1.0, 10.0)}, None]


def _between(r, bounds):
    low, high = bounds
    return low + (high - low) * r.random()


def _heston_family(lib):
    return lib.Heston(s0=40.0, rho=-0.6)


def _heston_factory(r):
    r.random()  # the choice among one model
    xi = _between(r, HESTON_RANGES["xi"])
    kappa = _between(r, HESTON_RANGES["kappa"])
    return sf.Heston(xi=xi, kappa=kappa, s0=40.0, rho=-0.6)


def _mixed_members(lib):
    return [
        lib.GBM(n_assets=2, corr=CORR2),
        lib.MeanReverting(mean=[90.0, 110.0], n_assets=2),
        lib.BlockBootstrap(RETURNS3[:, :2], block_size=3),
    ]


def _mixed_factory(chosen):
    def factory(r):
        u = r.random()
        c = min(int(np.sum(u >= np.cumsum(MIXED_PROBS))), len(MIXED_PROBS) - 1)
        chosen.append(c)
        if c == 0:
            mu = _between(r, MIXED_RANGES[0]["mu"])
            sigma = _between(r, MIXED_RANGES[0]["sigma"])
            return sf.GBM(mu, sigma, n_assets=2, corr=CORR2)
        if c == 1:
            theta = _between(r, MIXED_RANGES[1]["theta"])
            return sf.MeanReverting(theta, mean=[90.0, 110.0], n_assets=2)
        return _mixed_members(sf)[2]

    return factory


@pytest.mark.parametrize("lib", [pf, sf], ids=["parallax_models", "sekai_models"])
def test_trading_with_a_randomized_family_matches_sekai(lib):
    with jax.enable_x64(True):
        model = pf.Randomized(_heston_family(lib), HESTON_RANGES)
        ours = pf.TradingEnv(model=model, **SHORT)
        assert all(isinstance(m, pf.Heston) for m in ours.params.model.models)
        theirs = sekai.make("Trading-v0", model=sf.Randomized(_heston_factory), **SHORT)
        assert float(ours.params.dt) == theirs.dt
        for seed in (0, 1):
            key = jax.random.key(seed)
            assert run_against_sekai(ours, theirs, key, _actions(10, 3, seed)) == 10
        # the episodes drew different parameters
        xi = [float(model.draw(rng.episode_key(jax.random.key(s)))[1][0].xi[0]) for s in (0, 1)]
        assert xi[0] != xi[1] and all(0.3 <= x <= 1.2 for x in xi)
    with pytest.raises(TypeError, match="Randomized"):
        pf.TradingEnv(model=sf.Randomized(_heston_factory), **SHORT)


@pytest.mark.parametrize("lib", [pf, sf], ids=["parallax_models", "sekai_models"])
def test_portfolio_with_a_randomized_mixture_matches_sekai(lib):
    with jax.enable_x64(True):
        model = pf.Randomized(_mixed_members(lib), MIXED_RANGES, probs=MIXED_PROBS)
        ours = pf.PortfolioEnv(model=model, **SHORT)
        assert ours.n_assets == 2
        chosen: list[int] = []
        theirs = sekai.make("Portfolio-v0", model=sf.Randomized(_mixed_factory(chosen)), **SHORT)
        chosen.clear()  # sekai's Randomized built its reference model
        for seed in range(4):
            key = jax.random.key(seed)
            assert run_against_sekai(ours, theirs, key, _weights(10, 2, seed)) == 10
        assert set(chosen) == {0, 1, 2}, chosen  # every member was compared


FLOAT32_MODELS = {
    "trading_bootstrap": lambda: pf.TradingEnv(
        model=pf.BlockBootstrap(RETURNS1, block_size=3), **SHORT
    ),
    "trading_randomized": lambda: pf.TradingEnv(
        model=pf.Randomized(_heston_family(pf), HESTON_RANGES), **SHORT
    ),
    "portfolio_cointegrated": lambda: pf.PortfolioEnv(model=pf.CointegratedPair(), **SHORT),
    "portfolio_regime": lambda: pf.PortfolioEnv(
        model=pf.RegimeSwitching(_regimes3(pf), SWITCHY), **SHORT
    ),
    "portfolio_randomized": lambda: pf.PortfolioEnv(
        model=pf.Randomized(_mixed_members(pf), MIXED_RANGES, probs=MIXED_PROBS), **SHORT
    ),
}


@pytest.mark.parametrize("name", list(FLOAT32_MODELS))
def test_more_model_envs_run_in_float32(name):
    env = FLOAT32_MODELS[name]()
    n = getattr(env, "n_assets", 1)
    portfolio = isinstance(env, pf.PortfolioEnv)
    actions = _weights(10, n, 0) if portfolio else _actions(10, 3, 0)
    first, states = rollout(env, jax.random.key(0), actions)
    leaves = jax.tree.leaves((first.observation, states.observation))
    assert leaves
    for leaf in leaves:
        assert np.asarray(leaf).dtype == np.float32
        assert np.all(np.isfinite(np.asarray(leaf)))
    equity = np.asarray(states.info["equity"])
    assert equity.dtype == np.float32 and np.all(np.isfinite(equity)) and np.all(equity > 0)
    assert bool(states.truncation[-1]) or bool(states.termination[-1])
