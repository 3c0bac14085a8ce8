"""`parallax.finance.load_lobster`: LOBSTER message and orderbook files.

Files written by `tests/lobster_files.py` (a random stream drawn against sekai's
`OrderBook`, the orderbook file from sekai's depth) load into the expected arrays, replay
through `process_messages` to the orderbook file's rows after every message, and load the
same in any chunk size; each malformed input is a `ValueError` naming file, line and column.
"""

from __future__ import annotations

import doctest
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import parallax.finance
from parallax.finance import lob
from parallax.finance._lob import _lobster

LEVELS = 4


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("sekai.finance.lob")
    from lobster_files import write_lobster_files

    return write_lobster_files(tmp_path_factory.mktemp("lobster"), seed=3, n=150, levels=LEVELS)


def test_the_names_are_public():
    assert parallax.finance.load_lobster is lob.load_lobster is _lobster.load_lobster
    assert "load_lobster" in lob.__all__ and "LobsterData" in lob.__all__


def test_the_arrays(written):
    data = lob.load_lobster(written.message_file, written.orderbook_file, levels=LEVELS)
    m = len(written.messages)
    assert len(data) == m and data.levels == LEVELS
    assert data.times.dtype == np.float64 and data.times.shape == (m,)
    np.testing.assert_allclose(data.times, written.times_ns / 1e9, rtol=0, atol=1e-6)
    assert np.all(np.diff(data.times) >= 0) and np.any(np.diff(data.times) == 0)
    assert data.messages.dtype == np.int32 and data.messages.shape == (m, 5)
    np.testing.assert_array_equal(data.messages, written.messages)
    for k, name in enumerate(("ask_price", "ask_size", "bid_price", "bid_size")):
        value = getattr(data, name)
        assert value.dtype == np.int64 and value.shape == (m, LEVELS)
        np.testing.assert_array_equal(value, written.book[:, k::4])
    assert set(data.messages[:, 0].tolist()) == {1, 2, 3, 4, 5}
    assert np.any(data.ask_price == _lobster.LOBSTER_ASK_DUMMY)  # empty levels occur
    assert not data.messages.flags.writeable


def _lobster_units(prices, sizes, dummy):
    prices, sizes = np.asarray(prices, np.int64), np.asarray(sizes, np.int64)
    return np.where(sizes > 0, prices * 100, dummy), sizes


def test_replay_matches_the_orderbook_file_after_every_message(written):
    data = lob.load_lobster(written.message_file, written.orderbook_file, levels=LEVELS)
    final, results = lob.process_messages(lob.empty_book(64), data.messages, tick=100)
    assert results.status.tolist() == [lob.OK] * len(data)

    def step(book, message):
        book, result = lob.process_message(book, message, tick=100)
        return book, (lob.depth_levels(book, LEVELS), result.status)

    _, (depth, status) = jax.jit(lambda b, m: jax.lax.scan(step, b, m))(
        lob.empty_book(64), jnp.asarray(data.messages)
    )
    assert status.tolist() == [lob.OK] * len(data)
    bid_p, bid_s, ask_p, ask_s = (np.asarray(x) for x in depth)
    ask_price, ask_size = _lobster_units(ask_p, ask_s, _lobster.LOBSTER_ASK_DUMMY)
    bid_price, bid_size = _lobster_units(bid_p, bid_s, _lobster.LOBSTER_BID_DUMMY)
    for i in range(len(data)):  # message by message, to name the first that differs
        got = (ask_price[i], ask_size[i], bid_price[i], bid_size[i])
        want = (data.ask_price[i], data.ask_size[i], data.bid_price[i], data.bid_size[i])
        assert all(np.array_equal(g, w) for g, w in zip(got, want)), (i, got, want)
    last = tuple(np.asarray(x) for x in lob.depth_levels(final, LEVELS))
    assert all(np.array_equal(a, b[-1]) for a, b in zip(last, (bid_p, bid_s, ask_p, ask_s)))


def test_chunked_loading_gives_the_same_arrays(written):
    whole = lob.load_lobster(written.message_file, written.orderbook_file, levels=LEVELS)
    for chunk in (1, 7, len(whole), 10 * len(whole)):
        part = lob.load_lobster(
            written.message_file, written.orderbook_file, levels=LEVELS, _chunk_lines=chunk
        )
        for name in ("times", "messages", "ask_price", "ask_size", "bid_price", "bid_size"):
            np.testing.assert_array_equal(getattr(part, name), getattr(whole, name))


# hand-written files: 2 messages, 1 level
GOOD_MESSAGES = ["34200.1,1,7,100,1000100,-1", "34200.2,1,8,50,999900,1"]
GOOD_BOOK = ["1000100,100,-9999999999,0", "1000100,100,999900,50"]


def _load(tmp_path: pathlib.Path, messages, book, levels=1, chunk=2):
    mf, bf = tmp_path / "msg.csv", tmp_path / "book.csv"
    mf.write_text("".join(line + "\n" for line in messages))
    bf.write_text("".join(line + "\n" for line in book))
    return lob.load_lobster(mf, bf, levels=levels, _chunk_lines=chunk), mf, bf


def test_hand_written_files_load(tmp_path):
    data, _, _ = _load(tmp_path, GOOD_MESSAGES, GOOD_BOOK)
    assert data.messages.tolist() == [[1, 7, 100, 1000100, -1], [1, 8, 50, 999900, 1]]
    assert data.bid_price.tolist() == [[-9999999999], [999900]]
    empty, _, _ = _load(tmp_path, [], [], levels=3)
    assert empty.messages.shape == (0, 5) and empty.ask_price.shape == (0, 3)


def _message(row: int, **fields: str) -> list[str]:
    names = ("time", "type", "order_id", "size", "price", "direction")
    lines = [line.split(",") for line in GOOD_MESSAGES]
    for name, value in fields.items():
        lines[row][names.index(name)] = value
    return [",".join(line) for line in lines]


MESSAGE_ERRORS = {
    "too few fields": (["34200.1,1,7,100,1000100", GOOD_MESSAGES[1]], 1, None, "5 columns"),
    "too many fields": ([GOOD_MESSAGES[0], GOOD_MESSAGES[1] + ",3"], 2, None, "7 columns"),
    "an empty row": ([GOOD_MESSAGES[0], ""], 2, None, "empty row"),
    "not a number": (_message(1, size="lots"), 2, 4, "'lots' is not an integer"),
    "a float id": (_message(0, order_id="7.5"), 1, 3, "not an integer"),
    "a bad time": (_message(1, time="9:30"), 2, 1, "not a number"),
    "a nan time": (_message(1, time="nan"), 2, 1, "not a finite time"),
    "time backwards": (_message(1, time="34200.05"), 2, 1, "goes back"),
    "unknown type": (_message(1, type="8"), 2, 2, "unknown type 8"),
    "bad direction": (_message(0, direction="0"), 1, 6, "direction 0"),
    "negative size": (_message(1, size="-5"), 2, 4, "negative size -5"),
    "price beyond int32": (_message(1, price="2147483648"), 2, 5, "does not fit in int32"),
    "id beyond int32": (_message(0, order_id="-2147483649"), 1, 3, "does not fit in int32"),
    "beyond int64": (_message(0, order_id="99999999999999999999"), 1, 3, "does not fit in int64"),
}


def _error(tmp_path, messages, book, file, why):
    """The message of the `ValueError` that loading `messages` and `book` raises; it names
    `file` and says `why`."""
    with pytest.raises(ValueError) as info:
        _load(tmp_path, messages, book)
    text = str(info.value)
    assert str(tmp_path / file) in text and why in text, text
    return text


@pytest.mark.parametrize("case", MESSAGE_ERRORS)
def test_message_file_errors_name_file_line_and_column(tmp_path, case):
    messages, line, column, why = MESSAGE_ERRORS[case]
    text = _error(tmp_path, messages, GOOD_BOOK, "msg.csv", why)
    if column is None:
        assert re.search(rf"lines? {line}\b", text), text
    else:
        assert f"line {line}, column {column} (" in text, text


BOOK_ERRORS = {
    "too few columns": (
        [GOOD_BOOK[0], "1000100,100,999900"],
        2,
        None,
        "3 columns, expected 4 * levels = 4",
    ),
    "not a number": ([GOOD_BOOK[0], "1000100,x,999900,50"], 2, 2, "(ask_size_1): 'x'"),
    "negative size": ([GOOD_BOOK[0], "1000100,100,999900,-50"], 2, 4, "(bid_size_1): negative"),
}


@pytest.mark.parametrize("case", BOOK_ERRORS)
def test_orderbook_file_errors_name_file_line_and_column(tmp_path, case):
    book, line, column, why = BOOK_ERRORS[case]
    text = _error(tmp_path, GOOD_MESSAGES, book, "book.csv", why)
    at = f"line {line}" if column is None else f"line {line}, column {column} "
    assert at in text, text


def test_orderbook_columns_must_be_four_per_level(tmp_path):
    with pytest.raises(
        ValueError, match=r"book\.csv: line 1: 4 columns, expected 4 \* levels = 8 columns"
    ) as info:
        _load(tmp_path, GOOD_MESSAGES, GOOD_BOOK, levels=2)
    assert str(tmp_path / "book.csv") in str(info.value)


@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_mismatched_row_counts(tmp_path, chunk):
    with pytest.raises(ValueError) as info:
        _load(tmp_path, GOOD_MESSAGES, GOOD_BOOK[:1], chunk=chunk)
    text = str(info.value)
    assert f"{tmp_path / 'msg.csv'}: line 2: no matching row in {tmp_path / 'book.csv'}" in text
    with pytest.raises(ValueError) as info:
        _load(tmp_path, GOOD_MESSAGES[:1], GOOD_BOOK, chunk=chunk)
    text = str(info.value)
    assert f"{tmp_path / 'book.csv'}: line 2: no matching row in {tmp_path / 'msg.csv'}" in text


def test_errors_name_lines_past_the_first_chunk(tmp_path):
    messages = [f"34200.{k},1,{k},10,1000100,-1" for k in range(1, 8)]
    messages[5] = "34200.6,1,6,10,1000100,2"
    with pytest.raises(ValueError, match=r"line 6, column 6 \(direction\)"):
        _load(tmp_path, messages, ["1000100,10,-9999999999,0"] * 7, chunk=2)
    messages[5] = "34200.0,1,6,10,1000100,1"  # back from the chunk before
    with pytest.raises(ValueError, match=r"line 6, column 1 \(time\)"):
        _load(tmp_path, messages, ["1000100,10,-9999999999,0"] * 7, chunk=5)


@pytest.mark.parametrize("levels", [0, -1, 1.5, True, "3", None])
def test_levels_must_be_a_positive_int(tmp_path, levels):
    with pytest.raises(ValueError, match="levels must be a positive int"):
        _load(tmp_path, GOOD_MESSAGES, GOOD_BOOK, levels=levels)


def test_docstring_examples_run():
    result = doctest.testmod(_lobster, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
