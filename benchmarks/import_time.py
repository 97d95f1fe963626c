"""Time of ``import verigym`` (which registers every id) against ``import gymnasium`` alone.

Run: python benchmarks/import_time.py  -- prints medians over fresh interpreters and the ratio.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


def _median_import_seconds(statement: str, repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    bare = _median_import_seconds("pass")
    gymnasium = _median_import_seconds("import gymnasium") - bare
    verigym = _median_import_seconds("import verigym") - bare
    print(f"import gymnasium: {gymnasium * 1000:.0f} ms")
    print(f"import verigym:   {verigym * 1000:.0f} ms (registers every id)")
    print(f"ratio verigym/gymnasium: {verigym / gymnasium:.2f}")


if __name__ == "__main__":
    main()
