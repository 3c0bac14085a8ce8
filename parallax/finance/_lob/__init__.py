"""The limit order book (work in progress on issue 19; private: no env is registered yet).

- `Book`, `Fills`: the book as fixed-shape arrays and the result of one incoming order.
- `BID`, `ASK`, `BACKGROUND`: side codes and the background owner id.
- `empty_book`, `add_limit`, `market_order`, `cancel`, `cancel_slot`: order entry.
- `best_bid`, `best_ask`, `depth_levels`, `queue_position`: queries.

See `docs/finance/lob.md` for the layout, the matching rule and what is proven.
"""

from ._book import ASK as ASK
from ._book import BACKGROUND as BACKGROUND
from ._book import BID as BID
from ._book import Book as Book
from ._book import Fills as Fills
from ._book import add_limit as add_limit
from ._book import best_ask as best_ask
from ._book import best_bid as best_bid
from ._book import cancel as cancel
from ._book import cancel_slot as cancel_slot
from ._book import depth_levels as depth_levels
from ._book import empty_book as empty_book
from ._book import market_order as market_order
from ._book import queue_position as queue_position

__all__ = [
    "ASK",
    "BACKGROUND",
    "BID",
    "Book",
    "Fills",
    "add_limit",
    "best_ask",
    "best_bid",
    "cancel",
    "cancel_slot",
    "depth_levels",
    "empty_book",
    "market_order",
    "queue_position",
]
