"""A lesson's copy of a rung's Numba kernel shares the rung's compile (kit.numba_rung.twin): the same code with the
same globals has the same fingerprint, and any change a learner could make gives another one."""
import ast
import importlib
import pathlib
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


def define(text, filename):
    """The kernel and helper of `text`, defined in a namespace of their own (as a notebook does)."""
    ns = {}
    exec(compile(text, filename, "exec"), ns)
    return ns


def test_the_same_text_in_two_places_is_one_kernel():
    first, second = define(KERNEL_TEXT, "module.py"), define("\n\n\n" + KERNEL_TEXT, "notebook cell")
    assert numba_rung.fingerprint(first["kernel"]) == numba_rung.fingerprint(second["kernel"])
    registry = {}
    assert numba_rung._twin(first["kernel"], registry) is first["kernel"]
    assert numba_rung._twin(second["kernel"], registry) is first["kernel"]


@pytest.mark.parametrize("change", [
    ("+ 1", "+ 2"),                          # the kernel's own code
    ("return x * STEP", "return x + STEP"),  # a device function it calls
    ("STEP = 2", "STEP = 3"),                # a global constant it reads (through the helper)
    ("a[i] = helper(a[i]) + 1", "a[i] = helper(a[i]) + 1\n    cuda.syncthreads()"),
])
def test_any_change_is_another_kernel(change):
    first, changed = define(KERNEL_TEXT, "a.py"), define(KERNEL_TEXT.replace(*change), "b.py")
    registry = {}
    numba_rung._twin(first["kernel"], registry)
    assert numba_rung._twin(changed["kernel"], registry) is changed["kernel"]


def test_other_jit_options_are_another_kernel():
    ns = define(KERNEL_TEXT, "a.py")
    fn = ns["kernel"].py_func if hasattr(ns["kernel"], "py_func") else ns["kernel"].fn
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


def test_there_are_lesson_kernels_to_check():
    assert len(list(lesson_kernels())) >= 20
    assert cuda is not None
