"""The limit order book and `LimitOrderBook-v0` (issue 19).

- `LimitOrderBookEnv`, `LimitOrderBookParams`, `LimitOrderBookState`,
  `LimitOrderBookEnvState`: the single-agent env (sekai's `LimitOrderBookEnv`).
- `Book`, `Fills`: the book as fixed-shape arrays and the result of one incoming order.
- `BID`, `ASK`, `BACKGROUND`: side codes and the background owner id.
- `empty_book`, `add_limit`, `market_order`, `submit_order`, `cancel`, `cancel_slot`: order
  entry.
- `best_bid`, `best_ask`, `depth_levels`, `queue_position`: queries.
- `FlowParams`, `FlowStats`, `FLOW_SLOTS`, `initialise`, `run_flow`, `warm_up`,
  `default_max_events`, `default_capacity`: the background order flow between decisions.
- `LimitOrderBookMarketEnv`, `LimitOrderBookMarketState`, `MARKET_SLOTS`: the multi-agent
  market (sekai's `LimitOrderBookMarket`), traders on their own jittered clocks.

See `docs/finance/lob.md` for the layout, the matching rule and what is proven.
"""

from ._book import ASK as ASK
from ._book import BACKGROUND as BACKGROUND
from ._book import BID as BID
from ._book import Book as Book
from ._book import Fills as Fills
from ._book import add_limit as add_limit
from ._book import cancel as cancel
from ._book import cancel_slot as cancel_slot
from ._book import empty_book as empty_book
from ._book import market_order as market_order
from ._book import submit_order as submit_order
from ._book_queries import best_ask as best_ask
from ._book_queries import best_bid as best_bid
from ._book_queries import depth_levels as depth_levels
from ._book_queries import queue_position as queue_position
from ._env import LimitOrderBookEnv as LimitOrderBookEnv
from ._env import LimitOrderBookEnvState as LimitOrderBookEnvState
from ._env import LimitOrderBookParams as LimitOrderBookParams
from ._env import LimitOrderBookState as LimitOrderBookState
from ._flow import initialise as initialise
from ._flow import run_flow as run_flow
from ._flow import warm_up as warm_up
from ._flow_bounds import default_capacity as default_capacity
from ._flow_bounds import default_max_events as default_max_events
from ._flow_draws import FLOW_SLOTS as FLOW_SLOTS
from ._flow_params import FlowParams as FlowParams
from ._flow_params import FlowStats as FlowStats
from ._market_env import MARKET_SLOTS as MARKET_SLOTS
from ._market_env import LimitOrderBookMarketEnv as LimitOrderBookMarketEnv
from ._market_env import LimitOrderBookMarketState as LimitOrderBookMarketState

__all__ = [
    "ASK",
    "BACKGROUND",
    "BID",
    "FLOW_SLOTS",
    "MARKET_SLOTS",
    "Book",
    "Fills",
    "FlowParams",
    "FlowStats",
    "LimitOrderBookEnv",
    "LimitOrderBookEnvState",
    "LimitOrderBookMarketEnv",
    "LimitOrderBookMarketState",
    "LimitOrderBookParams",
    "LimitOrderBookState",
    "add_limit",
    "best_ask",
    "best_bid",
    "cancel",
    "cancel_slot",
    "default_capacity",
    "default_max_events",
    "depth_levels",
    "empty_book",
    "initialise",
    "market_order",
    "queue_position",
    "run_flow",
    "submit_order",
    "warm_up",
]
