"""One list of dependencies: environment.yml says what pyproject.toml says; `python -m cudabook` checks the
prerequisites the README names (the platform, a host C++ compiler for the CPU emulator)."""
import pathlib
import re

import pytest

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


# ------------------------------------------------------------------------------ python -m cudabook: prerequisites
INSTALL_HINTS = ("sudo apt install g++", "sudo dnf install gcc-c++", "conda install -c conda-forge cxx-compiler")


def _no_compiler(monkeypatch, tmp_path):
    """A PATH with no C++ compiler on it, and no CXX: the emulator's own finder comes up empty."""
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    from cudabook import emulate
    with pytest.raises(emulate.HostCompilerMissing):
        emulate.host_compiler()


def test_the_check_without_a_compiler_and_without_a_gpu_fails_and_says_what_to_install(monkeypatch, tmp_path,
                                                                                       capsys):
    import cudabook
    from cudabook import __main__ as check
    _no_compiler(monkeypatch, tmp_path)
    monkeypatch.setattr(cudabook, "SIMULATOR", True)
    code = check.main(["--quick"])
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "C++ compiler" in line)
    assert line.startswith("  FAILED") and "none found" in line and "CPU emulator" in line, out
    for hint in INSTALL_HINTS:
        assert hint in line, line
    assert code == 1 and "install NOT OK" in out


def test_with_a_gpu_a_missing_compiler_is_a_warning_not_a_failure(monkeypatch, tmp_path, capsys):
    from cudabook import __main__ as check
    _no_compiler(monkeypatch, tmp_path)
    assert check.compiler_check(simulator=False) is True
    out = capsys.readouterr().out
    assert out.startswith("  warning C++ compiler: none found"), out
    for hint in INSTALL_HINTS:
        assert hint in out, out


def test_the_check_names_the_compiler_the_emulator_would_use(monkeypatch, capsys):
    from cudabook import __main__ as check
    from cudabook import emulate
    try:
        cxx = emulate.host_compiler()
    except emulate.HostCompilerMissing:
        pytest.skip("no host C++ compiler on this machine")
    assert check.compiler_check(simulator=True) is True
    out = capsys.readouterr().out
    assert out.startswith("  ok      C++ compiler") and cxx in out, out


def test_on_macos_the_check_says_plainly_why_and_where_to_go_instead(monkeypatch, capsys):
    import platform

    from cudabook import __main__ as check
    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    assert check.main([]) == 1
    out = capsys.readouterr().out
    problem = next(line for line in out.splitlines() if line.startswith("  FAILED"))
    for words in ("macOS", "cuda-bindings", "nvidia-cuda-nvrtc", "Linux and Windows only", "WSL2", "cloud"):
        assert words in problem, problem
    assert "Numba kernel" not in out and "install NOT OK" in out      # it stops there: nothing else is tried
