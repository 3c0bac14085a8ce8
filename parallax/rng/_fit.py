"""How the float32 logarithm coefficients of ``parallax.rng`` were obtained (not imported at run time).

Holds ``fit_log_rational(n, m)``: a linearised least-squares fit of
``ln(1 + a) / a ~ N(a) / D(a)`` (``deg N = n``, ``deg D = m``, ``D(0) = 1``),
reweighted by ``1 / |D|`` of the previous fit (Sanathanan-Koerner
iteration), on Chebyshev nodes of ``a in [sqrt(1/2) - 1, sqrt(2) - 1]``, the range of the
reduced significand. ``_spec.LOG_NUM32`` / ``LOG_DEN32`` are
``fit_log_rational(3, 2)`` rounded to float32; the test suite checks their
error bound. The shipped constants are the specification; refitting on
another machine may differ in the last bits and must not replace them
silently.
"""

from __future__ import annotations

import numpy as np


def fit_log_rational(
    n: int, m: int, nodes: int = 4001, iterations: int = 30
) -> tuple[tuple[float, ...], tuple[float, ...], float]:
    """Fit ``ln(1 + a) ~ a * N(a) / D(a)`` on the reduced-significand range.

    Args:
      n: degree of the numerator ``N``.
      m: degree of the denominator ``D`` (its constant term is 1).
      nodes: number of Chebyshev nodes.
      iterations: reweighted least-squares rounds.

    Returns:
      ``(num, den, max_rel_err)``: coefficients highest degree first (as
      Python floats, float64 precision) and the max relative error of
      ``N / D`` against ``ln(1 + a) / a`` on the nodes.

    Example:
      >>> num, den, err = fit_log_rational(3, 2)
      >>> len(num), len(den), err < 1e-7
      (4, 3, True)
    """
    lo, hi = np.sqrt(0.5) - 1.0, np.sqrt(2.0) - 1.0
    a = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.linspace(0.0, np.pi, nodes))
    g = np.log1p(a) / a
    # N(a) - g(a) * (D(a) - 1) = g(a), linear in the unknown coefficients.
    design = np.concatenate(
        [a[:, None] ** np.arange(n + 1), -g[:, None] * a[:, None] ** np.arange(1, m + 1)], axis=1
    )
    weight = np.ones_like(a)
    for _ in range(iterations):
        coef, *_ = np.linalg.lstsq(design * weight[:, None], g * weight, rcond=None)
        num = coef[: n + 1][::-1]
        den = np.concatenate([coef[n + 1 :][::-1], [1.0]])
        weight = 1.0 / np.abs(np.polyval(den, a))
    err = float(np.abs(np.polyval(num, a) / np.polyval(den, a) / g - 1.0).max())
    return tuple(float(c) for c in num), tuple(float(c) for c in den), err
