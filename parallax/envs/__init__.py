"""Example environments from the Parallax documentation, shipped as real code.

- `GridWorld`: walk to a random goal on a 5x5 grid (single agent, `Discrete(4)` actions).
- `MaskedGridWorld`, `MaskedState`, `compute_mask`: the same with a legal-action mask.
- `Race`: three agents race to position 10 (multi-agent, the MARL timing contract).

They are small, cheap and exact, and serve the tests, the docs and `make demo`.
"""

from ._gridworld import GridState as GridState
from ._gridworld import GridWorld as GridWorld
from ._gridworld import MaskedGridWorld as MaskedGridWorld
from ._gridworld import MaskedState as MaskedState
from ._gridworld import compute_mask as compute_mask
from ._race import Race as Race

__all__ = ["GridState", "GridWorld", "MaskedGridWorld", "MaskedState", "Race", "compute_mask"]
