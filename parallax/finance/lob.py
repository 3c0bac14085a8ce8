"""The limit order book on its own: price-time priority over fixed-shape arrays.

The book that `LimitOrderBook-v0` and `LimitOrderBookMarket-v0` trade in, for use without
an env: replay a message stream, write a simulator, test a strategy against a book.
Every function is pure and `jit`/`vmap`/`scan`-able (`docs/finance/lob.md`).

- `Book`, `Fills`, `empty_book(capacity)`; `BID`, `ASK`, `BACKGROUND`.
- orders: `add_limit`, `market_order`, `submit_order`, `cancel`, `cancel_slot`.
- queries: `best_bid`, `best_ask`, `depth_levels`, `queue_position`.
- message streams (LOBSTER's event types): `process_message`, `process_messages`,
  `MessageResult`, the types `SUBMIT`, `CANCEL`, `DELETE`, `EXECUTE`, `HIDDEN`, `CROSS`,
  `HALT`, `MARKET` and the statuses `OK`, ..., `STATUS_NAMES`.
- LOBSTER files: `load_lobster(message_file, orderbook_file, levels=...)`, `LobsterData`.

Example:
    >>> from parallax.finance.lob import ASK, BID, add_limit, best_ask, best_bid, empty_book
    >>> book, _ = add_limit(empty_book(16), ASK, 101, 5)
    >>> book, _ = add_limit(book, BID, 99, 2)
    >>> int(best_bid(book)), int(best_ask(book))
    (99, 101)
"""

from ._lob import _book, _messages
from ._lob._book import ASK as ASK
from ._lob._book import BACKGROUND as BACKGROUND
from ._lob._book import BID as BID
from ._lob._book import Book as Book
from ._lob._book import Fills as Fills
from ._lob._book import add_limit as add_limit
from ._lob._book import cancel as cancel
from ._lob._book import cancel_slot as cancel_slot
from ._lob._book import empty_book as empty_book
from ._lob._book import market_order as market_order
from ._lob._book import submit_order as submit_order
from ._lob._book_queries import best_ask as best_ask
from ._lob._book_queries import best_bid as best_bid
from ._lob._book_queries import depth_levels as depth_levels
from ._lob._book_queries import queue_position as queue_position
from ._lob._lobster import LobsterData as LobsterData
from ._lob._lobster import load_lobster as load_lobster
from ._lob._messages import BAD_SIDE as BAD_SIDE
from ._lob._messages import BAD_SIZE as BAD_SIZE
from ._lob._messages import CANCEL as CANCEL
from ._lob._messages import CLIPPED as CLIPPED
from ._lob._messages import CROSS as CROSS
from ._lob._messages import DELETE as DELETE
from ._lob._messages import DUPLICATE_ID as DUPLICATE_ID
from ._lob._messages import EXECUTE as EXECUTE
from ._lob._messages import HALT as HALT
from ._lob._messages import HIDDEN as HIDDEN
from ._lob._messages import MARKET as MARKET
from ._lob._messages import OFF_GRID as OFF_GRID
from ._lob._messages import OK as OK
from ._lob._messages import OVERFLOW as OVERFLOW
from ._lob._messages import STATUS_NAMES as STATUS_NAMES
from ._lob._messages import SUBMIT as SUBMIT
from ._lob._messages import UNKNOWN_ID as UNKNOWN_ID
from ._lob._messages import UNKNOWN_TYPE as UNKNOWN_TYPE
from ._lob._messages import MessageResult as MessageResult
from ._lob._messages import process_message as process_message
from ._lob._messages import process_messages as process_messages

__all__ = ["LobsterData", "best_ask", "best_bid", "depth_levels", "load_lobster", "queue_position"]
__all__ += _book.__all__  # the book's names, each imported above
__all__ += _messages.__all__  # the message stream's names, likewise
