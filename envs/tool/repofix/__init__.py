"""RepoFix: fix a synthesized bug in a small Python repository (see :mod:`.env`).

``projects/`` holds the repositories' sources (each with a unittest suite; not importable as
verigym modules), ``data/repofix.json`` the same files with the precomputed mutants
(``scripts/gen_repofix_mutants.py``), ``mutations`` the operator catalogue, ``issue`` the issue
writer and ``_runner.py`` the test runner that runs inside the verdict sandbox.
"""
