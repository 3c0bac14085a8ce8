"""Training on Parallax environments: a PPO whose whole training is one `jax.jit`.

`make_train(config)` returns a pure `train(key)` (jit-able, and vmappable over seeds:
`jax.jit(jax.vmap(train))(keys)`); `make_evaluate(config)` scores the trained policy against
a random policy and, on the finance envs, the closed-form baseline on the same episodes;
`run(config, seed)` does both with a progress bar. `preset(env_id, **overrides)` gives tuned
hyper-parameters for the bundled envs. `examples/ppo.py` is the command-line front end.

Needs the `train` extra (optax, tqdm); importing this package without optax raises an
`ImportError` naming it.

Example:
    >>> import jax
    >>> from parallax import train
    >>> config = train.preset("GridWorld-v0", total_steps=1024, num_envs=4, num_steps=16)
    >>> config.num_updates
    16
"""

from .._project import install_command

try:
    import optax as _optax  # noqa: F401  (the dependency check; _ppo_train imports it too)
except ModuleNotFoundError as _error:
    if _error.name != "optax":
        raise
    raise ImportError(
        f"parallax.train needs optax, which is not installed: {install_command(['train'])}",
        name="optax",
    ) from _error

from ._ppo import PRESETS as PRESETS
from ._ppo import Config as Config
from ._ppo import make_env as make_env
from ._ppo import make_eval_env as make_eval_env
from ._ppo import preset as preset
from ._ppo import true_action_space as true_action_space
from ._ppo_evaluate import Progress as Progress
from ._ppo_evaluate import make_evaluate as make_evaluate
from ._ppo_evaluate import run as run
from ._ppo_network import ActionHead as ActionHead
from ._ppo_network import actor as actor
from ._ppo_network import critic as critic
from ._ppo_network import init_params as init_params
from ._ppo_train import Learner as Learner
from ._ppo_train import gae as gae
from ._ppo_train import make_learner as make_learner
from ._ppo_train import make_train as make_train

__all__ = [
    "PRESETS",
    "ActionHead",
    "Config",
    "Learner",
    "Progress",
    "actor",
    "critic",
    "gae",
    "init_params",
    "make_env",
    "make_eval_env",
    "make_evaluate",
    "make_learner",
    "make_train",
    "preset",
    "run",
    "true_action_space",
]
