"""Environment ids: `register`, `make`, `make_vec`, `registered_ids`.

An id maps to an entry point: a callable, or a lazy `"module:attribute"` string imported on
first use, so that optional dependencies are only imported when their envs are made.
Namespaced ids (`"gymnax/CartPole-v1"`) resolve through a namespace factory that receives
the name after the slash.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._validate import KeywordError, check_keywords, closest, keyword_message, keywords_of
from ._wrappers.action_check import with_action_checks
from ._wrappers.autoreset import AutoResetMode, VmapAutoResetWrapper
from ._wrappers.base import check_positive_int
from ._wrappers.time_limit import TimeLimit
from ._wrappers.vmap import VmapWrapper

EntryPoint = Callable[..., Any] | str


@dataclass(frozen=True)
class EnvSpec:
    """A registered environment: its id, entry point, default kwargs and a summary."""

    id: str
    entry_point: EntryPoint
    kwargs: dict[str, Any] = field(default_factory=dict)
    summary: str = ""

    def load(self) -> Callable[..., Any]:
        """The entry point as a callable (imports a lazy string entry point)."""
        return _load(self.entry_point)


_REGISTRY: dict[str, EnvSpec] = {}
_NAMESPACES: dict[str, tuple[EntryPoint, EntryPoint | None]] = {}


def _load(entry: EntryPoint) -> Callable[..., Any]:
    if callable(entry):
        return entry
    module, _, attr = entry.partition(":")
    if not module or not attr:
        raise ValueError(f"entry point must be 'module:attribute', got {entry!r}")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"entry point {entry!r} is not callable")
    return obj


def register(
    id: str, entry_point: EntryPoint, *, summary: str = "", override: bool = False, **kwargs: Any
) -> EnvSpec:
    """Register `id` so that `make(id, **overrides)` builds `entry_point(**kwargs, **overrides)`.

    An id that is already registered is refused (a `ValueError`), so two packages cannot
    silently replace each other's envs; pass `override=True` to replace it on purpose.

    Example:
        >>> import parallax
        >>> from parallax.envs import GridWorld
        >>> _ = parallax.register("MyGrid-v0", GridWorld)
        >>> parallax.make("MyGrid-v0")
        GridWorld()
    """
    if not isinstance(id, str) or not id:
        raise ValueError(f"register: id must be a non-empty string, got {id!r}")
    if "/" in id and id.split("/", 1)[0] in _NAMESPACES:
        raise ValueError(f"register: id {id!r} clashes with the namespace {id.split('/', 1)[0]!r}")
    if id in _REGISTRY and not override:
        raise ValueError(
            f"register: {id!r} is already registered (to {_REGISTRY[id].entry_point!r}); "
            "pass override=True to replace it"
        )
    spec = EnvSpec(id=id, entry_point=entry_point, kwargs=dict(kwargs), summary=summary)
    _REGISTRY[id] = spec
    return spec


def register_namespace(
    namespace: str, factory: EntryPoint, list_names: EntryPoint | None = None
) -> None:
    """Make `"namespace/NAME"` ids resolve to `factory(NAME, **kwargs)`.

    `list_names()`, if given, returns the names `registered_ids` lists for the namespace.
    """
    _NAMESPACES[namespace] = (factory, list_names)


def registered_ids(include_namespaces: bool = True) -> list[str]:
    """Every registered id; with `include_namespaces`, also the namespaced ids whose library
    is installed."""
    ids = sorted(_REGISTRY)
    if include_namespaces:
        for ns, (_, lister) in sorted(_NAMESPACES.items()):
            if lister is None:
                continue
            try:
                names = _load(lister)()
            except ImportError:
                continue
            ids.extend(f"{ns}/{name}" for name in names)
    return ids


def spec(id: str) -> EnvSpec:
    """The `EnvSpec` of a registered (non-namespaced) id."""
    try:
        return _REGISTRY[id]
    except KeyError:
        raise KeyError(_unknown(id)) from None


def _unknown(id: str, also: list[str] | tuple[str, ...] = ()) -> str:
    from ._ids import listed_ids

    hint = closest(id, {*_REGISTRY, *listed_ids(), *also})
    return (
        f"no environment registered as {id!r}{hint} (run `parallax list` to see the registered ids)"
    )


def _check_id(id: Any, owner: str) -> str:
    if not isinstance(id, str):
        raise TypeError(
            f"{owner}: id must be a string such as 'GridWorld-v0' or 'gymnax/CartPole-v1' "
            f"(run `parallax list` to see them), got {id!r}"
        )
    return id


def _namespace_names(namespace: str) -> list[str] | None:
    """The names the namespace's library lists now, or `None` (no lister, not installed)."""
    lister = _NAMESPACES[namespace][1]
    if lister is None:
        return None
    try:
        return list(_load(lister)())
    except ImportError:
        return None  # the factory raises the ImportError that names the extra


def make(id: str, *, check_actions: bool = True, **kwargs: Any) -> Any:
    """Build the environment registered as `id`, with keyword overrides.

    Actions are checked at trace time by default: `step` refuses an action of the wrong
    shape or dtype kind (a float for a `Discrete` env, a batch of actions for one env,
    `None`) with an error naming the env, the space, the expected and the given shape and
    dtype (`parallax.check_action`). The check reads shapes and dtypes only, so the
    compiled step is the same with and without it. Every bundled env and adapter checks
    its own actions (its `check_actions` attribute); any other env is returned inside a
    `StaticActionCheck`, as Gymnasium's `make` wraps every env in its checker.

    Args:
        id: a registered id (`"GridWorld-v0"`) or a namespaced one (`"gymnax/CartPole-v1"`).
        check_actions: `False` turns the checks off (the env's own `check_actions` is set
            to False, and no `StaticActionCheck` is added).
        **kwargs: the environment's own keyword arguments.

    Raises:
        TypeError: `id` is not a string, or a keyword argument the environment does not
            take (the message lists those it takes and suggests the closest).
        KeyError: no such id (the message suggests the closest registered ids).

    Example:
        >>> import parallax
        >>> parallax.make("GridWorld-v0")
        GridWorld()
    """
    id = _check_id(id, "make")
    if id in _REGISTRY:
        entry = _REGISTRY[id]
        factory = entry.load()
        accepted = keywords_of(factory)
        if accepted is not None:
            target = getattr(factory, "__name__", repr(factory))
            check_keywords(kwargs, accepted, f"make({id!r})", target)
        env = factory(**{**entry.kwargs, **kwargs})
        return with_action_checks(env, check_actions, f"make({id!r})")
    namespace, sep, name = id.partition("/")
    if sep and namespace in _NAMESPACES:
        names = _namespace_names(namespace)
        if names is not None and name not in names:
            raise KeyError(_unknown(id, [f"{namespace}/{n}" for n in names]))
        env = _load(_NAMESPACES[namespace][0])(name, **kwargs)
        return with_action_checks(env, check_actions, f"make({id!r})")
    raise KeyError(_unknown(id))


def make_vec(
    id: str,
    num_envs: int,
    max_episode_steps: int | None = None,
    autoreset: bool | AutoResetMode = True,
    *,
    max_resets_per_step: int | str | None = "auto",
    wrappers: Sequence[Callable[[Any], Any]] = (),
    check_actions: bool = True,
    **kwargs: Any,
) -> VmapWrapper[Any] | VmapAutoResetWrapper[Any]:
    """A batch of `num_envs` copies of `id`: `VmapAutoResetWrapper(TimeLimit(env), num_envs)`.

    With auto-reset on, the stack is `VmapAutoResetWrapper -> VmapWrapper -> TimeLimit ->
    env` (batch-level auto-reset: only the envs that finished are reset); with
    `autoreset=False` it is `VmapWrapper -> TimeLimit -> env`. Per-env `wrappers` go
    between the `TimeLimit` and the `VmapWrapper`, in order (the first is innermost).

    The counterpart of `sekai.make_vec(id, num_envs, vectorization_mode="native")`.

    Args:
        id: a registered id.
        num_envs: positive int.
        max_episode_steps: if given, wrap in `TimeLimit(env, max_episode_steps)`.
        autoreset: `True` (same-step), `False` (off), or an `AutoResetWrapper` mode.
        max_resets_per_step: passed to the `VmapWrapper` (cheap partial resets).
        wrappers: callables applied in order to the single env (after the `TimeLimit`,
            before vectorising), each taking an env and returning an env, as sekai's
            `make_vec(..., wrappers=[...])`: `[lambda env: TimeAwareObservation(env)]`.
        check_actions: the trace-time action checks of `make` (on by default; they add
            nothing to the compiled step). Each env checks its own action inside the
            `vmap`; `vec.check_actions = False` turns them off later.
        **kwargs: the environment's own keyword arguments.

    Example:
        >>> import jax, parallax
        >>> vec = parallax.make_vec("GridWorld-v0", 16, max_episode_steps=50)
        >>> vec.reset(key=jax.random.key(0)).observation.shape
        (16, 4)
        >>> vec = parallax.make_vec("GridWorld-v0", 4, max_episode_steps=50,
        ...                         wrappers=[parallax.TimeAwareObservation])
        >>> vec.observation_space.shape, vec.batch_observation_space.shape
        ((5,), (4, 5))
    """
    id = _check_id(id, "make_vec")
    num_envs = check_positive_int(num_envs, "num_envs", "make_vec")
    wrappers = _check_wrappers(wrappers)
    try:
        env = make(id, check_actions=check_actions, **kwargs)
    except KeywordError as error:
        own = (
            "num_envs",
            "max_episode_steps",
            "autoreset",
            "max_resets_per_step",
            "wrappers",
            "check_actions",
        )
        raise TypeError(
            keyword_message(
                f"make_vec({id!r})",
                f"make_vec (or {error.target})",
                error.keyword,
                (*own, *error.accepted),
            )
        ) from None
    if max_episode_steps is not None:
        env = TimeLimit(env, check_positive_int(max_episode_steps, "max_episode_steps", "make_vec"))
    for i, wrap in enumerate(wrappers):
        env = wrap(env)
        if not (callable(getattr(env, "reset", None)) and callable(getattr(env, "step", None))):
            raise TypeError(
                f"make_vec: wrappers[{i}] must return an environment (with reset and step), "
                f"got {type(env).__name__}"
            )
    mode: AutoResetMode
    if autoreset is True:
        mode = "same-step"
    elif autoreset is False:
        mode = "off"
    else:
        mode = autoreset
    if mode == "off":
        return VmapWrapper(env, num_envs, max_resets_per_step=max_resets_per_step)
    return VmapAutoResetWrapper(env, num_envs, mode, max_resets_per_step=max_resets_per_step)


def _check_wrappers(wrappers: Any) -> tuple[Callable[[Any], Any], ...]:
    if callable(wrappers) or isinstance(wrappers, str | bytes):
        raise TypeError(
            "make_vec: wrappers must be a list of callables (env -> env), got a single "
            f"{type(wrappers).__name__}; write wrappers=[...]"
        )
    try:
        items = tuple(wrappers)
    except TypeError:
        raise TypeError(
            f"make_vec: wrappers must be a list of callables (env -> env), got {wrappers!r}"
        ) from None
    for i, wrap in enumerate(items):
        if not callable(wrap):
            raise TypeError(
                f"make_vec: wrappers[{i}] must be a callable taking an env and returning an "
                f"env, got {wrap!r}"
            )
    return items


def _register_builtins() -> None:
    register("GridWorld-v0", "parallax.envs:GridWorld", summary="5x5 grid, walk to a goal")
    register(
        "MaskedGridWorld-v0",
        "parallax.envs:MaskedGridWorld",
        summary="GridWorld with a legal-action mask",
    )
    register("Race-v0", "parallax.envs:Race", summary="3 agents race to 10 (multi-agent)")
    for env_id, cls, summary in (
        ("Trading-v0", "TradingEnv", "one asset, discrete target positions (sekai Trading-v0)"),
        ("Portfolio-v0", "PortfolioEnv", "n assets, continuous weights (sekai Portfolio-v0)"),
        ("MarketMaking-v0", "MarketMakingEnv", "quote bid/ask offsets (sekai MarketMaking-v0)"),
        (
            "OptimalExecution-v0",
            "OptimalExecutionEnv",
            "liquidate a block with impact (sekai OptimalExecution-v0)",
        ),
        (
            "LimitOrderBook-v0",
            "LimitOrderBookEnv",
            "quote and trade in a limit order book (sekai LimitOrderBook-v0)",
        ),
        (
            "LimitOrderBookMarket-v0",
            "LimitOrderBookMarketEnv",
            "traders on their own clocks in one order book (multi-agent)",
        ),
        (
            "LimitOrderBookReplay-v0",
            "LimitOrderBookReplayEnv",
            "quote and trade against a replayed LOBSTER day (needs data=)",
        ),
        (
            "LimitOrderBookReplayExecution-v0",
            "LimitOrderBookReplayExecutionEnv",
            "sell a block within a replayed LOBSTER window (needs data=)",
        ),
    ):
        register(env_id, f"parallax.finance:{cls}", summary=summary)
    register_namespace(
        "gymnax",
        "parallax.adapters._registry:make_gymnax",
        "parallax.adapters._registry:gymnax_names",
    )
    register_namespace(
        "brax", "parallax.adapters._registry:make_brax", "parallax.adapters._registry:brax_names"
    )
    register_namespace(
        "mjx", "parallax.adapters._registry:make_mjx", "parallax.adapters._registry:mjx_names"
    )


_register_builtins()
