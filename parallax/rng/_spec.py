"""The numbers that define ``parallax.rng``, shared by both flavours.

Both the JAX flavour (``parallax.rng``) and the NumPy reference flavour
(``parallax.rng.reference``) read every constant from here, so the two
cannot drift apart on a number. Nothing in this module computes a draw.

Holds:

- ``MASK32``, ``MIX_M1``, ``MIX_M2``, ``MIX_S1``, ``MIX_S2``, ``MIX_S3``: the
  32-bit xorshift-multiply finaliser used as the Feistel round function.
- ``ROUND_C2``, ``ROUND_C3``: offsets that make the third and fourth round
  keys differ from the first two.
- ``EPISODE_IV``: the fixed key used to turn JAX key data into an episode key.
- ``FOLD_KEY``, ``FOLD_TWEAK``: domain separation for ``fold_in``.
- ``DRAW_TWEAK``: the fixed right half fed to the second Feistel stage.
- ``PPND7_*`` and ``PPND16_*``: coefficients of Wichura's algorithm AS241
  (Applied Statistics 37(3), 1988) for the normal quantile, in Horner order
  (highest degree first), for float32 and float64 draws.
- ``LOG_NUM32``, ``LOG_DEN32``, ``LOG_ATANH64``: the logarithm of the significand.
- ``F32`` and ``F64``: per-dtype numbers for the exact-product arithmetic of
  the normal draw (split masks, ln 2 in two short pieces, sqrt(2)).
- ``split_constant``: how a coefficient is cut into two short halves.
"""

from __future__ import annotations

import dataclasses

import numpy as np

MASK32 = 0xFFFFFFFF

# Round function: a 32-bit xorshift-multiply finaliser. These multipliers and
# shifts are the "lowbias32" parameters published by Chris Wellons (2018,
# "Prospecting for hash functions"), found by a search for low avalanche bias.
MIX_M1 = 0x7FEB352D
MIX_M2 = 0x846CA68B
MIX_S1 = 16
MIX_S2 = 15
MIX_S3 = 16

# Nothing-up-my-sleeve constants: 2**32 / golden ratio, and the first words of
# the fractional parts of square roots of primes (the SHA-256 initial values).
ROUND_C2 = 0x9E3779B9
ROUND_C3 = 0x6A09E667
EPISODE_IV = (0xBB67AE85, 0x3C6EF372)
FOLD_KEY = (0xA54FF53A, 0x510E527F)
FOLD_TWEAK = 0x9B05688C
DRAW_TWEAK = 0x00000000

# AS241 PPND7 (about 7 significant digits): enough for float32 draws. Our
# float32 draw never reaches the far-tail branch (r > 5), so it is omitted.
PPND7_SPLIT1 = 0.425
PPND7_CONST1 = 0.180625
PPND7_CONST2 = 1.6
PPND7_A = (5.9109374720e1, 1.5929113202e2, 5.0434271938e1, 3.3871327179e0)
PPND7_B = (6.7187563600e1, 7.8757757664e1, 1.7895169469e1, 1.0)
PPND7_C = (1.7023821103e-1, 1.3067284816e0, 2.7568153900e0, 1.4234372777e0)
PPND7_D = (1.2021132975e-1, 7.3700164250e-1, 1.0)

# AS241 PPND16 (about 16 significant digits): used for float64 draws.
PPND16_SPLIT1 = 0.425
PPND16_SPLIT2 = 5.0
PPND16_CONST1 = 0.180625
PPND16_CONST2 = 1.6
PPND16_A = (
    2.5090809287301226727e3,
    3.3430575583588128105e4,
    6.7265770927008700853e4,
    4.5921953931549871457e4,
    1.3731693765509461125e4,
    1.9715909503065514427e3,
    1.3314166789178437745e2,
    3.3871328727963666080e0,
)
PPND16_B = (
    5.2264952788528545610e3,
    2.8729085735721942674e4,
    3.9307895800092710610e4,
    2.1213794301586595867e4,
    5.3941960214247511077e3,
    6.8718700749205790830e2,
    4.2313330701600911252e1,
    1.0,
)
PPND16_C = (
    7.74545014278341407640e-4,
    2.27238449892691845833e-2,
    2.41780725177450611770e-1,
    1.27045825245236838258e0,
    3.64784832476320460504e0,
    5.76949722146069140550e0,
    4.63033784615654529590e0,
    1.42343711074968357734e0,
)
PPND16_D = (
    1.05075007164441684324e-9,
    5.47593808499534494600e-4,
    1.51986665636164571966e-2,
    1.48103976427480074590e-1,
    6.89767334985100004550e-1,
    1.67638483018380384940e0,
    2.05319162663775882187e0,
    1.0,
)
PPND16_E = (
    2.01033439929228813265e-7,
    2.71155556874348757815e-5,
    1.24266094738807843860e-3,
    2.65321895265761230930e-2,
    2.96560571828504891230e-1,
    1.78482653991729133580e0,
    5.46378491116411436990e0,
    6.65790464350110377720e0,
)
PPND16_F = (
    2.04426310338993978564e-15,
    1.42151175831644588870e-7,
    1.84631831751005468180e-5,
    7.86869131145613259100e-4,
    1.48753612908506148525e-2,
    1.36929880922735805310e-1,
    5.99832206555887937690e-1,
    1.0,
)


# ln(m) for m in [sqrt(1/2), sqrt(2)], float32: ln(m) = a * N(a) / D(a) with a = m - 1, a
# [3/2] rational fitted by us (``parallax.rng._fit.fit_log_rational(3, 2)``: linearised least
# squares on Chebyshev nodes), rounded to float32; max abs error 2.6e-8. One division at the
# end keeps the whole float32 normal in one XLA fusion.
LOG_NUM32 = (-0.005425661336630583, 0.06655803322792053, 0.8342825174331665, 1.0)
LOG_DEN32 = (0.4003710150718689, 1.3342825174331665, 1.0)

# ln(m), float64: 2 atanh(s) = 2 s (1 + s**2/3 + s**4/5 + ...), s = (m - 1) / (m + 1),
# |s| <= 0.1716; ten terms (highest first), the first omitted term is below 1e-17.
LOG_ATANH64 = tuple(2.0 / (2 * k + 1) for k in range(9, -1, -1))


@dataclasses.dataclass(frozen=True)
class FloatSpec:
    """Numbers for exact-product arithmetic in one float dtype.

    ``split_mask`` keeps the top ``(mantissa + 1) // 2`` significant bits of a
    float (as a bit pattern), so a product of two halves is exact.
    ``ln2_hi`` and ``ln2_lo`` carry ln 2 in two pieces short enough that an
    integer exponent times either piece is exact.
    """

    dtype: np.dtype
    uint: np.dtype
    split_mask: int
    ln2_hi: float
    ln2_lo: float
    sqrt2: float


def _ln2_pieces(dtype: type[np.floating], bits: int) -> tuple[float, float]:
    """Split ln 2 into ``hi + lo`` where each piece has at most ``bits`` bits."""
    ln2 = 0.6931471805599453094172321
    hi = float(np.ldexp(np.floor(np.ldexp(ln2, bits)), -bits))
    rest = ln2 - hi
    exp = int(np.floor(np.log2(rest)))
    lo = float(np.ldexp(np.round(np.ldexp(rest, bits - 1 - exp)), exp - bits + 1))
    return float(dtype(hi)), float(dtype(lo))


def _float_spec(
    dtype: type[np.floating], uint: type[np.unsignedinteger], split_mask: int, ln2_bits: int
) -> FloatSpec:
    """The ``FloatSpec`` of ``dtype``, with ln 2 cut into pieces of ``ln2_bits`` bits."""
    ln2_hi, ln2_lo = _ln2_pieces(dtype, ln2_bits)
    return FloatSpec(
        dtype=np.dtype(dtype),
        uint=np.dtype(uint),
        split_mask=split_mask,
        ln2_hi=ln2_hi,
        ln2_lo=ln2_lo,
        sqrt2=float(dtype(1.41421356237309504880)),
    )


F32 = _float_spec(np.float32, np.uint32, split_mask=0xFFFFF000, ln2_bits=16)
F64 = _float_spec(np.float64, np.uint64, split_mask=0xFFFFFFFFF8000000, ln2_bits=40)


def split_constant(value: float, spec: FloatSpec) -> tuple[float, float]:
    """Cut ``value`` (rounded to ``spec.dtype``) into exact ``hi + lo`` halves.

    Args:
      value: the constant.
      spec: ``F32`` or ``F64``.

    Returns:
      ``(hi, lo)`` as Python floats, each exactly representable in
      ``spec.dtype`` with at most half the significand bits, ``hi + lo ==
      value`` exactly in ``spec.dtype``.

    Example:
      >>> hi, lo = split_constant(0.1, F32)
      >>> float(np.float32(hi) + np.float32(lo)) == float(np.float32(0.1))
      True
    """
    x = np.array(value, dtype=spec.dtype)
    hi = (x.view(spec.uint) & spec.uint.type(spec.split_mask)).view(spec.dtype)
    lo = x - hi
    return float(hi), float(lo)
