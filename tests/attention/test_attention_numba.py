"""Attention rungs 02 (online softmax, a warp per query row) and 03 (K/V tiles in shared memory, one rescale per
tile), the Numba rungs: right in the simulator at d = 64 and 128, causal and not, with ragged and single-key
problems, Nq != Nk and scores that overflow float32 without the max; bad parameters refused with the rule; the
labs' solutions (the stages' own kernels) pass the lab grader, on the real cases (the learner-style mistakes in
the lab regions are cudabook/attention/mistakes.py's, graded by tests/attention/test_attention_mistakes.py); the labs
and solutions are the kernels with the region cut out; the kernels compile for a GPU without local memory or
float64.
"""
import json

import pytest

from cudabook import SIMULATOR, attention, labs, notebooks
from cudabook.attention import s02_online_softmax as s02, s03_tiled as s03
from cudabook.check import check_case
from ptxchild import PRELUDE, ptx_in_child

STAGES = {"02_online_softmax": (s02, "attention_online"), "03_tiled": (s03, "attention_tiled")}


def check(stage, args, kernel=None, **params):
    module = STAGES[stage][0]
    return check_case("attention", lambda p: module.launch(p, kernel=kernel, **params), args)


def test_they_are_on_the_ladder_between_01_and_04():
    assert attention.stage(2) is s02 and attention.stage(3) is s03
    assert attention.STAGES[:3] == ("01_naive", "02_online_softmax", "03_tiled")
    assert labs.hint("02_online_softmax", track="attention").startswith("per key j: s = warp_sum")
    assert labs.hint("03_tiled", track="attention").startswith("per tile: K, V tiles to shared")


# ------------------------------------------------------------------------------------ right

CASES_02 = [  # tiny: five shuffles a key, each a rendezvous of 32 Python threads
    ("causal, d=64", dict(B=1, H=2, Nq=6, Nk=6, d=64, causal=True)),
    ("Nq != Nk, d=128", dict(B=1, H=1, Nq=3, Nk=11, d=128)),
    ("one key, d=64", dict(B=2, H=1, Nq=3, Nk=1, d=64)),
    ("spread 4 (exp overflows without the max), causal, d=128", dict(B=1, H=1, Nq=5, Nk=5, d=128, causal=True,
                                                                    spread=4.0)),
]
CASES_03 = [  # tiles of 32 keys, blocks of 4 query rows in the simulator: several of each, the last ragged
    ("three key tiles, ragged, d=64", dict(B=1, H=1, Nq=6, Nk=70, d=64)),
    ("causal, two query blocks a tile, d=128", dict(B=1, H=1, Nq=35, Nk=35, d=128, causal=True)),
    ("one key, d=128", dict(B=2, H=1, Nq=5, Nk=1, d=128)),
    ("more queries than keys, d=64", dict(B=1, H=2, Nq=9, Nk=4, d=64)),
    ("spread 4, causal, d=64", dict(B=1, H=1, Nq=33, Nk=33, d=64, causal=True, spread=4.0)),
]


@pytest.mark.parametrize("name, kw", CASES_02, ids=[c[0] for c in CASES_02])
def test_rung_02_is_right(name, kw):
    v = check("02_online_softmax", attention.random_problem(**kw))
    assert v.ok, f"{name}:\n{v}"


@pytest.mark.parametrize("name, kw", CASES_03, ids=[c[0] for c in CASES_03])
def test_rung_03_is_right(name, kw):
    v = check("03_tiled", attention.random_problem(**kw))
    assert v.ok, f"{name}:\n{v}"


def test_rung_03_is_right_with_other_block_shapes():
    """One warp of one row (a block per query), and 3 warps of 3 rows (blocks of 9 rows: the causal skip and the
    diagonal fall at other places)."""
    args = attention.random_problem(1, 1, 11, 11, 64, causal=True)
    for params in (dict(warps=1, rows_per_warp=1), dict(warps=3, rows_per_warp=3)):
        v = check("03_tiled", args, **params)
        assert v.ok, f"{params}:\n{v}"


def test_rung_02_is_right_with_several_warps_a_block():
    v = check("02_online_softmax", attention.random_problem(1, 1, 5, 4, 64), warps_per_block=3)
    assert v.ok, str(v)


@pytest.mark.parametrize("stage, params, error, message", [
    ("02_online_softmax", dict(warps_per_block=0), ValueError, "warps_per_block must be an integer from 1 to 32"),
    ("02_online_softmax", dict(threads=64), TypeError, "unknown parameter 'threads'"),
    ("03_tiled", dict(warps=33), ValueError, "warps must be an integer from 1 to 32"),
    ("03_tiled", dict(rows_per_warp=0), ValueError, "rows_per_warp must be an integer from 1 to 16"),
    ("03_tiled", dict(warps=8, rows_per_warp=8), ValueError, "73,856 bytes of shared memory at d = 128"),
])
def test_bad_parameters_are_refused_with_the_rule(stage, params, error, message):
    args = attention.random_problem(1, 1, 2, 2, 128)
    with pytest.raises(error, match=message):
        attention.run(stage, *args[:3], **params)


@pytest.mark.parametrize("stage", STAGES)
def test_other_head_dimensions_are_refused(stage):
    args = attention.random_problem(1, 1, 2, 2, 96)
    with pytest.raises(ValueError, match="must be one of 64, 128, got d = 96"):
        attention.run(stage, *args[:3])


# ------------------------------------------------------------------------------------ the labs

@pytest.mark.parametrize("stage", STAGES)
def test_the_solution_passes_the_grader_and_compiles_for_a_gpu(stage, capsys):
    if SIMULATOR:       # grading in the simulator is slow: CI does it once, in the solution notebook
        pytest.skip("in the simulator solutions/attention/<stage>_SOLUTION.ipynb grades the solution "
                    "(nbval; the repository's conftest.py fails it unless the grader prints PASS)")
    module, kernel = STAGES[stage]
    assert labs.grade(stage, getattr(module, kernel), track="attention"), capsys.readouterr().out
    out = capsys.readouterr().out
    assert "PASS" in out


# The labs' planted mistakes (cudabook/attention/mistakes.py) are graded by tests/attention/test_attention_mistakes.py, on
# a smaller version of the grader's cases.


def test_an_unedited_copy_passes(monkeypatch):
    from corpus.mutate import mutant
    for stage, (module, kernel) in STAGES.items():
        args = attention.random_problem(1, 1, 5, 5, 64, causal=True)
        assert check(stage, args, kernel=mutant(module.__name__, kernel)).ok, stage


def test_the_labs_are_the_kernels_with_the_region_cut_out():
    """Each lab holds the stage's kernel with the marked region replaced by its TODO; its solution holds the
    kernel whole; both link the lesson (and the lesson links both)."""
    root = notebooks.ROOT
    for stage, (module, kernel) in STAGES.items():
        source = notebooks.function_source(f"attention/{module.__name__.rsplit('.', 1)[1]}", kernel)
        lab = json.loads((root / "labs" / "attention" / f"{stage}.ipynb").read_text())
        solution = json.loads((root / "solutions" / "attention" / f"{stage}_SOLUTION.ipynb").read_text())
        lesson = (root / "notebooks" / "attention" / f"{stage}.ipynb").read_text()
        lab_code = "\n".join(c["source"] for c in lab["cells"] if c["cell_type"] == "code")
        solution_code = "\n".join(c["source"] for c in solution["cells"] if c["cell_type"] == "code")
        assert notebooks.blank_regions(source) in lab_code and "# TODO: " + labs.hint(stage, "attention") in lab_code
        assert notebooks.strip_markers(source) in solution_code and "# TODO" not in solution_code
        for nb in (lab, solution):
            text = "".join(c["source"] for c in nb["cells"] if c["cell_type"] == "markdown")
            assert f"notebooks/attention/{stage}.ipynb" in text, stage
        assert f"labs/attention/{stage}.ipynb" in lesson and f"solutions/attention/{stage}_SOLUTION.ipynb" in lesson


# ------------------------------------------------------------------------------------ a GPU compiles them

def test_the_kernels_compile_for_a_gpu_in_registers():
    """Numba's real compiler (NVVM, no GPU needed), for sm_90, at d = 64 and 128 and the GPU's default block
    shape: float32 only (no float64), no local memory (the per-lane arrays stay in registers), five shuffles a
    key in rung 02; in rung 03 shared memory and the block barrier."""
    if not SIMULATOR:
        pytest.skip("on a GPU the other tests compile and run the kernels")
    child = PRELUDE + r"""
from cudabook.attention import s02_online_softmax as s02, s03_tiled as s03
from cudabook.kit.numba_rung import specialise
A = lambda t: types.Array(t, 4, "C")
sig = (A(types.uint16),) * 4 + (types.boolean, types.float32)
out = {}
for d in (64, 128):
    k = specialise(s02.attention_online, PER_LANE=d // 32)
    out[f"02 d={d}"] = cuda.compile_ptx(k.py_func, sig, cc=(9, 0))[0]
    w, r = 4, 4
    k = specialise(s03.attention_tiled, D=d, KSTRIDE=d + 1, PER_LANE=d // 32, WARPS=w, ROWS=r, BQ=w * r,
                   THREADS=32 * w, OACC=r * d // 32)
    out[f"03 d={d}"] = cuda.compile_ptx(k.py_func, sig, cc=(9, 0))[0]
print(json.dumps(out))
"""
    ptx = ptx_in_child(child)
    for name, text in ptx.items():
        assert ".f64" not in text and ".local" not in text, name
        if name.startswith("02"):
            assert text.count("shfl.sync.bfly") == 5, name
        else:
            assert "bar.sync" in text and "st.shared" in text and "ld.shared" in text, name
