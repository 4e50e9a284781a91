"""The `signoff` command line."""

from signoff.cli.app import app, main

__all__ = ["app", "main"]
