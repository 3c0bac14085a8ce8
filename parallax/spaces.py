"""Action and observation spaces (public namespace; see `parallax._spaces` for details).

- `Space`, `Discrete`, `Box`, `MultiDiscrete`, `MultiBinary`, `PyTreeSpace`, `stack_space`.
"""

from ._spaces import Box as Box
from ._spaces import Discrete as Discrete
from ._spaces import MultiBinary as MultiBinary
from ._spaces import MultiDiscrete as MultiDiscrete
from ._spaces import PyTreeSpace as PyTreeSpace
from ._spaces import Space as Space
from ._spaces import stack_space as stack_space

__all__ = ["Box", "Discrete", "MultiBinary", "MultiDiscrete", "PyTreeSpace", "Space", "stack_space"]
