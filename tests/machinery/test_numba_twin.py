"""A lesson's copy of a rung's Numba kernel shares the rung's compile (kit.numba_rung.twin): the same code with the
same globals has the same fingerprint, and any change a learner could make gives another one."""
import ast
import importlib
import pathlib
import sys
import types

import pytest
from numba import cuda

from cudabook import SIMULATOR, notebooks
from cudabook.kit import numba_rung

ROOT = pathlib.Path(__file__).resolve().parents[2]

KERNEL_TEXT = '''
from numba import cuda
STEP = 2

@cuda.jit(device=True)
def helper(x):
    return x * STEP

@cuda.jit
def kernel(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = helper(a[i]) + 1
'''


def define(text, filename, module="__main__"):
    """The kernel and helper of `text`, defined in a namespace of their own (a notebook's: module __main__)."""
    ns = {"__name__": module}
    exec(compile(text, filename, "exec"), ns)
    return ns


@pytest.fixture
def package_kernel(monkeypatch):
    """KERNEL_TEXT defined in a module of the workbook's package (cudabook._twin_probe), as a rung's kernel is."""
    module = types.ModuleType("cudabook._twin_probe")
    module.__dict__.update(define(KERNEL_TEXT, "cudabook/_twin_probe.py", module.__name__))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_a_notebooks_copy_of_a_package_kernel_runs_as_the_package_kernel(package_kernel):
    copy = define("\n\n\n" + KERNEL_TEXT, "notebook cell")
    assert numba_rung.fingerprint(copy["kernel"]) == numba_rung.fingerprint(package_kernel.kernel)
    assert numba_rung.package_twin(copy["kernel"]) is package_kernel.kernel
    assert numba_rung.package_twin(package_kernel.kernel) is package_kernel.kernel     # the package's: itself


@pytest.mark.parametrize("change", [
    ("+ 1", "+ 2"),                          # the kernel's own code
    ("return x * STEP", "return x + STEP"),  # a device function it calls
    ("STEP = 2", "STEP = 3"),                # a global constant it reads (through the helper)
    ("a[i] = helper(a[i]) + 1", "a[i] = helper(a[i]) + 1\n    cuda.syncthreads()"),
])
def test_any_change_is_another_kernel(package_kernel, change):
    changed = define(KERNEL_TEXT.replace(*change), "b.py")
    assert numba_rung.package_twin(changed["kernel"]) is changed["kernel"]


def test_a_global_changed_after_a_first_launch_is_seen_by_the_next_kernel(package_kernel):
    """The notebook's copy shares the package's compile; the learner then sets STEP = 3 (read by the helper
    only) and defines the kernel again: that kernel is its own, not the package's (nothing stale is kept)."""
    ns = define(KERNEL_TEXT, "notebook cell")
    assert numba_rung.package_twin(ns["kernel"]) is package_kernel.kernel
    ns["STEP"] = 3
    kernel_cell = "@cuda.jit\ndef kernel" + KERNEL_TEXT.split("@cuda.jit\ndef kernel")[1]
    exec(compile(kernel_cell, "cell", "exec"), ns)          # the kernel's cell run again; the helper's not
    assert numba_rung.package_twin(ns["kernel"]) is ns["kernel"]


def test_names_that_are_only_attributes_do_not_count(package_kernel):
    """`a.size` reads the attribute `size`, not a global: a notebook global named size changes nothing."""
    ns = define(KERNEL_TEXT, "notebook cell")
    ns["size"] = 7
    assert numba_rung.package_twin(ns["kernel"]) is package_kernel.kernel


def test_a_module_of_the_learners_or_an_explicit_signature_is_never_shared(package_kernel, monkeypatch):
    mine = types.ModuleType("my_settings")
    mine.STEP = 2
    monkeypatch.setitem(sys.modules, "my_settings", mine)
    ns = define(KERNEL_TEXT.replace("return x * STEP", "return x * my_settings.STEP")
                .replace("STEP = 2", "import my_settings"), "cell")
    with pytest.raises(numba_rung.Unshareable):
        numba_rung.fingerprint(ns["kernel"])
    assert numba_rung.package_twin(ns["kernel"]) is ns["kernel"]
    copy = define(KERNEL_TEXT, "cell")
    signed = types.SimpleNamespace(py_func=numba_rung.python_function(copy["kernel"]), targetoptions={},
                                   _can_compile=False)
    assert numba_rung.package_twin(signed) is signed


def test_a_global_array_counts_by_its_bytes():
    text = KERNEL_TEXT.replace("STEP = 2", "import numpy as np\nSTEPS = np.arange(4)").replace(
        "return x * STEP", "return x * STEPS[1]")
    first, second = define(text, "a.py"), define(text, "b.py")
    assert numba_rung.fingerprint(first["kernel"]) == numba_rung.fingerprint(second["kernel"])
    second["STEPS"][1] = 5                                  # changed in place: another compile
    assert numba_rung.fingerprint(first["kernel"]) != numba_rung.fingerprint(second["kernel"])


def test_other_jit_options_are_another_kernel():
    ns = define(KERNEL_TEXT, "a.py")
    fn = numba_rung.python_function(ns["kernel"])
    plain = types.SimpleNamespace(py_func=fn, targetoptions={})
    bounded = types.SimpleNamespace(py_func=fn, targetoptions={"launch_bounds": 128})
    assert numba_rung.fingerprint(plain) != numba_rung.fingerprint(bounded)


def test_in_the_simulator_each_kernel_runs_as_itself():
    if not SIMULATOR:
        pytest.skip("the simulator's rule")
    ns = define(KERNEL_TEXT, "a.py")
    assert numba_rung.twin(ns["kernel"]) is ns["kernel"]


def lesson_kernels():
    """(lesson, module, function) for every `#! kernel` line of the lessons and labs."""
    for path in sorted((ROOT / "lessons").rglob("*.py")):
        for line in path.read_text().splitlines():
            m = notebooks.DIRECTIVE.match(line)
            if m:
                yield path.relative_to(ROOT).as_posix(), m.group(1), m.group(2)


def definitions_of(lesson):
    """The namespace a learner's notebook has after its imports, assignments without calls and function definitions
    (the other statements, which measure and print, are left out), from the lesson's own cells, directives expanded."""
    ns = {"__name__": "__main__"}
    text = (ROOT / lesson).read_text()
    for cell in notebooks.parse_percent(text):
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse(notebooks.expand(cell["source"]))
        except SyntaxError:          # a lab's blank to fill in
            continue
        keep = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef))
                or (isinstance(node, ast.Assign) and not any(isinstance(n, ast.Call) for n in ast.walk(node)))]
        for node in keep:
            try:
                exec(compile(ast.Module(body=[node], type_ignores=[]), lesson, "exec"), ns)
            except (NameError, AttributeError):     # an assignment from something a left-out statement made
                if not isinstance(node, ast.Assign):
                    raise
    return ns


@pytest.mark.parametrize("lesson,module,function", list(lesson_kernels()))
def test_a_lessons_copy_of_a_rungs_kernel_is_its_twin(lesson, module, function):
    """What makes the ladder's live rung cost no second compile on a GPU: the notebook's copy, defined from the
    rung's text, has the rung's fingerprint."""
    ns = definitions_of(lesson)
    rung = importlib.import_module("cudabook." + module.replace("/", "."))
    assert numba_rung.fingerprint(ns[function]) == numba_rung.fingerprint(getattr(rung, function)), (
        f"{lesson}: its {function} differs from {module}'s")
    found = numba_rung.package_twin(ns[function])
    assert found is not ns[function] and numba_rung._in_package(numba_rung.python_function(found))


def test_there_are_lesson_kernels_to_check():
    assert len(list(lesson_kernels())) >= 20
    assert cuda is not None
