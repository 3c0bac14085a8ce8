"""Market models as pure JAX functions of the counter RNG (sekai 0.2.0's `simulators`).

Each model is an immutable params pytree: its numbers are leaves, and its shape-fixing
fields are static. Its constructor takes sekai's arguments and defaults, and checks them
with sekai's error types and messages. Its dynamics are two pure functions with fixed
shapes:

- `model.init(episode_key) -> ModelState`: the state at path row 0 (prices `s0`);
- `model.step(state, episode_key, t) -> (ModelState, prices)`: from row `t` to `t + 1`,
  which is `model.advance(state, model.draws(episode_key, t, dtype))`: the step's random
  numbers (a dict keyed by what they are, `("normal", slot, width)`, ...), then its
  arithmetic. A `Randomized` mixture makes a draw that several of its models use once.

A draw is `parallax.rng.<draw>(episode_key, t, slot, index)`, with the slots declared in
the model's `SLOTS` table. So path row `t` never depends on how many rows were made before
it: a reset costs O(1), and one more row costs one step. `model.simulate(episode_key, n)`
materialises a path. `model.sekai_draws(episode_key, n)` lists the draws that sekai's
`simulate(rng, n)` asks for, in sekai's order, holding our values (for differential tests).

Holds:

- `MarketModel`, `ModelState`, `Simulation` (`_base`);
- `GBM`, `MeanReverting`, `CointegratedPair` (`_gbm`); `Heston`, `GARCH` (`_volatility`);
  `MertonJumpDiffusion` (`_jumps`); `RegimeSwitching` (`_regimes`); `BlockBootstrap`
  (`_bootstrap`); `Randomized` (`_randomized`); `from_sekai` (`_convert`).
"""

from __future__ import annotations

from ._base import MarketModel as MarketModel
from ._base import ModelState as ModelState
from ._base import Simulation as Simulation
from ._bootstrap import BlockBootstrap as BlockBootstrap
from ._convert import from_sekai as from_sekai
from ._gbm import GBM as GBM
from ._gbm import CointegratedPair as CointegratedPair
from ._gbm import MeanReverting as MeanReverting
from ._jumps import MertonJumpDiffusion as MertonJumpDiffusion
from ._randomized import Randomized as Randomized
from ._regimes import RegimeSwitching as RegimeSwitching
from ._volatility import GARCH as GARCH
from ._volatility import Heston as Heston

__all__ = [
    "GARCH",
    "GBM",
    "BlockBootstrap",
    "CointegratedPair",
    "Heston",
    "MarketModel",
    "MeanReverting",
    "MertonJumpDiffusion",
    "ModelState",
    "Randomized",
    "RegimeSwitching",
    "Simulation",
    "from_sekai",
]
