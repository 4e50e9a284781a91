"""The `signoff` command line.

`signoff hook claude-code` runs once per Claude Code tool call, so `main` hands it over before loading the
Typer app (`signoff.cli.app`), whose imports cost more than the hook's whole budget (see `cli.hook`)."""

from __future__ import annotations

import sys

HOOK = ["hook", "claude-code"]


def main() -> None:
    if sys.argv[1:3] == HOOK:
        from signoff.cli.hook import main as hook

        hook(sys.argv[3:])
    from signoff.cli.app import main as run

    run()


__all__ = ["main"]
