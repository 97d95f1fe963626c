"""Subcommands of the ``verigym`` CLI, one module each (see :mod:`verigym.cli`)."""
