"""Suites that pose chosen RepoFix-Real instances (``verigym eval --instances``, issue 40).

The rows are read and checked in the env layer (:mod:`verigym.envs.tool.repofix.swebench`); making
them suites is the leaderboards' side.
"""

from __future__ import annotations

from verigym.envs.tool.repofix.real_env import load_real_data
from verigym.envs.tool.repofix.swebench import SelectedInstance, fingerprint, library_env_id
from verigym.leaderboards.suite import EVAL_SEED_START, Suite, Task


def instance_suites(
    selected: list[SelectedInstance], *, time_limit_s: float = 300.0
) -> list[Suite]:
    """Suites that pose exactly the ``selected`` instances, each on its library's id.

    The library's id draws instance ``seed % count`` (all splits, the data's order), so instance
    ``i`` is the held-out seed ``s`` with ``s % count == i``. A suite holds one task per id (a
    contiguous seed range), so instances that are not neighbours in the data go to further suites:
    ``verigym eval`` plays them one after the other. Rows are keyed by (id, seed) in the results
    store, as any evaluation of these ids is.

    Returns:
        A list of :class:`~verigym.leaderboards.suite.Suite`.

    Raises:
        ValueError: ``selected`` is empty, or a library has no id of its own.
    """
    if not selected:
        raise ValueError("no instances to evaluate")
    data = load_real_data()
    runs: dict[str, list[list[int]]] = {}
    for name in sorted({s.library for s in selected}):
        positions = sorted({s.index for s in selected if s.library == name})
        groups: list[list[int]] = []
        for position in positions:
            if groups and position == groups[-1][-1] + 1:
                groups[-1].append(position)
            else:
                groups.append([position])
        runs[name] = groups
    ids = {}
    for name in runs:
        try:
            ids[name] = library_env_id(name)
        except KeyError as exc:
            raise ValueError(str(exc.args[0])) from None
    base = fingerprint(selected)
    suites = []
    for k in range(max(len(g) for g in runs.values())):
        tasks = []
        for name, groups in runs.items():
            if k < len(groups):
                count = len(data[name]["instances"])
                first = groups[k][0]
                tasks.append(
                    Task(
                        ids[name],
                        episodes=len(groups[k]),
                        seed_start=EVAL_SEED_START + (first - EVAL_SEED_START) % count,
                        time_limit_s=time_limit_s,
                    )
                )
        suites.append(
            Suite(
                f"{base}-{k + 1}",
                tuple(tasks),
                description=f"RepoFix-Real instances from a SWE-bench file (part {k + 1})",
            )
        )
    return suites
