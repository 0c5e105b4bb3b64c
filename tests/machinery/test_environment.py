"""One list of dependencies: environment.yml says what pyproject.toml says."""
import pathlib
import re

try:
    import tomllib
except ModuleNotFoundError:    # Python 3.10: pytest brings tomli, the same parser
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_environment_yml_matches_pyproject():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    text = (ROOT / "environment.yml").read_text()
    pip_section = text.split("- pip:", 1)[1]
    pip = [m.group(1).strip() for m in re.finditer(r"^\s{6,}- (.+)$", pip_section, re.M)]
    pip = [p for p in pip if not p.startswith("-e")]
    assert sorted(pip) == sorted(deps)


def test_numpy_is_pinned_below_2_5():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.replace(" ", "").startswith("numpy") and "<2.5" in d for d in deps)
