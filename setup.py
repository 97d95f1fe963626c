"""Package discovery for the folder-to-subpackage mapping in pyproject.toml.

`envs/`, `agents/`, `wrappers/` and `leaderboards/` are shipped as `verigym.envs`, ... ; this walks
each folder so new subpackages are included in the wheel without editing any list.
"""

from setuptools import find_packages, setup

PACKAGE_DIR = {
    "verigym": "verigym",
    "verigym.envs": "envs",
    "verigym.agents": "agents",
    "verigym.wrappers": "wrappers",
    "verigym.leaderboards": "leaderboards",
}
DATA = ["py.typed", "*.json", "*.toml", "*.yaml", "*.html", "*.js", "*.css", "*.xml", "*.txt", "*.png"]

packages = []
for package, folder in PACKAGE_DIR.items():
    packages.append(package)
    packages += [f"{package}.{sub}" for sub in find_packages(folder)]

setup(
    packages=packages,
    package_dir=PACKAGE_DIR,
    package_data={package: DATA + ["**/" + pattern for pattern in DATA] for package in packages},
)
