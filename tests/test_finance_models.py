"""Market models (`parallax.finance.GBM`, `Heston`, ...) against sekai 0.2.0's simulators.

- shared draws: sekai's simulator, fed our draws through `ReplayGenerator`, computes our
  path (prices and state series) within the spec's float64 rule; counts and regimes exactly;
- in distribution: with sekai's own generator, per-path statistics (mean and variance of
  log returns, jump counts, regime occupancy, autocorrelation of squared returns) agree
  within 4 standard errors;
- constructor checks: the same error types and messages as sekai's;
- float32 property tests (hypothesis): finite outputs over the parameter ranges;
- pytree behaviour: lazy steps equal the materialised path, `vmap` over params and keys.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sekai.finance.simulators as S
from finance_support import ReplayGenerator, sekai_tolerance
from hypothesis import given, settings
from hypothesis import strategies as st

from parallax import finance as pf
from parallax import rng

CORR3 = [[1.0, 0.5, 0.2], [0.5, 1.0, 0.1], [0.2, 0.1, 1.0]]
CORR2 = [[1.0, 0.6], [0.6, 1.0]]
RETURNS = np.random.default_rng(0).normal(0.0003, 0.012, (120, 2))
TRANSITION = [[0.95, 0.05], [0.1, 0.9]]


def _regimes(lib):
    return [lib.GBM(0.1, 0.1, n_assets=2), lib.GBM(-0.3, 0.5, n_assets=2, corr=CORR2)]


# (name, constructor arguments, with both libraries' classes resolved by name)
CONFIGS = {
    "gbm": ("GBM", {}),
    "gbm_corr": ("GBM", {"mu": 0.1, "sigma": [0.2, 0.3, 0.5], "corr": CORR3, "s0": [50, 100, 9]}),
    "heston": ("Heston", {}),
    "heston_corr": ("Heston", {"xi": 1.2, "kappa": 0.5, "rho": [-0.9, 0.0, 0.5], "corr": CORR3}),
    "merton": ("MertonJumpDiffusion", {"jump_intensity": 40.0, "n_assets": 2}),
    "merton_corr": ("MertonJumpDiffusion", {"jump_intensity": [5.0, 60.0, 0.0], "corr": CORR3}),
    "garch": ("GARCH", {"omega": 2e-5, "alpha": 0.2, "beta": 0.7, "mu": 0.1, "n_assets": 2}),
    "mean_reverting": ("MeanReverting", {"theta": 3.0, "mean": [90.0, 110.0], "corr": CORR2}),
    "cointegrated": ("CointegratedPair", {"theta": 20.0, "spread_sigma": 0.3, "s0": (50, 60)}),
    "bootstrap": ("BlockBootstrap", {"returns": RETURNS, "block_size": 7}),
    "regime": ("RegimeSwitching", {"regimes": "GBMS", "transition": TRANSITION}),
}


def build_model(lib, spec, regimes):
    """`lib`'s model of `spec = (class name, kwargs)`: a string `kwargs["regimes"]` names
    the function of `regimes` that gives `lib`'s regimes (`test_finance_sources` uses it)."""
    cls_name, kwargs = spec
    kwargs = dict(kwargs)
    if isinstance(kwargs.get("regimes"), str):
        kwargs["regimes"] = regimes[kwargs["regimes"]](lib)
    return getattr(lib, cls_name)(**kwargs)


def _build(lib, name):
    return build_model(lib, CONFIGS[name], {"GBMS": _regimes})


@functools.partial(jax.jit, static_argnums=2)
def _simulate(model, key, steps):
    return model.simulate(key, steps)


@functools.partial(jax.jit, static_argnums=2)
def _simulate_many(model, keys, steps):
    sim = jax.vmap(lambda k: model.simulate(k, steps))(keys)
    return sim.prices, sim.state


def _close(ours, ref):
    tol = sekai_tolerance()
    ours, ref = np.asarray(ours), np.asarray(ref)
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    return bool(tol.close("prices", ours, ref).all())


# ------------------------------------------------------------------- shared draws
@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_sekai_on_shared_draws(name):
    with jax.enable_x64(True):
        ours, theirs = _build(pf, name), _build(S, name)
        assert type(pf.from_sekai(theirs)) is type(ours)
        for seed in (0, 1):
            key = rng.episode_key(jax.random.key(seed))
            sim = _simulate(ours, key, 60)
            shim = ReplayGenerator(ours.sekai_draws(key, 60))
            ref = theirs.simulate(shim, 60)
            shim.assert_exhausted()
            assert sim.prices.dtype == jnp.float64
            assert _close(sim.prices, ref.prices), name
            assert set(sim.state) == set(ref.state)
            for key_name, series in ref.state.items():
                if key_name in ("jumps", "regime"):
                    assert np.array_equal(np.asarray(sim.state[key_name]), series), key_name
                else:
                    assert _close(sim.state[key_name], series), key_name
            # the converted sekai model computes the same path as ours
            again = _simulate(pf.from_sekai(theirs), key, 60)
            assert _close(again.prices, sim.prices)


def test_jump_and_regime_draws_are_exercised():
    """The shared-draw configs above do see jumps, several regimes and wrapped blocks."""
    with jax.enable_x64(True):
        key = rng.episode_key(jax.random.key(0))
        jumps = _simulate(_build(pf, "merton"), key, 60).state["jumps"]
        assert float(jnp.sum(jumps)) > 0 and float(jnp.max(jumps)) >= 1
        regime = _simulate(_build(pf, "regime"), key, 60).state["regime"]
        assert len(np.unique(np.asarray(regime))) == 2


def _factory(r):
    if r.random() < 0.3:  # sekai's categorical rule for probs (0.3, 0.7)
        return S.GBM(-0.2 + 0.4 * r.random(), 0.1 + 0.4 * r.random(), n_assets=2)
    return S.MeanReverting(1.0 + 9.0 * r.random(), n_assets=2)


def _randomized():
    return pf.Randomized(
        [pf.GBM(n_assets=2), pf.MeanReverting(n_assets=2)],
        [{"mu": (-0.2, 0.2), "sigma": (0.1, 0.5)}, {"theta": (1.0, 10.0)}],
        probs=[0.3, 0.7],
    )


def test_randomized_matches_sekai_factory_on_shared_draws():
    with jax.enable_x64(True):
        ours, theirs = _randomized(), S.Randomized(_factory)
        choices = set()
        for seed in range(8):
            key = rng.episode_key(jax.random.key(seed))
            sim = _simulate(ours, key, 30)
            shim = ReplayGenerator(ours.sekai_draws(key, 30))
            ref = theirs.simulate(shim, 30)
            shim.assert_exhausted()
            assert _close(sim.prices, ref.prices)
            choices.add(int(sim.state["choice"][0]))
        assert choices == {0, 1}


def test_gbm_uses_the_envs_price_slot():
    """`GBM` draws the envs' built-in market shocks: slot PRICE, step = path row."""
    assert pf.GBM.SLOTS.PRICE == pf.SLOTS.PRICE == 0
    key = rng.episode_key(jax.random.key(5))
    draws = pf.GBM(n_assets=3).sekai_draws(key, 9)[0][2]
    want = rng.normal_vector(key, jnp.arange(9, dtype=jnp.uint32), pf.SLOTS.PRICE, 3)
    np.testing.assert_array_equal(draws, np.asarray(want, np.float64))


# ------------------------------------------------------------------ distribution
PATHS, STEPS = 2000, 100


def _log_returns(prices):
    return np.diff(np.log(np.asarray(prices, np.float64)), axis=-2)


def _z(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    se = np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    return float(abs(a.mean() - b.mean()) / se)


def _sq_autocorr(r):
    """Per-path lag-1 autocorrelation of squared returns, `(paths,)`."""
    s = r**2 - (r**2).mean(axis=-1, keepdims=True)
    return (s[:, 1:] * s[:, :-1]).mean(-1) / (s**2).mean(-1)


def _statistics(name, prices, state):
    r = _log_returns(prices)[..., 0]  # (paths, steps), asset 0
    out = {"mean": r.mean(-1), "var": (r**2).mean(-1)}
    if name.startswith("merton"):
        out["jumps"] = np.asarray(state["jumps"]).sum(axis=(-2, -1))
    if name == "regime":
        out["occupancy"] = (np.asarray(state["regime"]) == 0).mean(-1)
    if name == "garch":
        out["clustering"] = _sq_autocorr(r)
    if name == "heston":
        out["variance"] = np.asarray(state["variance"])[..., -1, 0]
    if name == "cointegrated":
        out["spread_var"] = (np.asarray(state["spread"]) ** 2).mean(-1)
    return out


@pytest.mark.parametrize(
    "name",
    [
        "gbm_corr",
        "heston",
        "merton",
        "garch",
        "mean_reverting",
        "cointegrated",
        "bootstrap",
        "regime",
    ],
)
def test_matches_sekai_in_distribution(name):
    with jax.enable_x64(True):
        ours, theirs = _build(pf, name), _build(S, name)
        keys = rng.episode_key(jax.random.split(jax.random.key(11), PATHS))
        prices, state = _simulate_many(ours, keys, STEPS)
        ref = theirs.simulate(np.random.default_rng(11), STEPS, n_paths=PATHS)
    a = _statistics(name, prices, state)
    b = _statistics(name, ref.prices, ref.state)
    zs = {k: _z(a[k], b[k]) for k in a}
    assert max(zs.values()) < 4.0, zs
    if name == "garch":  # volatility clustering is there, in both
        for x in (a, b):
            assert x["clustering"].mean() / (x["clustering"].std() / np.sqrt(PATHS)) > 4.0
    if name == "merton":
        assert a["jumps"].mean() > 5  # 40 per year over 100 daily steps: about 16 per path


def test_randomized_matches_sekai_in_distribution():
    with jax.enable_x64(True):
        keys = rng.episode_key(jax.random.split(jax.random.key(2), 600))
        prices, state = _simulate_many(_randomized(), keys, 50)
        ref = S.Randomized(_factory).simulate(np.random.default_rng(2), 50, n_paths=600)
    a = _statistics("randomized", prices, state)
    b = _statistics("randomized", ref.prices, ref.state)
    a["gbm_share"] = (np.asarray(state["choice"])[:, 0] == 0).astype(float)
    assert abs(a["gbm_share"].mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / 600)
    zs = {k: _z(a[k], b[k]) for k in ("mean", "var")}
    assert max(zs.values()) < 4.0, zs


# ------------------------------------------------------------------- validation
BAD = [
    ("GBM", {"sigma": -0.1}),
    ("GBM", {"sigma": [0.1, 0.2], "mu": [0.0, 0.1, 0.2]}),
    ("GBM", {"mu": np.nan}),
    ("GBM", {"s0": 0.0}),
    ("GBM", {"dt": 0.0}),
    ("GBM", {"dt": [1.0, 2.0]}),
    ("GBM", {"n_assets": 0}),
    ("GBM", {"n_assets": 2.5}),
    ("GBM", {"n_assets": True}),
    ("GBM", {"corr": [[1.0, 0.5], [0.4, 1.0]]}),
    ("GBM", {"corr": [[2.0, 0.5], [0.5, 1.0]]}),
    ("GBM", {"corr": [[1.0, 1.5], [1.5, 1.0]]}),
    ("GBM", {"corr": [[1.0, 0.5], [0.5, 1.0]], "n_assets": 3}),
    ("GBM", {"sigma": [[0.1]]}),
    ("Heston", {"kappa": 0.0}),
    ("Heston", {"theta": -1.0}),
    ("Heston", {"xi": 0.0}),
    ("Heston", {"rho": 1.5}),
    ("Heston", {"v0": -0.1}),
    ("MertonJumpDiffusion", {"jump_intensity": -1.0}),
    ("MertonJumpDiffusion", {"jump_std": -0.1}),
    ("MertonJumpDiffusion", {"sigma": -0.2}),
    ("GARCH", {"omega": 0.0}),
    ("GARCH", {"alpha": -0.1}),
    ("GARCH", {"beta": -0.1}),
    ("GARCH", {"alpha": 0.5, "beta": 0.5}),
    ("MeanReverting", {"theta": 0.0}),
    ("MeanReverting", {"mean": -1.0}),
    ("MeanReverting", {"sigma": -1.0}),
    ("CointegratedPair", {"sigma": -0.1}),
    ("CointegratedPair", {"theta": 0.0}),
    ("CointegratedPair", {"spread_sigma": -1.0}),
    ("CointegratedPair", {"mu": [0.1, 0.2]}),
    ("CointegratedPair", {"s0": (1.0, 2.0, 3.0)}),
    ("CointegratedPair", {"mu": np.inf}),
    ("BlockBootstrap", {"returns": RETURNS, "block_size": 0}),
    ("BlockBootstrap", {"returns": RETURNS, "block_size": 500}),
    ("BlockBootstrap", {"returns": RETURNS, "block_size": 2.0}),
    ("BlockBootstrap", {"returns": np.zeros((0, 2))}),
    ("BlockBootstrap", {"returns": [[np.nan]]}),
    ("BlockBootstrap", {"returns": np.zeros((3, 2, 2))}),
    ("RegimeSwitching", {"regimes": [], "transition": []}),
    ("RegimeSwitching", {"regimes": "GBMS", "transition": [[0.5, 0.6], [0.5, 0.5]]}),
    ("RegimeSwitching", {"regimes": "GBMS", "transition": [[1.0]]}),
    ("RegimeSwitching", {"regimes": "GBMS", "transition": [[1.2, -0.2], [0.5, 0.5]]}),
    ("RegimeSwitching", {"regimes": "GBMS", "transition": TRANSITION, "initial": [0.5, 0.6]}),
    ("RegimeSwitching", {"regimes": "GBMS", "transition": TRANSITION, "initial": [1.0]}),
    ("RegimeSwitching", {"regimes": "MIXED_N", "transition": TRANSITION}),
    ("RegimeSwitching", {"regimes": "NOT_GBM", "transition": [[1.0]]}),
]


def _resolve(lib, kwargs):
    kwargs = dict(kwargs)
    special = {
        "GBMS": lambda: _regimes(lib),
        "MIXED_N": lambda: [lib.GBM(n_assets=2), lib.GBM(n_assets=3)],
        "NOT_GBM": lambda: [lib.Heston()],
    }
    if isinstance(kwargs.get("regimes"), str):
        kwargs["regimes"] = special[kwargs["regimes"]]()
    return kwargs


@pytest.mark.parametrize(
    ("cls_name", "kwargs"), BAD, ids=[f"{c}-{i}" for i, (c, _) in enumerate(BAD)]
)
def test_constructor_errors_match_sekai(cls_name, kwargs):
    with pytest.raises((ValueError, TypeError)) as theirs:
        getattr(S, cls_name)(**_resolve(S, kwargs))
    with pytest.raises((ValueError, TypeError)) as ours:
        getattr(pf, cls_name)(**_resolve(pf, kwargs))
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


def test_defaults_match_sekai():
    for cls_name in ("GBM", "Heston", "MertonJumpDiffusion", "GARCH", "MeanReverting"):
        ours, theirs = getattr(pf, cls_name)(), getattr(S, cls_name)()
        for leaf in ours._leaves:
            value = getattr(ours, leaf)
            if leaf == "chol":
                assert value is None and theirs.corr is None
            else:
                ref = theirs.dt if leaf == "dt" else getattr(theirs, leaf)
                np.testing.assert_array_equal(np.asarray(value), np.asarray(ref))
    pair = pf.CointegratedPair()
    assert (float(pair.theta), float(pair.spread_sigma)) == (5.0, 0.1)
    regime = pf.RegimeSwitching(_regimes(pf), TRANSITION)
    theirs = S.RegimeSwitching(_regimes(S), TRANSITION)
    np.testing.assert_array_equal(regime.cum_initial, np.cumsum(theirs.initial))


def test_from_sekai_and_immutability():
    with pytest.raises(TypeError, match="Randomized"):
        pf.from_sekai(S.Randomized(_factory))
    with pytest.raises(TypeError, match="factory"):
        pf.Randomized(_factory)
    with pytest.raises(TypeError, match="sekai market model"):
        pf.from_sekai(object())
    model = pf.from_sekai(S.GBM(0.1, 0.3, corr=CORR2))
    np.testing.assert_allclose(model.corr, CORR2, atol=1e-15)
    with pytest.raises(AttributeError, match="immutable"):
        model.sigma = 0.0
    assert float(model.replace(sigma=np.zeros(2)).sigma.sum()) == 0.0
    with pytest.raises(ValueError, match="unknown parameter"):
        model.replace(vol=1.0)


@pytest.mark.parametrize(
    ("ranges", "match"),
    [
        ({"sigma": (0.3, 0.1)}, "low <= high"),
        ({"sigma": (-0.1, 0.1)}, "sigma must be non-negative"),
        ({"volatility": (0.1, 0.2)}, "not a float parameter"),
        ({"sigma": (0.1, np.inf)}, "finite"),
    ],
)
def test_randomized_checks_its_ranges(ranges, match):
    with pytest.raises(ValueError, match=match):
        pf.Randomized(pf.GBM(), ranges)
    with pytest.raises(ValueError, match="alpha \\+ beta"):
        pf.Randomized(pf.GARCH(), {"alpha": (0.0, 0.2), "beta": (0.5, 0.9)})
    with pytest.raises(ValueError, match="n_assets"):
        pf.Randomized([pf.GBM(), pf.GBM(n_assets=2)])
    with pytest.raises(ValueError, match="probs"):
        pf.Randomized([pf.GBM(), pf.GARCH()], probs=[0.5, 0.6])


# --------------------------------------------------------------- pure-function use
def test_step_by_step_equals_simulate_and_vmap(x64):
    dtype = jnp.float64 if x64 else jnp.float32
    model = _build(pf, "heston_corr")
    key = rng.episode_key(jax.random.key(4))
    sim = _simulate(model, key, 12)
    state = model.init(key)
    assert state.log_level.dtype == dtype
    step = jax.jit(model.step)
    for t in range(12):
        state, prices = step(state, key, jnp.uint32(t))
        np.testing.assert_allclose(prices, sim.prices[t + 1], rtol=1e-6 if not x64 else 1e-13)
    # vmap over stacked params: lane i equals the model built with lane i's numbers
    sigmas = jnp.asarray([[0.1, 0.2, 0.3], [0.5, 0.5, 0.5]], dtype)
    batch = jax.vmap(lambda xi: model.replace(xi=xi))(sigmas)
    prices, _ = _simulate_many_params(batch, key, 12)
    for i in range(2):
        one = _simulate(model.replace(xi=sigmas[i]), key, 12).prices
        np.testing.assert_allclose(prices[i], one, rtol=1e-6 if not x64 else 1e-13)


@functools.partial(jax.jit, static_argnums=2)
def _simulate_many_params(models, key, steps):
    sim = jax.vmap(lambda m: m.simulate(key, steps))(models)
    return sim.prices, sim.state


def test_randomized_draws_params_in_range_and_vmaps():
    model = _randomized()
    keys = rng.episode_key(jax.random.split(jax.random.key(9), 64))
    choice, drawn = jax.vmap(model.draw)(keys)
    sigma = np.asarray(drawn[0].sigma)
    assert np.all((sigma >= 0.1) & (sigma <= 0.5)) and sigma.std() > 0.05
    assert np.all(sigma[:, 0] == sigma[:, 1])  # one draw per parameter, over assets
    theta = np.asarray(drawn[1].theta)
    assert np.all((theta >= 1.0) & (theta <= 10.0))
    assert 0 < int(np.sum(np.asarray(choice) == 0)) < 64


# ------------------------------------------------------------- float32 properties
PROPERTY = settings(max_examples=8, derandomize=True, deadline=None)
unit = st.floats(0.0, 1.0)


def _finite(model, steps=40):
    keys = rng.episode_key(jax.random.split(jax.random.key(0), 4))
    prices, state = _simulate_many(model, keys, steps)
    assert prices.dtype == jnp.float32
    assert np.all(np.isfinite(np.asarray(prices))) and np.all(np.asarray(prices) > 0)
    for series in state.values():
        assert np.all(np.isfinite(np.asarray(series)))


@PROPERTY
@given(mu=st.floats(-1, 1), sigma=st.floats(0, 2), rho=st.floats(-0.95, 0.95))
def test_gbm_finite_float32(mu, sigma, rho):
    _finite(pf.GBM(mu, sigma, corr=[[1.0, rho], [rho, 1.0]]))


@PROPERTY
@given(
    kappa=st.floats(0.01, 20), theta=st.floats(1e-4, 1), xi=st.floats(0.01, 3), rho=st.floats(-1, 1)
)
def test_heston_finite_float32(kappa, theta, xi, rho):
    _finite(pf.Heston(0.05, kappa, theta, xi, rho, n_assets=2))


@PROPERTY
@given(lam=st.floats(0, 2000), m=st.floats(-0.3, 0.3), s=st.floats(0, 0.3), sigma=st.floats(0, 1))
def test_merton_finite_float32(lam, m, s, sigma):
    _finite(pf.MertonJumpDiffusion(0.05, sigma, lam, m, s))


@PROPERTY
@given(omega=st.floats(1e-8, 1e-3), alpha=unit, beta=unit)
def test_garch_finite_float32(omega, alpha, beta):
    total = alpha + beta
    if total >= 0.999:
        alpha, beta = alpha / total * 0.99, beta / total * 0.99
    _finite(pf.GARCH(omega, alpha, beta, n_assets=2))


@PROPERTY
@given(theta=st.floats(0.01, 100), mean=st.floats(1, 1000), sigma=st.floats(0, 2))
def test_mean_reverting_finite_float32(theta, mean, sigma):
    _finite(pf.MeanReverting(theta, mean, sigma))


@PROPERTY
@given(theta=st.floats(0.01, 100), sigma=st.floats(0, 2), spread=st.floats(0, 2))
def test_cointegrated_finite_float32(theta, sigma, spread):
    _finite(pf.CointegratedPair(0.05, sigma, theta, spread))


@PROPERTY
@given(p=unit, q=unit, sigma=st.floats(0, 2))
def test_regime_finite_float32(p, q, sigma):
    regimes = [pf.GBM(0.1, 0.1, n_assets=2), pf.GBM(-0.2, sigma, n_assets=2, corr=CORR2)]
    _finite(pf.RegimeSwitching(regimes, [[1 - p, p], [q, 1 - q]]))


@PROPERTY
@given(block=st.integers(1, 120), scale=st.floats(0, 0.1))
def test_bootstrap_finite_float32(block, scale):
    _finite(pf.BlockBootstrap(RETURNS * scale / 0.012, block_size=block))


@PROPERTY
@given(lo=st.floats(0, 1), width=st.floats(0, 1), xi=st.floats(0.01, 2), p=unit)
def test_randomized_finite_float32(lo, width, xi, p):
    model = pf.Randomized(
        [pf.GBM(), pf.Heston(), pf.MertonJumpDiffusion()],
        [{"sigma": (lo, lo + width)}, {"xi": (0.01, xi)}, {"jump_std": (0.0, lo)}],
        probs=[p / 2, p / 2, 1 - p],
    )
    _finite(model)


def test_mixed_randomized_follows_the_chosen_model():
    """Each episode's path is the chosen model's own path, with the drawn parameters."""
    model = pf.Randomized(
        [pf.GBM(), pf.GARCH(), pf.Heston()],
        [{"sigma": (0.1, 0.5)}, {"alpha": (0.0, 0.05)}, {"rho": (-0.5, 0.5)}],
    )
    keys = rng.episode_key(jax.random.split(jax.random.key(3), 12))
    prices, state = _simulate_many(model, keys, 20)
    choices = np.asarray(state["choice"])[:, 0]
    assert set(choices.tolist()) == {0, 1, 2}
    _, drawn = jax.vmap(model.draw)(keys)
    for i, c in enumerate(choices):
        one = jax.tree.map(lambda x, i=i: x[i], drawn[int(c)])
        own = _simulate(one, keys[i], 20).prices
        np.testing.assert_allclose(prices[i], own, rtol=1e-6)


def test_benchmark_script_reports_every_field(tmp_path):
    import json
    import math

    from test_benchmarks import load

    module = load("market_models")
    out = tmp_path / "models.json"
    argv = ["--num-paths", "8", "--steps", "4", "--repeats", "1", "--only", "GARCH"]
    assert module.main([*argv, "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert row["model"] == "GARCH" and row["n_assets"] == 1
    assert row["step_s"] >= 0 and row["reset_s"] > 0 and row["vs_gbm"] >= 0
    # CPU time is counted in clock ticks: a run this small may measure 0 for GBM, and the
    # ratio is then NaN (it was a ZeroDivisionError in CI), never negative or infinite
    assert row["cpu_vs_gbm"] >= 0 or (math.isnan(row["cpu_vs_gbm"]) and row["step_cpu_s"] >= 0)
    assert row["flops_vs_gbm"] > 0
    assert module._ratio(1.0, 0.0) != module._ratio(1.0, 0.0)  # NaN, not an error
    assert module._ratio(3.0, 2.0) == 1.5
    assert set(module.models()) >= {"GBM", "Heston", "Randomized", "BlockBootstrap"}
    # --env: Trading-v0 with the model against GBM; two-asset models are skipped
    only = ["--only", "GBM", "CointegratedPair"]
    assert module.main([*argv[:6], *only, "--env", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert row["model"] == "GBM" and row["env"] == "Trading-v0" and row["episode_length"] == 50
    assert row["env_step_s"] > 0 and row["env_flops_vs_gbm"] == 1.0


def test_poisson_counts_for_large_means():
    """Above 30 jumps per step the count is a rounded normal; mean and variance still fit."""
    model = pf.MertonJumpDiffusion(jump_intensity=[50 * 252, 5 * 252], jump_std=0.0, sigma=0.0)
    keys = rng.episode_key(jax.random.split(jax.random.key(0), 400))
    _, state = _simulate_many(model, keys, 10)
    counts = np.asarray(state["jumps"])[:, 1:, :].reshape(-1, 2)
    for j, mean in enumerate((50.0, 5.0)):
        assert abs(counts[:, j].mean() - mean) < 4 * np.sqrt(mean / counts.shape[0])
        assert abs(counts[:, j].var() / mean - 1.0) < 0.15
        assert np.all(counts[:, j] == np.round(counts[:, j])) and counts[:, j].min() >= 0


def test_the_sample_paths_example_draws_every_model():
    """`examples/market_models.py` (the docs figure): one panel per model, one line per path
    (two per path for the pair), and different paths from different episode keys."""
    import pathlib
    import runpy

    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "market_models.py"
    example = runpy.run_path(str(path), run_name="market_models")
    fig = example["figure"](num_paths=4, steps=5)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == list(example["models"]())
    for ax in fig.axes:
        lines = [line.get_ydata() for line in ax.get_lines()]
        assert len(lines) == 4 and all(len(y) == 6 for y in lines)
        assert all(float(y[0]) == 100.0 for y in lines)  # every model starts at s0
        # (two bootstrap paths may start in the same block by chance: not all four)
        assert len({tuple(np.round(y, 6)) for y in lines}) > 1, ax.get_title()


# --------------------------------------------------- draws apart from arithmetic
def test_step_is_advance_of_draws_for_every_model():
    """`step` = `advance(draws)`; the draws are keyed as declared, each a `*_vector` draw."""
    key, row = rng.episode_key(jax.random.key(5)), jnp.uint32(7)
    for name in CONFIGS:
        model = _build(pf, name)
        draws = model.draws(key, row, jnp.float32)
        assert set(draws) == set(model.draw_keys()), name
        for k, value in draws.items():
            if k[0] in ("normal", "uniform"):
                vector = rng.normal_vector if k[0] == "normal" else rng.uniform_vector
                expected = vector(key, row, k[1], k[2], dtype=jnp.float32)
                np.testing.assert_array_equal(value, expected, err_msg=f"{name} {k}")
        state = model.init(key)
        stepped = model.step(state, key, row)
        advanced = model.advance(state, draws)
        jax.tree.map(np.testing.assert_array_equal, stepped, advanced)


def test_draws_of_several_keys_equal_separate_draws(x64):
    """`_draw` makes each named draw once, equal to its own `*_vector` call, bit for bit."""
    from parallax.finance._models._base import _draw

    dtype = jnp.float64 if x64 else jnp.float32
    keys = rng.episode_key(jax.random.split(jax.random.key(1), 16))
    wanted = [("normal", 0, 3), ("normal", 2, 3), ("uniform", 3, 3), ("uniform", 5, 3)]
    keys_twice = [*wanted, ("normal", 0, 3), ("bootstrap row", 7)]

    @jax.jit
    def both(k, t):
        joint = _draw(k, t, dtype, keys_twice)
        vector = {"normal": rng.normal_vector, "uniform": rng.uniform_vector}
        apart = {w: vector[w[0]](k, t, w[1], w[2], dtype=dtype) for w in wanted}
        return joint, apart

    for t in (0, 9, 250):
        joint, apart = jax.vmap(both, in_axes=(0, None))(keys, jnp.uint32(t))
        assert set(joint) == set(wanted)
        for w in wanted:
            assert joint[w].dtype == dtype
            np.testing.assert_array_equal(joint[w], apart[w])


MIXTURE = [
    pf.GBM(),
    pf.Heston(),
    pf.GARCH(),
    pf.MertonJumpDiffusion(jump_intensity=60.0),
    pf.BlockBootstrap(RETURNS[:, :1], block_size=5),
    pf.BlockBootstrap(RETURNS[:, 1:], block_size=3),
]
MIXTURE_RANGES = [
    {"sigma": (0.1, 0.5)},
    {"xi": (0.1, 0.6)},
    {"alpha": (0.0, 0.05)},
    None,
    None,
    None,
]


def test_mixed_randomized_advances_every_model_on_its_own_path(x64):
    """Every model of a mixture follows its own `step`'s path, bit for bit, chosen or not."""
    model = pf.Randomized(MIXTURE, MIXTURE_RANGES)
    keys = rng.episode_key(jax.random.split(jax.random.key(2), 24))
    steps = 15

    @jax.jit
    def run(key):
        def body(state, t):
            state, prices = model.step(state, key, t)
            return state, prices

        first = model.init(key)
        last, prices = jax.lax.scan(body, first, jnp.arange(steps, dtype=jnp.uint32))
        _, drawn = model.draw(key)
        own = []
        for m, s in zip(drawn, first.latent["states"], strict=True):

            def body_c(state, t, m=m):
                return m.step(state, key, t)

            own.append(jax.lax.scan(body_c, s, jnp.arange(steps, dtype=jnp.uint32)))
        return last, prices, own

    last, prices, own = jax.vmap(run)(keys)
    choices = np.asarray(last.latent["choice"])
    assert len(set(choices.tolist())) >= 4
    # equal up to XLA's contraction of a * b + c into an FMA, which differs between programs
    rtol = 1e-13 if x64 else 1e-6
    for c, (own_last, own_prices) in enumerate(own):
        mine = last.latent["states"][c]
        np.testing.assert_allclose(mine.log_level, own_last.log_level, rtol=rtol, atol=rtol)
        jax.tree.map(
            functools.partial(np.testing.assert_allclose, rtol=rtol), mine.latent, own_last.latent
        )
        chosen = choices == c
        np.testing.assert_allclose(
            np.asarray(prices)[chosen], np.asarray(own_prices)[chosen], rtol=rtol
        )
    levels = np.stack([s.log_level for s in last.latent["states"]], 1)
    np.testing.assert_array_equal(last.log_level, levels[np.arange(len(choices)), choices])


def _flops(fn, *args):
    cost = jax.jit(fn).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost["flops"])


def test_mixed_randomized_makes_each_draw_once():
    """GBM, Heston and GARCH share the PRICE normals: the mixture draws two normals per step
    (Heston's), and its draws cost no more than Heston's, far less than the three models'."""
    members = [pf.GBM(), pf.Heston(), pf.GARCH()]
    model = pf.Randomized(members)
    assert set(model.draw_keys()) == {("normal", 0, 1), ("normal", 2, 1)}
    row = jnp.uint32(3)
    keys = rng.episode_key(jax.random.split(jax.random.key(0), 256))

    def draws_of(m):
        return _flops(jax.vmap(lambda k: m.draws(k, row, jnp.float32)), keys)

    mixed, separate = draws_of(model), [draws_of(m) for m in members]
    assert mixed <= separate[1]  # no more than Heston's own draws
    assert mixed < 0.6 * sum(separate)


def test_poisson_first_terms_then_search_equal_the_plain_search(x64):
    """`_poisson` (the first CDF terms at once, then the sequential search) gives the counts
    of the plain sequential search for every mean, including 0, negative and non-finite."""
    from parallax.finance._models._base import _poisson

    def plain(u, mean):
        small = mean <= 30.0
        m = jnp.where(small, mean, 0.0)
        cap = m + 12.0 * jnp.sqrt(m) + 20.0

        def go_of(k, cdf):
            return (u >= cdf) & (k.astype(u.dtype) < cap)

        def body(carry):
            k, p, cdf = carry
            go = go_of(k, cdf)
            k1 = k + go.astype(k.dtype)
            p = jnp.where(go, p * m / k1.astype(u.dtype), p)
            return k1, p, jnp.where(go, cdf + p, cdf)

        p0 = jnp.exp(-m)
        start = (jnp.zeros(u.shape, jnp.int32), p0, p0)
        k, _, _ = jax.lax.while_loop(lambda c: jnp.any(go_of(c[0], c[2])), body, start)
        z = jnp.sqrt(2.0) * jax.lax.erf_inv(2.0 * u - 1.0)
        big = jnp.maximum(jnp.floor(mean + jnp.sqrt(mean) * z + 0.5), 0.0)
        return jnp.where(small, k.astype(u.dtype), big)

    dtype = jnp.float64 if x64 else jnp.float32
    u = jnp.asarray(
        np.concatenate([np.random.default_rng(0).random(20000), [0.0, 0.5, 1 - 1e-7]]), dtype
    )
    means = [0.0, 1 / 252, 0.1, 1.0, 7.0, 29.9, 30.0, 30.5, 100.0, -0.1, np.nan, np.inf]
    for mean in means:
        m = jnp.full(u.shape, mean, dtype)
        np.testing.assert_array_equal(jax.jit(_poisson)(u, m), jax.jit(plain)(u, m), str(mean))
    # per-path means under vmap (both branches), and one mean shared by the batch
    m = jnp.asarray(np.random.default_rng(1).uniform(0, 40, u.shape), dtype)
    vm = jax.vmap(_poisson), jax.vmap(plain)
    np.testing.assert_array_equal(vm[0](u[:, None], m[:, None]), vm[1](u[:, None], m[:, None]))
    shared = jax.vmap(_poisson, in_axes=(0, None)), jax.vmap(plain, in_axes=(0, None))
    for mean in (0.004, 3.0, 45.0):
        m1 = jnp.full((1,), mean, dtype)
        np.testing.assert_array_equal(shared[0](u[:, None], m1), shared[1](u[:, None], m1))
