"""Open worlds (family ``world``): long-horizon games of other projects under verigym's API.

Each game keeps its own engine (an optional extra, imported when an env is made, never at
``import verigym``); verigym adds the text view, the verdict from the game's own achievement
counters and ``verigym check``. ``crafter.py``: Crafter (``pip install 'verigym[crafter]'``).
"""
