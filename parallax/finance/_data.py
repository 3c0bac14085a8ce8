"""Market data on the host: `MarketData`, `Time`, and the rows they name.

- `MarketData`: an immutable panel of `T` rows x `N` assets (close prices, optional `volume`
  in shares and quoted `spread` as a fraction of the price, and any other fields), one time
  axis (row numbers, numbers, or dates), asset ids and a warm-up count. It takes NumPy
  arrays, pandas Series/DataFrames (pandas is imported by the caller, never by us), date
  strings and datetimes, and sekai's `MarketData` (`MarketData.from_sekai`), and checks them
  as sekai 0.2.0 does, with the same error types.
- `Time(value)`: a timestamp to look up by value where a plain int would be a row position
  (sekai's `sekai.finance.Time` is accepted wherever ours is).
- `row_of(timestamps, when)`: the row that an int position or a timestamp names.

What the envs read from a `MarketData` (`market_inputs`, `MarketInputs`) is in
`_data_inputs`; how timestamps are parsed and checked in `_data_time`.

Everything here runs on the host, once, at construction: dates have no JAX dtype, so a JAX
env reports the int row and `MarketInputs.timestamp(row)` maps it back.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._data_time import _DATETIMES, _NUMBERS, _naive_datetime, _time_axis

__all__ = ["MarketData", "Time", "row_of"]


@dataclasses.dataclass(frozen=True, repr=False)
class Time:
    """A timestamp looked up by value: the first row at or after it.

    A plain `int` is always a row position (`reset(start=5)` is row 5). `Time(t)` names a
    timestamp on any time axis, integers included (epoch seconds, or a split's row numbers,
    which no longer start at 0). sekai's `sekai.finance.Time` is accepted wherever this is.

    Args:
        value: a number (numeric timestamps) or anything `numpy.datetime64` accepts (a
            `datetime64`, `datetime`, `date`, pandas `Timestamp`, date string).

    Raises:
        TypeError: a bool, or neither a number nor a date or time.

    Example:
        >>> data = MarketData([100.0, 101.0, 102.0, 103.0], timestamps=[10, 20, 30, 40])
        >>> data.index_of(Time(25)), data.index_of(1)
        (2, 1)
    """

    value: Any

    def __post_init__(self) -> None:
        if isinstance(self.value, bool | np.bool_) or not isinstance(
            self.value, _NUMBERS + _DATETIMES
        ):
            raise TypeError(
                "Time takes a number or a date or time (datetime64, datetime, date, pandas "
                f"Timestamp, date string), got {self.value!r}"
            )

    def __repr__(self) -> str:
        return f"Time({self.value!r})"


def _is_time(x: Any) -> bool:
    """Ours or sekai's `Time`."""
    return isinstance(x, Time) or (
        type(x).__name__ == "Time"
        and type(x).__module__.startswith("sekai.")
        and hasattr(x, "value")
    )


def _is_pandas(x: Any) -> bool:
    mod = type(x).__module__
    return mod.split(".")[0] == "pandas" and type(x).__name__ in ("Series", "DataFrame")


def row_of(timestamps: np.ndarray, when: Any, *, what: str = "the time") -> int:
    """The row that `when` names on the time axis `timestamps`, as sekai reads it.

    An `int` (numpy ints too) is a row position (negative counts from the end), returned
    without a range check. Anything else is a timestamp, and gives the first row at or
    after it (`len(timestamps)` if none): dates and times (anything `numpy.datetime64`
    accepts) on a datetime axis, floats on a numeric one, `Time(t)` on either.

    Raises:
        TypeError: a bool.
        ValueError: a timestamp that does not suit the axis, NaN/NaT, or timezone-aware.
    """
    if isinstance(when, bool | np.bool_):
        raise TypeError(f"{what} must be a row position or a timestamp, got {when!r}")
    if isinstance(when, int | np.integer):
        return int(when) if when >= 0 else int(timestamps.shape[0]) + int(when)
    value = when.value if _is_time(when) else when
    key: Any
    if timestamps.dtype.kind == "M":
        if not isinstance(value, _DATETIMES):
            raise ValueError(
                f"{what} {when!r} is not a date or time, but the timestamps are dates; pass "
                "anything numpy.datetime64 accepts, or an int row position"
            )
        key = _naive_datetime(value, what)
        if np.isnat(key):
            raise ValueError(f"{what} {when!r} is NaT")
    else:
        if isinstance(value, bool | np.bool_) or not isinstance(value, _NUMBERS):
            raise ValueError(
                f"{what} {when!r} is not a number, but the timestamps are numeric "
                f"({timestamps[0]} .. {timestamps[-1]}); pass an int row position or Time(t)"
            )
        if not np.isfinite(value):
            raise ValueError(f"{what} {when!r} is not finite")
        key = value
    return int(np.searchsorted(timestamps, key, side="left"))


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


class MarketData:
    """An immutable, time-aligned panel of market data, resolved on the host.

    Args:
        prices: close prices `(T, N)`, or `(T,)` for one asset: an array, or a pandas
            Series/DataFrame (its index gives the timestamps and a DataFrame's columns the
            asset ids, unless given). NaN marks an unlisted asset; finite prices must be > 0.
        volume: shares traded per row `(T, N)` (optional; `SquareRootImpact` reads it).
        spread: quoted bid-ask spread per row `(T, N)`, a fraction of the price (optional;
            the quoted `SpreadCost()` reads it).
        fields: more per-asset fields, each `(T, N)`. Pandas fields are aligned to pandas
            prices (index and columns; missing values become NaN). NaN is allowed in every
            field, infinities are not.
        timestamps: `(T,)` strictly increasing numbers, or dates (`datetime64`, datetimes,
            pandas Timestamps, date strings; timezone-naive). Default: the pandas index,
            else `0..T-1`.
        assets: `N` unique asset ids (default: DataFrame columns, else `asset_0, ...`).
        price_field: the name of the price field (`"close"`).
        warmup: leading rows that are lookback-only history (a split's `history`): an env
            observes them but never decides on them. An int in `[0, T]`.

    Raises:
        ValueError: a field that is not 2-D, has infinities, or another shape; fewer than 2
            rows; a price <= 0; bad timestamps (shape, order, NaT, timezone); asset ids of
            the wrong count or not unique; a `warmup` outside `[0, T]`.
        TypeError: timestamps that are neither numbers nor dates; a `warmup` that is not an
            int.

    Example:
        >>> import numpy as np
        >>> data = MarketData(
        ...     np.linspace(100.0, 110.0, 5),
        ...     volume=np.full(5, 1e6),
        ...     timestamps=["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"],
        ... )
        >>> data
        MarketData(T=5, N=1, fields=['close', 'volume'], 2024-01-01 .. 2024-01-05)
        >>> data.index_of("2024-01-03"), data.close.shape
        (2, (5, 1))
    """

    def __init__(
        self,
        prices: Any = None,
        *,
        volume: Any = None,
        spread: Any = None,
        fields: Mapping[str, Any] | None = None,
        timestamps: Any = None,
        assets: Sequence[Any] | None = None,
        price_field: str = "close",
        warmup: Any = 0,
    ) -> None:
        raw: dict[str, Any] = dict(fields or {})
        for name, value in (("volume", volume), ("spread", spread)):
            if value is not None:
                if name in raw:
                    raise ValueError(f"{name} given twice: as {name}= and as fields[{name!r}]")
                raw[name] = value
        if prices is not None:
            if price_field in raw:
                raise ValueError(f"prices given twice: as prices= and as fields[{price_field!r}]")
            raw[price_field] = prices
        if price_field not in raw:
            raise ValueError(f"MarketData needs prices= (or a {price_field!r} field)")
        source = raw[price_field]
        if _is_pandas(source):
            if timestamps is None:
                index = source.index
                timestamps = index if type(index).__name__ == "DatetimeIndex" else index.values
            if assets is None and type(source).__name__ == "DataFrame":
                assets = [str(c) for c in source.columns]
            if assets is None and getattr(source, "name", None) is not None:
                assets = [str(source.name)]
            raw = {name: _aligned(name, value, source) for name, value in raw.items()}

        arrays: dict[str, np.ndarray] = {}
        for name, value in raw.items():
            arg = name if name in ("volume", "spread") else f"fields[{name!r}]"
            arg = "prices" if name == price_field else arg
            try:
                arr = np.array(value, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"{arg} must hold numbers, got {type(value).__name__}") from None
            if arr.ndim == 1:
                arr = arr[:, None]
            if arr.ndim != 2:
                raise ValueError(f"{arg} must be 2-D (T, N), got shape {arr.shape}")
            if np.isinf(arr).any():
                raise ValueError(f"{arg} contains infinite values; use NaN for missing")
            arrays[name] = arr
        shape = arrays[price_field].shape
        for name, arr in arrays.items():
            if arr.shape != shape:
                raise ValueError(
                    f"field {name!r} has shape {arr.shape} but the prices have {shape}"
                )
        n_steps, n_assets = shape
        if n_steps < 2 or n_assets < 1:
            raise ValueError(f"MarketData needs at least 2 rows and 1 asset, got shape {shape}")
        price = arrays[price_field]
        if np.any(price[np.isfinite(price)] <= 0):
            raise ValueError("prices must be > 0 where they are defined (NaN = not listed)")

        self._timestamps = _readonly(_time_axis(timestamps, n_steps))
        ids = tuple(f"asset_{i}" for i in range(n_assets)) if assets is None else tuple(assets)
        if len(ids) != n_assets:
            raise ValueError(f"assets has {len(ids)} ids for {n_assets} assets")
        if len(set(ids)) != n_assets:
            raise ValueError(f"assets must be unique, got {list(ids)}")
        if isinstance(warmup, bool | np.bool_):
            raise TypeError(f"warmup must be an int, got {warmup!r}")
        try:
            n_warmup = operator.index(warmup)
        except TypeError:
            raise TypeError(f"warmup must be an int, got {warmup!r}") from None
        if not 0 <= n_warmup <= n_steps:
            raise ValueError(f"warmup must be in [0, {n_steps}], got {n_warmup}")
        self._fields = {name: _readonly(arr) for name, arr in arrays.items()}
        self._assets = ids
        self._warmup = int(n_warmup)
        self.price_field = price_field

    # -- construction from sekai -------------------------------------------------------------
    @classmethod
    def from_sekai(cls, data: Any) -> MarketData:
        """A sekai `MarketData` as ours: its fields, timestamps, assets and warm-up rows.

        Args:
            data: a `sekai.finance.MarketData` (exogenous series are not carried over: the
                four finance envs do not read them).

        Raises:
            TypeError: anything else.

        Example:
            >>> import numpy as np
            >>> import sekai.finance as sf
            >>> theirs = sf.MarketData(np.linspace(100.0, 120.0, 30)).split(0.5, history=5)[1]
            >>> ours = MarketData.from_sekai(theirs)
            >>> ours.warmup, ours.n_steps, int(ours.timestamps[0])
            (5, 20, 10)
        """
        if not (type(data).__name__ == "MarketData" and type(data).__module__.startswith("sekai.")):
            raise TypeError(f"from_sekai takes a sekai MarketData, got {type(data).__name__}")
        return cls(
            fields=dict(data.fields),
            timestamps=np.asarray(data.timestamps),
            assets=tuple(data.assets),
            price_field=data.price_field,
            warmup=int(data.warmup),
        )

    # -- accessors ---------------------------------------------------------------------------
    @property
    def close(self) -> np.ndarray:
        """Close prices, float64 `(T, N)`, NaN where an asset is not listed (read-only)."""
        return self._fields[self.price_field]

    prices = close

    @property
    def volume(self) -> np.ndarray | None:
        """Shares traded per row, float64 `(T, N)`, or None."""
        return self._fields.get("volume")

    @property
    def spread(self) -> np.ndarray | None:
        """Quoted spread per row (fraction of the price), float64 `(T, N)`, or None."""
        return self._fields.get("spread")

    @property
    def fields(self) -> dict[str, np.ndarray]:
        """Every per-asset field by name, prices included."""
        return dict(self._fields)

    def field(self, name: str) -> np.ndarray:
        """One per-asset field `(T, N)`; `KeyError` naming the available ones."""
        try:
            return self._fields[name]
        except KeyError:
            raise KeyError(f"no field {name!r}; available: {sorted(self._fields)}") from None

    @property
    def timestamps(self) -> np.ndarray:
        """The `(T,)` time axis: int64 rows, numbers, or datetime64[ns] (read-only)."""
        return self._timestamps

    @property
    def assets(self) -> tuple[Any, ...]:
        """The `N` asset ids."""
        return self._assets

    @property
    def n_steps(self) -> int:
        """`T`, the number of rows."""
        return int(self._timestamps.shape[0])

    @property
    def n_assets(self) -> int:
        """`N`, the number of assets."""
        return len(self._assets)

    @property
    def is_datetime(self) -> bool:
        """Whether the time axis holds dates."""
        return self._timestamps.dtype.kind == "M"

    @property
    def warmup(self) -> int:
        """Leading lookback-only rows: observable, never a decision row."""
        return self._warmup

    @property
    def periods_per_year(self) -> float | None:
        """Rows per year implied by dates, `(T - 1) / (span_days / 365.25)`; else None."""
        if not self.is_datetime:
            return None
        span = (self._timestamps[-1] - self._timestamps[0]) / np.timedelta64(1, "D")
        return float((self.n_steps - 1) / (span / 365.25)) if span > 0 else None

    def index_of(self, when: Any) -> int:
        """The row of a point in time: an int row position, or a timestamp (`row_of`)."""
        return row_of(self._timestamps, when)

    # -- derived data ------------------------------------------------------------------------
    def __getitem__(self, rows: slice) -> MarketData:
        """Rows by position, `data[100:500]`; warm-up rows that the slice keeps stay warm-up."""
        if not isinstance(rows, slice):
            raise TypeError(
                f"MarketData is sliced by row positions, e.g. data[100:500], got {rows!r}"
            )
        return self._rows(rows)

    def _rows(self, rows: slice, warmup: int = 0) -> MarketData:
        kept = int(np.count_nonzero(np.arange(self.n_steps)[rows] < self._warmup))
        return MarketData(
            fields={name: arr[rows] for name, arr in self._fields.items()},
            timestamps=self._timestamps[rows],
            assets=self._assets,
            price_field=self.price_field,
            warmup=max(kept, warmup),
        )

    def split(self, *boundaries: Any, embargo: int = 0, history: int = 0) -> list[MarketData]:
        """Chronological parts, as sekai's `MarketData.split`.

        Each boundary is a fraction of the rows (a float in (0, 1)), an int row position, or
        a timestamp (a date on a dated axis, `Time(t)` on any). Every part after the first
        starts `embargo` rows after its boundary and prepends up to `history` earlier rows
        as warm-up (`warmup`): observed as lookback, never traded on.

        Raises:
            ValueError: no boundary, boundaries not increasing inside the data, a negative
                `embargo`/`history`, or a part with fewer than 2 rows after the embargo.

        Example:
            >>> import numpy as np
            >>> train, test = MarketData(np.linspace(100.0, 120.0, 100)).split(0.8, history=10)
            >>> train.n_steps, test.n_steps, test.warmup
            (80, 30, 10)
        """
        if embargo < 0 or history < 0:
            raise ValueError(f"embargo and history must be >= 0, got {embargo} and {history}")
        if not boundaries:
            raise ValueError("split() needs at least one split point")
        cuts = [self._boundary(b) for b in boundaries]
        if any(b <= a for a, b in zip([0, *cuts], [*cuts, self.n_steps], strict=True)):
            raise ValueError(
                f"split points must be increasing and inside the data, got rows {cuts}"
            )
        parts = [self[0 : cuts[0]]]
        for i, cut in enumerate(cuts):
            end = cuts[i + 1] if i + 1 < len(cuts) else self.n_steps
            begin = cut + embargo
            if end - begin < 2:
                raise ValueError(f"part {i + 1} has fewer than 2 rows after the embargo")
            low = max(begin - history, 0)
            parts.append(self._rows(slice(low, end), warmup=begin - low))
        return parts

    def _boundary(self, b: Any) -> int:
        if isinstance(b, float | np.floating):
            if not 0.0 < b < 1.0:
                raise ValueError(
                    f"a float split point is a fraction of the rows in (0, 1), got {b}; pass "
                    f"Time({b}) to split at a timestamp"
                )
            return round(float(b) * self.n_steps)
        return self.index_of(b)

    def __len__(self) -> int:
        return self.n_steps

    def __repr__(self) -> str:
        first, last = self._timestamps[0], self._timestamps[-1]
        if self.is_datetime:
            first, last = (np.datetime_as_string(t, unit="auto") for t in (first, last))
        extra = f", warmup={self._warmup}" if self._warmup else ""
        return (
            f"MarketData(T={self.n_steps}, N={self.n_assets}, fields={sorted(self._fields)}"
            f"{extra}, {first} .. {last})"
        )


def _aligned(name: str, value: Any, prices: Any) -> Any:
    """A pandas field aligned to pandas prices (index and columns); others unchanged."""
    if not _is_pandas(value) or value is prices:
        return value
    if type(prices).__name__ == "DataFrame":
        if type(value).__name__ == "DataFrame":
            return value.reindex(index=prices.index, columns=prices.columns)
        return value.reindex(prices.index)
    if type(value).__name__ == "DataFrame":
        if value.shape[1] != 1:
            raise ValueError(f"{name} has {value.shape[1]} columns but the prices are a Series")
        return value.reindex(prices.index)
    return value.reindex(prices.index)
