"""Terminal: shell tasks in the sandbox, judged by the filesystem state they leave (issue 30 s2).

:class:`~verigym.envs.tool.terminal.env.TerminalEnv` is the env; the templates live in one module
per group and are listed in :mod:`verigym.envs.tool.terminal.templates`.
"""
