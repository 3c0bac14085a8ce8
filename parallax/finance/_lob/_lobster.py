"""`load_lobster`: read a LOBSTER message file and its orderbook file into NumPy arrays.

LOBSTER (lobsterdata.com) writes one trading day of one stock as two headerless CSV files
with one row per event:

- the message file, 6 columns: `time` (seconds after midnight, up to 9 decimals), `type`
  (1 submission, 2 partial cancel, 3 deletion, 4 visible execution, 5 hidden execution,
  6 cross trade, 7 trading halt), `order_id`, `size`, `price` (dollars x 10,000) and
  `direction` (1 buy, -1 sell);
- the orderbook file, `4 * levels` columns: the book after that event, level by level,
  `ask_price_1, ask_size_1, bid_price_1, bid_size_1, ask_price_2, ...`; an empty level is
  written as price 9999999999 (ask) or -9999999999 (bid) with size 0.

The files are read a block of lines at a time (NumPy only), into arrays allocated once from
a count of the lines, so memory stays that of the output. Every problem is a `ValueError`
naming the file, the line (1-based) and the column.

Example:
    >>> import pathlib, tempfile
    >>> from parallax.finance.lob import load_lobster
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "m.csv").write_text("34200.5,1,7,100,1000100,-1\\n")
    >>> _ = (folder / "b.csv").write_text("1000100,100,-9999999999,0\\n")
    >>> data = load_lobster(folder / "m.csv", folder / "b.csv", levels=1)
    >>> data.messages.tolist(), data.ask_price.tolist(), data.bid_size.tolist()
    ([[1, 7, 100, 1000100, -1]], [[1000100]], [[0]])
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import os
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TextIO

import numpy as np

__all__ = ["LOBSTER_ASK_DUMMY", "LOBSTER_BID_DUMMY", "LobsterData", "load_lobster"]

LOBSTER_ASK_DUMMY = 9_999_999_999
"""The price LOBSTER writes for an empty ask level (its size is 0)."""
LOBSTER_BID_DUMMY = -9_999_999_999
"""The price LOBSTER writes for an empty bid level (its size is 0)."""

_TYPES = (1, 2, 3, 4, 5, 6, 7)
_MESSAGE_COLUMNS = ("time", "type", "order_id", "size", "price", "direction")
_INT32 = np.iinfo(np.int32)
_INT64 = np.iinfo(np.int64)
_CHUNK_LINES = 65_536
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
_FLOAT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")
_MESSAGE_DTYPE = np.dtype([("time", np.float64)] + [(c, np.int64) for c in _MESSAGE_COLUMNS[1:]])


@dataclasses.dataclass(frozen=True, eq=False)
class LobsterData:
    """One LOBSTER message file and its orderbook file, as read-only NumPy arrays.

    Attributes:
        times: float64 `(M,)`, seconds after midnight, non-decreasing.
        messages: int32 `(M, 5)`, `(type, order_id, size, price, direction)` per row, the
            column order of `process_messages` (LOBSTER's types 1-7, prices in dollars x
            10,000: replay with `tick=100` for a one-cent grid).
        ask_price, ask_size, bid_price, bid_size: int64 `(M, levels)`, the book after each
            message, best level first, as LOBSTER writes it (an empty level has price
            `LOBSTER_ASK_DUMMY` or `LOBSTER_BID_DUMMY` and size 0).
        levels: the levels per side of the orderbook file.
    """

    times: np.ndarray
    messages: np.ndarray
    ask_price: np.ndarray
    ask_size: np.ndarray
    bid_price: np.ndarray
    bid_size: np.ndarray
    levels: int

    def __len__(self) -> int:
        return int(self.times.shape[0])


def _check_levels(levels: Any) -> int:
    try:
        n = operator.index(levels)
    except TypeError:
        n = 0
    if isinstance(levels, bool) or n < 1:
        raise ValueError(f"load_lobster: levels must be a positive int, got {levels!r}")
    return n


def _count_lines(path: str) -> int:
    """Lines in the file (a last line without a newline counts), reading 1 MiB at a time."""
    count, last = 0, b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def _chunks(f: TextIO, size: int) -> Iterator[list[str]]:
    while lines := [line.rstrip("\r\n") for line in itertools.islice(f, size)]:
        yield lines


def _where(path: str, line: int, column: int | None = None, name: str = "") -> str:
    at = f"{path}: line {line}"
    if column is not None:
        at += f", column {column}" + (f" ({name})" if name else "")
    return at


def _find_bad_field(
    path: str,
    lines: list[str],
    first: int,
    width: int,
    name: Callable[[int], str],
    is_float: set[int],
) -> str | None:
    """The first malformed row of a block, in words; None when every row parses."""
    for i, line in enumerate(lines):
        fields = line.split(",")
        if len(fields) != width:
            what = "an empty row" if not line.strip() else f"{len(fields)} columns"
            expected = f"{width}" if is_float else f"4 * levels = {width}"
            return f"{_where(path, first + i)}: {what}, expected {expected} columns"
        for j, field in enumerate(fields):
            pattern = _FLOAT if j in is_float else _INTEGER
            if not pattern.fullmatch(field):
                kind = "a number" if j in is_float else "an integer"
                at = _where(path, first + i, j + 1, name(j))
                return f"{at}: {field.strip()!r} is not {kind}"
            if j not in is_float and not _INT64.min <= int(field) <= _INT64.max:
                at = _where(path, first + i, j + 1, name(j))
                return f"{at}: {field.strip()} does not fit in int64"
    return None


def _parse(
    path: str, lines: list[str], first: int, dtype: Any, width: int, name: Callable[[int], str]
) -> np.ndarray:
    """Parse a block with `np.loadtxt`; on any problem find the row and column in Python."""
    structured = dtype is _MESSAGE_DTYPE
    if not lines:
        return np.zeros(0, dtype) if structured else np.zeros((0, width), dtype)
    error = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # blank rows are skipped by NumPy: caught below
            parsed = np.loadtxt(
                lines, delimiter=",", dtype=dtype, comments=None, ndmin=1 if structured else 2
            )
        if parsed.shape[0] == len(lines) and (structured or parsed.shape[1] == width):
            return parsed
    except ValueError as e:
        error = e
    problem = _find_bad_field(path, lines, first, width, name, {0} if structured else set())
    if problem is None:  # NumPy refused what the row check accepts (not expected)
        problem = f"{path}: lines {first}-{first + len(lines) - 1}: cannot read: {error}"
    raise ValueError(f"load_lobster: {problem}")


def _first_failure(
    path: str, first: int, checks: list[tuple[np.ndarray, int, str, Callable[[int], str]]]
) -> None:
    """Raise for the earliest row (then leftmost check) where a check's mask is set."""
    worst = None
    for bad, column, name, why in checks:
        if bad.any():
            row = int(np.argmax(bad))
            if worst is None or row < worst[0]:
                worst = (row, column, name, why)
    if worst is not None:
        row, column, name, why = worst
        raise ValueError(f"load_lobster: {_where(path, first + row, column, name)}: {why(row)}")


def _says(values: np.ndarray, template: str) -> Callable[[int], str]:
    return lambda row: template.format(values[row])


def _check_messages(path: str, rows: np.ndarray, first: int, previous: float) -> None:
    times = rows["time"]
    before = np.concatenate([[previous], times[:-1]])
    checks: list[tuple[np.ndarray, int, str, Callable[[int], str]]] = [
        (~np.isfinite(times), 1, "time", lambda r: f"{float(times[r])} is not a finite time"),
        (
            times < before,
            1,
            "time",
            lambda r: f"time {float(times[r])} goes back from {float(before[r])}",
        ),
        (
            ~np.isin(rows["type"], _TYPES),
            2,
            "type",
            lambda r: f"unknown type {rows['type'][r]} (LOBSTER's types are 1-7)",
        ),
    ]
    for column, name in enumerate(_MESSAGE_COLUMNS[2:], start=3):
        values = rows[name]
        checks.append(
            (
                (values < _INT32.min) | (values > _INT32.max),
                column,
                name,
                _says(values, "{} does not fit in int32"),
            )
        )
    checks.append((rows["size"] < 0, 4, "size", lambda r: f"negative size {rows['size'][r]}"))
    direction = rows["direction"]
    checks.append(
        (
            (direction != 1) & (direction != -1),
            6,
            "direction",
            lambda r: f"direction {direction[r]} is not 1 (buy) or -1 (sell)",
        )
    )
    _first_failure(path, first, checks)


def _book_column(j: int) -> str:
    side = ("ask", "bid")[(j // 2) % 2]
    return f"{side}_{('price', 'size')[j % 2]}_{j // 4 + 1}"


def load_lobster(
    message_file: str | os.PathLike[str],
    orderbook_file: str | os.PathLike[str],
    *,
    levels: int,
    _chunk_lines: int = _CHUNK_LINES,
) -> LobsterData:
    """Read a LOBSTER message file and its orderbook file.

    Args:
        message_file: the message CSV (`time, type, order_id, size, price, direction`).
        orderbook_file: the orderbook CSV, `4 * levels` columns, one row per message.
        levels: the levels per side of the orderbook file, a positive int.

    Returns:
        A `LobsterData`: `times`, `messages` (int32 `(M, 5)`, ready for
        `process_messages(..., tick=100)`), `ask_price`, `ask_size`, `bid_price`,
        `bid_size` (int64 `(M, levels)`, LOBSTER's dummy prices kept) and `levels`.

    Raises:
        ValueError: `levels` is not a positive int; or, naming the file, the line and the
            column: a row with the wrong number of columns (6 for messages, `4 * levels` for
            the orderbook) or a field that is not a number (an integer, except `time`), a
            time that is not finite or goes backwards, a type outside 1-7, a direction not
            1 or -1, a negative size (either file), a message value that does not fit in
            int32, or files with different numbers of rows.
    """
    levels = _check_levels(levels)
    chunk = operator.index(_chunk_lines)
    if chunk < 1:
        raise ValueError(f"load_lobster: _chunk_lines must be positive, got {_chunk_lines!r}")
    message_path, book_path = os.fspath(message_file), os.fspath(orderbook_file)
    width = 4 * levels
    capacity = _count_lines(message_path)
    times = np.empty(capacity, np.float64)
    messages = np.empty((capacity, 5), np.int32)
    book = np.empty((capacity, width), np.int64)
    done, previous = 0, -np.inf
    with open(message_path) as mf, open(book_path) as bf:
        for message_lines, book_lines in itertools.zip_longest(
            _chunks(mf, chunk), _chunks(bf, chunk)
        ):
            message_lines, book_lines = message_lines or [], book_lines or []
            n = min(len(message_lines), len(book_lines))
            first = done + 1
            rows = _parse(
                message_path,
                message_lines[:n],
                first,
                _MESSAGE_DTYPE,
                6,
                _MESSAGE_COLUMNS.__getitem__,
            )
            _check_messages(message_path, rows, first, previous)
            values = _parse(book_path, book_lines[:n], first, np.int64, width, _book_column)
            negative = values[:, 1::2] < 0
            if negative.any():
                row, level = (int(k) for k in np.argwhere(negative)[0])
                at = _where(book_path, first + row, 2 * level + 2, _book_column(2 * level + 1))
                raise ValueError(f"load_lobster: {at}: negative size {values[row, 2 * level + 1]}")
            if len(message_lines) != len(book_lines):
                longer, shorter = (
                    (message_path, book_path)
                    if len(message_lines) > len(book_lines)
                    else (book_path, message_path)
                )
                raise ValueError(
                    f"load_lobster: {_where(longer, first + n)}: no matching row in {shorter}, "
                    f"which ends after {done + n} rows (the files must have one row per message)"
                )
            if done + n > capacity:  # the line count missed lines (a lone "\r" as newline)
                capacity = 2 * (done + n)
                times = np.resize(times, capacity)
                messages = np.resize(messages, (capacity, 5))
                book = np.resize(book, (capacity, width))
            times[done : done + n] = rows["time"]
            for column, name in enumerate(_MESSAGE_COLUMNS[1:]):
                messages[done : done + n, column] = rows[name]
            book[done : done + n] = values
            done += n
            if n:
                previous = float(rows["time"][-1])
    arrays: dict[str, np.ndarray] = {
        "times": times[:done],
        "messages": messages[:done],
        "ask_price": book[:done, 0::4],
        "ask_size": book[:done, 1::4],
        "bid_price": book[:done, 2::4],
        "bid_size": book[:done, 3::4],
    }
    for value in arrays.values():
        value.flags.writeable = False
    return LobsterData(**arrays, levels=levels)
