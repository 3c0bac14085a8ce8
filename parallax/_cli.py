"""The `parallax` command: `list`, `check`, `bench`.

Each subcommand lives in its own module and is imported only when used:
`parallax list` (here), `parallax check` (`parallax.testing._cli`), `parallax bench`
(`parallax._bench`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

_SUBCOMMANDS = {
    "check": ("parallax.testing._cli", "run the validation battery on an env id or module:factory"),
    "bench": ("parallax._bench", "time a jitted lax.scan rollout, optionally against a competitor"),
}


def _list(args: argparse.Namespace) -> int:
    from ._registry import make, registered_ids

    for env_id in registered_ids(include_namespaces=not args.no_namespaces):
        if args.spaces:
            try:
                env = make(env_id)
                print(
                    f"{env_id}\n    observation: {env.observation_space}\n    action: {env.action_space}"
                )
            except Exception as error:  # a listing must not stop at one broken entry
                print(f"{env_id}\n    (cannot build: {type(error).__name__}: {error})")
        else:
            print(env_id)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `parallax` console script."""
    parser = argparse.ArgumentParser(prog="parallax", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="list every registered env id")
    p_list.add_argument(
        "--spaces", action="store_true", help="also build each env and print its spaces"
    )
    p_list.add_argument(
        "--no-namespaces", action="store_true", help="skip adapter ids (gymnax/, brax/, mjx/)"
    )
    p_list.set_defaults(func=_list)
    for name, (module, help_text) in _SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(module=module)
    args, extra = parser.parse_known_args(argv)
    if hasattr(args, "func"):
        return int(args.func(args))
    run = importlib.import_module(args.module).main
    return int(run([*args.rest, *extra]))


if __name__ == "__main__":
    sys.exit(main())
