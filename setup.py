"""Package discovery for the folder-to-subpackage mapping in pyproject.toml.

`envs/`, `agents/`, `wrappers/` and `leaderboards/` are shipped as `verigym.envs`, ... ; this walks
each folder so new subpackages are included in the wheel without editing any list.

An editable install (`pip install -e .`) maps these folders with setuptools' meta path finder, which
setuptools appends after Python's own path finder: a `verigym/` folder without `__init__.py` in the
working directory (the parent of a clone named `verigym`, say) would then be imported as an empty
namespace package instead of verigym (setuptools issue 3557). `EditableWheel` adds one `.pth` line
that moves verigym's finder to the front of `sys.meta_path` (it answers only for `verigym` and its
mapped subpackages). setuptools' `compat` and `strict` editable modes do not replace it:
docs/design.md section 1 says where each fails.
"""

from setuptools import find_packages, setup
from setuptools.command.editable_wheel import editable_wheel

PACKAGE_DIR = {
    "verigym": "verigym",
    "verigym.envs": "envs",
    "verigym.agents": "agents",
    "verigym.wrappers": "wrappers",
    "verigym.leaderboards": "leaderboards",
}
DATA = [
    "py.typed",
    "*.json",
    "*.toml",
    "*.yaml",
    "*.html",
    "*.js",
    "*.css",
    "*.xml",
    "*.txt",
    "*.png",
]

# runs at interpreter start after __editable__.verigym-*.pth (.pth files are read in name order)
FINDER_FIRST_PTH = "import sys; sys.meta_path.sort(key=lambda finder: not getattr(finder, '__module__', '').startswith('__editable___verigym_'))\n"


class _FinderFirst:
    """Wraps setuptools' editable strategy: writes its files, then the ``.pth`` line above."""

    def __init__(self, strategy):
        self.strategy = strategy

    def __call__(self, wheel, files, mapping):
        self.strategy(wheel, files, mapping)
        wheel.writestr("verigym_editable_finder_first.pth", FINDER_FIRST_PTH.encode())

    def __enter__(self):
        self.strategy.__enter__()
        return self

    def __exit__(self, *exc_info):
        return self.strategy.__exit__(*exc_info)


class EditableWheel(editable_wheel):
    def _select_strategy(self, *args, **kwargs):
        return _FinderFirst(super()._select_strategy(*args, **kwargs))


packages = []
for package, folder in PACKAGE_DIR.items():
    packages.append(package)
    packages += [f"{package}.{sub}" for sub in find_packages(folder)]

setup(
    packages=packages,
    package_dir=PACKAGE_DIR,
    package_data={package: DATA + ["**/" + pattern for pattern in DATA] for package in packages},
    cmdclass={"editable_wheel": EditableWheel},
)
