"""The MiniWoB++ tasks (Liu et al. 2018) of the ``miniwob`` package in verigym's browser.

One id per task the package registers (``verigym/MiniWoB-<Task>-v0``, family ``gui``); the pages
are read from the installed package (``pip install 'verigym[miniwob]'``). Importing this package
is light: the env module is imported when an env is made.
"""
