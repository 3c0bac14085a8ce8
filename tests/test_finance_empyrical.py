"""The finance metrics equal empyrical's on the same return series (issue 38).

The reference is `empyrical-reloaded` 0.7.1 (imported as `empyrical`), the maintained
continuation of empyrical; empyrical 0.5.5 itself no longer imports on NumPy 2. Where the
conventions differ, our functions take an argument that gives empyrical's:

- the sign of a loss: our maximum drawdown, VaR and CVaR are positive losses, empyrical's
  negative returns (`as_loss=False`);
- the risk-free rate and Sortino's target: ours are annual rates, empyrical's per period
  (`per_period=True`);
- VaR's level: our `level=0.95` is empyrical's `cutoff=0.05`.

The annualisation (252 periods), the ddof of the standard deviation (1) and the quantile
interpolation (linear) are the same. Where empyrical has no value (a series with zero
volatility: `inf` or NaN) ours is documented (0) and tested on its own.
"""

from __future__ import annotations

import empyrical
import jax
import numpy as np
import pytest

from parallax import finance as pf

RNG = np.random.default_rng(7)


def _series():
    n = 400
    fat = RNG.standard_t(3, n) * 0.01 + 0.0004  # fat tails
    leading_zeros = np.concatenate([np.zeros(30), RNG.normal(0.0005, 0.01, n - 30)])
    negative = -np.abs(RNG.normal(0.002, 0.01, n))  # every period loses
    flat_window = RNG.normal(0.0, 0.01, n)
    flat_window[100:200] = 0.0  # a window of zero volatility inside
    crash = np.concatenate([RNG.normal(0.001, 0.005, 200), [-0.3], RNG.normal(0.0, 0.02, 199)])
    return {
        "fat_tails": fat,
        "leading_zeros": leading_zeros,
        "all_negative": negative,
        "flat_window": flat_window,
        "crash": crash,
    }


SERIES = _series()


def _pairs(r, risk_free):
    """(ours, empyrical's) for each metric, with empyrical's conventions asked of ours."""
    return {
        "sharpe_ratio": (
            pf.sharpe_ratio(r, 252, risk_free, per_period=True),
            empyrical.sharpe_ratio(r, risk_free=risk_free),
        ),
        "sortino_ratio": (
            pf.sortino_ratio(r, 252, risk_free, per_period=True),
            empyrical.sortino_ratio(r, required_return=risk_free),
        ),
        "max_drawdown": (pf.max_drawdown(r, as_loss=False), empyrical.max_drawdown(r)),
        "calmar_ratio": (pf.calmar_ratio(r), empyrical.calmar_ratio(r)),
        "value_at_risk": (
            pf.value_at_risk(r, 0.95, as_loss=False),
            empyrical.value_at_risk(r, cutoff=0.05),
        ),
        "conditional_value_at_risk": (
            pf.conditional_value_at_risk(r, 0.95, as_loss=False),
            empyrical.conditional_value_at_risk(r, cutoff=0.05),
        ),
        "annualized_return": (pf.annualized_return(r), empyrical.annual_return(r)),
        "annualized_volatility": (pf.annualized_volatility(r), empyrical.annual_volatility(r)),
        "total_return": (pf.total_return(r), empyrical.cum_returns_final(r)),
    }


@pytest.mark.parametrize("risk_free", [0.0, 0.0001])
@pytest.mark.parametrize("name", list(SERIES))
def test_metrics_equal_empyrical(x64, name, risk_free):
    r = SERIES[name]
    # float32: empyrical on the same float32 numbers (in float64), so only our arithmetic
    # differs; float64: to the last few bits
    rtol = 1e-9 if x64 else 2e-4
    r = r if x64 else r.astype(np.float32).astype(np.float64)
    for metric, (ours, theirs) in _pairs(r, risk_free).items():
        assert np.isfinite(float(ours)), metric
        np.testing.assert_allclose(
            float(ours), float(theirs), rtol=rtol, atol=1e-12, err_msg=metric
        )


def test_our_default_signs_are_the_losses():
    r = SERIES["crash"]
    for ours, theirs in [
        (pf.max_drawdown(r), empyrical.max_drawdown(r)),
        (pf.value_at_risk(r), empyrical.value_at_risk(r)),
        (pf.conditional_value_at_risk(r), empyrical.conditional_value_at_risk(r)),
    ]:
        assert float(ours) > 0 > float(theirs)
        np.testing.assert_allclose(float(ours), -float(theirs), rtol=1e-6)
    # the annual risk-free rate of our default is the per-period one times 252
    np.testing.assert_allclose(
        float(pf.sharpe_ratio(r, 252, 252 * 0.0001)),
        float(empyrical.sharpe_ratio(r, risk_free=0.0001)),
        rtol=1e-5,
    )


def test_where_empyrical_has_no_value_ours_is_documented():
    flat = np.zeros(50)
    with np.errstate(divide="ignore", invalid="ignore"):
        assert not np.isfinite(empyrical.sharpe_ratio(flat))
        assert not np.isfinite(empyrical.calmar_ratio(flat))
    assert float(pf.sharpe_ratio(flat)) == 0.0  # "0 when the standard deviation is zero"
    assert float(pf.calmar_ratio(flat)) == 0.0  # no drawdown, no positive return
    assert float(pf.max_drawdown(flat, as_loss=False)) == float(empyrical.max_drawdown(flat))


def test_eager_and_jit_agree_with_the_convention_arguments():
    r = SERIES["fat_tails"]
    jitted = jax.jit(lambda x: pf.value_at_risk(x, 0.9, as_loss=False))
    assert float(jitted(r)) == float(pf.value_at_risk(r, 0.9, as_loss=False))
    with pytest.raises(TypeError, match=r"value_at_risk: as_loss must be True or False, got 1"):
        pf.value_at_risk(r, as_loss=1)
    with pytest.raises(TypeError, match=r"sharpe_ratio: per_period must be True or False"):
        pf.sharpe_ratio(r, per_period="yes")
