"""tools/probe_peer_kernels.py runs on a GPU; here: it refuses with the reason where it cannot run, and the
probes' readings land where results.readings finds them."""
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools import probe_peer_kernels  # noqa: E402

from cudabook import results  # noqa: E402


def test_a_track_with_no_peer_set_against_a_rung_is_refused_by_name(capsys):
    assert probe_peer_kernels.main(["--track", "msda"]) == 1
    assert "names no HEAD_TO_HEAD peers" in capsys.readouterr().out


def test_a_reading_is_written_where_readings_finds_it(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    record = {"gpu": "NVIDIA Test Card", "track": "gemm", "stage": "07_clusters", "date": "2026-01-01", "x": 1}
    path = results.write_reading(record, "settings_vs_peer")
    assert path == tmp_path / "readings" / "Test_Card_gemm_07_clusters_settings_vs_peer.json"
    assert json.loads(path.read_text()) == record
    assert results.readings("gemm", "07_clusters", "settings_vs_peer") == [record]


def test_show_peer_kernels_prints_each_kernel_and_says_when_there_is_none():
    lines = []
    assert results.show_peer_kernels("gemm", "07_clusters", out=lines.append) >= 1
    assert any("cublas" in line for line in lines) and any(" µs x " in line for line in lines)
    lines.clear()
    assert results.show_peer_kernels("gemm", "01_naive", out=lines.append) == 0
    assert "tools/probe_peer_kernels.py" in lines[0]


# ------------------------------------------------------------------------------------ tools/probe_tma_rate.py
def test_the_tma_rate_probe_checks_its_boxes_and_catches_a_box_from_the_wrong_place(tmp_path, monkeypatch, capsys):
    """Run in the CPU emulator (no GPU): every setting's boxes land where the kernel asked; a kernel that loads
    each box one element to the right is caught, so a timed setting is a checked one."""
    import shutil

    import pytest

    from cudabook import SIMULATOR
    from tools import probe_tma_rate
    if not SIMULATOR or not (shutil.which("g++") or shutil.which("clang++")):
        pytest.skip("the emulator runs where Numba runs in its simulator, with a host C++ compiler")
    args = ["--emulate", "--boxes", "32x4", "64x2", "--issuers", "1", "3", "--ring", "2", "--per-sm", "1"]
    assert probe_tma_rate.main(args) == 0
    assert capsys.readouterr().out.count("the boxes landed right") == 4
    wrong = tmp_path / "probe_tma_rate.cu"
    text = probe_tma_rate.SOURCE.read_text()
    assert text.count("&map, bar0 + 8 * s, last_x, last_y)") == 1
    wrong.write_text(text.replace("&map, bar0 + 8 * s, last_x, last_y)", "&map, bar0 + 8 * s, last_x + 1, last_y)"))
    monkeypatch.setattr(probe_tma_rate, "SOURCE", wrong)
    assert probe_tma_rate.main(args[:4] + ["--issuers", "1"]) == 1
    assert "elements of the checked boxes differ from the tensor" in capsys.readouterr().out


def test_the_tma_rate_probe_refuses_a_bad_box_and_a_machine_without_hopper(capsys):
    from tools import probe_tma_rate
    assert probe_tma_rate.main(["--boxes", "30x4"]) == 2
    assert "multiple of 8" in capsys.readouterr().out
    assert probe_tma_rate.main(["--boxes", "4by4"]) == 2
    assert "WIDTHxROWS" in capsys.readouterr().out
    from cudabook.kit.rung import hopper_unavailable
    if hopper_unavailable("x"):
        assert probe_tma_rate.main([]) == 1
        assert "compute capability 9.0" in capsys.readouterr().out


# ------------------------------------------------------------------------------------ tools/probe_l1_gather.py
def test_the_l1_gather_probe_checks_its_loads_and_catches_a_piece_from_the_wrong_place(tmp_path, monkeypatch,
                                                                                        capsys):
    """In the CPU emulator (no GPU): each thread's XOR of the words it loaded matches the host's replay of the same
    random lines, for a piece in a line of its own, two groups sharing a line, and pieces spread over their lines'
    places, from the L1, the L2 and a shared-memory copy; a kernel whose lanes read
    the wrong 16 bytes of their piece is caught, so a timed setting is a checked one."""
    import shutil

    import pytest

    from cudabook import SIMULATOR
    from tools import probe_l1_gather
    if not SIMULATOR or not (shutil.which("g++") or shutil.which("clang++")):
        pytest.skip("the emulator runs where Numba runs in its simulator, with a host C++ compiler")
    args = ["--emulate", "--pieces", "64", "64p", "16s", "--span", "l1", "l2", "smem"]
    assert probe_l1_gather.main(args) == 0
    assert capsys.readouterr().out.count("every thread loaded its words") == 9
    wrong = tmp_path / "probe_l1_gather.cu"
    text = probe_l1_gather.SOURCE.read_text()
    assert text.count("+ lane % G;") == 1
    wrong.write_text(text.replace("+ lane % G;", "+ (lane + 1) % G;"))
    monkeypatch.setattr(probe_l1_gather, "SOURCE", wrong)
    assert probe_l1_gather.main(["--emulate", "--pieces", "64", "--span", "l1"]) == 1
    assert "threads loaded other words than the replay" in capsys.readouterr().out
    # the smem span reads the shared copy, not the global region: a copy that puts each vector in its neighbour's
    # place fails there, and only there
    assert text.count("tile[i] = __ldg(global_region + i);") == 1
    wrong.write_text(text.replace("tile[i] = __ldg(global_region + i);", "tile[i] = __ldg(global_region + (i ^ 1));"))
    assert probe_l1_gather.main(["--emulate", "--pieces", "64s", "--span", "l1"]) == 0
    assert probe_l1_gather.main(["--emulate", "--pieces", "64s", "--span", "smem"]) == 1
    assert "threads loaded other words than the replay" in capsys.readouterr().out


def test_the_l1_gather_probe_checks_its_shuffles_too(tmp_path, monkeypatch, capsys):
    """--shuffles: pairs of shuffles leave each lane's words as they were, so the replay still holds, from the L1
    and without loads (the regs span, once, whatever the pieces); a pair that does not undo itself is caught."""
    import shutil

    import pytest

    from cudabook import SIMULATOR
    from tools import probe_l1_gather
    if not SIMULATOR or not (shutil.which("g++") or shutil.which("clang++")):
        pytest.skip("the emulator runs where Numba runs in its simulator, with a host C++ compiler")
    args = ["--emulate", "--pieces", "64", "64s", "--span", "l1", "regs", "--shuffles", "0", "2"]
    assert probe_l1_gather.main(args) == 0
    out = capsys.readouterr().out
    assert out.count("every thread loaded its words") == 5 and out.count("regs, 2 shuffles") == 1
    wrong = tmp_path / "probe_l1_gather.cu"
    text = probe_l1_gather.SOURCE.read_text()
    assert text.count("v[u].x, 1 + (k / 2) % 31)") == 1
    wrong.write_text(text.replace("v[u].x, 1 + (k / 2) % 31)", "v[u].x, 1 + k % 31)"))   # each its own lane mask
    monkeypatch.setattr(probe_l1_gather, "SOURCE", wrong)
    for span in ("l1", "regs"):     # (16-byte pieces: without loads, a lane of its own LCG state, as a group's)
        assert probe_l1_gather.main(["--emulate", "--pieces", "16", "--span", span, "--shuffles", "2"]) == 1
        assert "threads loaded other words than the replay" in capsys.readouterr().out
    assert probe_l1_gather.main(["--shuffles", "3"]) == 2
    assert "even numbers of shuffles" in capsys.readouterr().out


def test_the_l1_gather_probe_refuses_a_bad_piece_and_a_machine_without_a_gpu(capsys):
    from cudabook import device
    from tools import probe_l1_gather
    assert probe_l1_gather.main(["--pieces", "48"]) == 2
    assert "16, 32, 64 or 128" in capsys.readouterr().out
    assert probe_l1_gather.main(["--pieces", "128p"]) == 2
    assert "64p" in capsys.readouterr().out
    assert probe_l1_gather.main(["--pieces", "128s"]) == 2        # a whole line has no other place in it
    assert "64s" in capsys.readouterr().out
    if device.gpu() is None:
        assert probe_l1_gather.main([]) == 1
        assert "--emulate checks the probe" in capsys.readouterr().out


def test_the_reference_order_probe_says_why_it_cannot_run_without_a_gpu(capsys):
    """tools/probe_reference_gather.py times the msda reference gather in both orders on a GPU; here it refuses,
    saying why."""
    from tools import probe_reference_gather
    from cudabook import SIMULATOR
    if not SIMULATOR:
        pytest.skip("on a GPU the probe runs for real (tools/gpu_session.sh)")
    assert probe_reference_gather.main([]) == 1
    assert "needs a GPU" in capsys.readouterr().out
