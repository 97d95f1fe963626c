"""RepoFix: fix a synthesized bug in a small Python repository (see :mod:`.env`).

``scripts/repofix_projects/`` holds the repositories' sources (each with a unittest suite; data, not
verigym modules), ``data/repofix.json`` the same files with the precomputed mutants
(``scripts/gen_repofix_mutants.py``), ``mutations`` the operator catalogue, ``issue`` the issue
writer and ``_runner.py`` the test runner that runs inside the verdict sandbox.
"""
