"""Subcommands of the `kraftd` CLI, one module each (see kraftd/cli.py)."""
