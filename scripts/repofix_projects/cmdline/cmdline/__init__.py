"""A small command-line parser (options, flags, positionals, subcommands) and a todo CLI on it."""

from cmdline.parser import ArgumentError, Option, Parser
from cmdline.todo import main as todo_main

__all__ = ["ArgumentError", "Option", "Parser", "todo_main"]
