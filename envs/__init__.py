"""verigym.envs -- one family a folder: text/, tool/, gui/, grid/, mujoco/, multiagent/.

Each family folder has a light ``table.py`` whose ``ROWS`` (a list of :class:`verigym.EnvRow`)
``import verigym`` registers. Keep family ``__init__.py`` files free of heavy imports: they are
imported at ``import verigym`` time to reach the tables.
"""
