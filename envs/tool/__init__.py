"""Tool-use environments (family ``tool``): multi-turn text tasks where the agent calls tools
(a sandboxed Python, SQL, search, functions, a calculator) and then answers; the answer is verified.

The tool-call format is in :mod:`verigym.toolcalls`; the shared loop in
:mod:`verigym.envs.tool.base`.
"""
