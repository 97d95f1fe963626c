"""Tool-use environments (family ``tool``): multi-turn text tasks where the agent calls tools
(a sandboxed Python, SQL, search, functions, a calculator) and then answers; the answer is verified.

The tool protocol is in :mod:`verigym.envs.tool.protocol`; the shared loop in
:mod:`verigym.envs.tool.base`.
"""
