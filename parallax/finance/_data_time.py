"""Time axes of market data: timestamps parsed and checked on the host, timezone-naive.

- `_time_axis(timestamps, n_steps)`: the checked `(T,)` axis of a `MarketData` (int64 rows
  by default, numbers, or datetime64[ns]; strictly increasing, no NaT, no infinity).
- `_naive_datetimes` / `_naive_datetime`: dates and times as datetime64[ns], refusing
  timezone-aware input with a hint on how to convert it.
- `_NUMBERS` and `_DATETIMES`: the Python types a timestamp may have.
"""

from __future__ import annotations

import datetime as _dt
import warnings
from typing import Any

import numpy as np

_NUMBERS = (int, float, np.integer, np.floating)
_DATETIMES = (str, _dt.date, np.datetime64)
_TZ_HINT = (
    "timestamps must be timezone-naive; convert first, e.g. "
    "index.tz_convert('UTC').tz_localize(None) for UTC, or index.tz_localize(None) to keep "
    "the local wall-clock times"
)


def _naive_datetimes(value: Any, what: str) -> np.ndarray:
    """`value` as datetime64[ns], refusing timezone-aware input (`ValueError`)."""
    if getattr(getattr(value, "dtype", None), "tz", None) is not None:
        raise ValueError(f"{what} is timezone-aware; {_TZ_HINT}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = np.asarray(value).astype("datetime64[ns]")
        except (TypeError, ValueError):
            raise ValueError(f"{what} holds values that are not dates or times") from None
    for warning in caught:
        if "timezone" in str(warning.message):
            raise ValueError(f"{what} is timezone-aware; {_TZ_HINT}")
    return out


def _naive_datetime(value: Any, what: str) -> Any:
    """One date or time as datetime64[ns], refusing timezone-aware input (`ValueError`)."""
    if getattr(value, "tzinfo", None) is not None:
        raise ValueError(f"{what} {value!r} is timezone-aware; {_TZ_HINT}")
    out = _naive_datetimes(np.asarray(value, dtype=object), what)
    return out[()]


def _time_axis(timestamps: Any, n_steps: int) -> np.ndarray:
    """The checked `(T,)` time axis: int64 rows by default, numbers, or datetime64[ns]."""
    if timestamps is None:
        return np.arange(n_steps, dtype=np.int64)
    if getattr(getattr(timestamps, "dtype", None), "tz", None) is not None:
        raise ValueError(f"timestamps are timezone-aware; {_TZ_HINT}")
    times = np.array(timestamps)
    if times.dtype.kind in "OUSM":
        times = _naive_datetimes(times, "timestamps")
    if times.dtype.kind not in "iufM":
        raise TypeError(f"timestamps must be dates or numbers, got dtype {times.dtype}")
    if times.shape != (n_steps,):
        raise ValueError(f"timestamps has shape {times.shape}; expected ({n_steps},)")
    if times.dtype.kind == "M" and np.isnat(times).any():
        raise ValueError("timestamps contain NaT")
    if times.dtype.kind == "f" and not np.all(np.isfinite(times)):
        raise ValueError("timestamps must be finite")
    if not np.all(times[1:] > times[:-1]):
        raise ValueError("timestamps must be strictly increasing")
    return times
