"""cudabook.profile without a GPU: ncu's CSV read into the table, the messages for a missing or forbidden ncu
(a fake ncu on PATH), the record's round trip, and show() with and without a record.

The ncu output used here is a SYNTHETIC fixture (tests/fixtures/ncu_synthetic_resample_naive.csv): ncu's format,
made-up numbers, never a measurement."""
import json
import os
import pathlib
import stat
import sys
import textwrap

import pytest

from cudabook import profile

FIXTURE = pathlib.Path(__file__).parents[1] / "fixtures" / "ncu_synthetic_resample_naive.csv"

PERMISSION_TEXT = (
    "==PROF== Connected to process 11156 (/usr/bin/python3)\n"
    "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
    "on the target device 0. For instructions on enabling permissions and to get more information see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM\n"
    "==PROF== Disconnected from process 11156\n")


def fake_ncu(folder, body):
    """An executable `ncu` in `folder` running the Python `body` (sys.argv holds ncu's arguments)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ncu"
    path.write_text(f"#!{sys.executable}\nimport json, sys\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def no_ncu_anywhere(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDABOOK_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(profile.ncu, "PLACES", [str(tmp_path / "nowhere" / "ncu")])   # (read where find_ncu is)
    monkeypatch.setattr(profile.ncu, "_QUERIED", {})


# ------------------------------------------------------------------------------------------------------- parsing

def test_the_synthetic_csv_is_read_into_one_kernel():
    kernels = profile.parse_csv(FIXTURE.read_text())
    assert len(kernels) == 1
    k = kernels[0]
    assert k["kernel"] == "resample_naive" and k["block"] == "(128, 1, 1)" and k["grid"] == "(32, 64, 1)"
    assert k["metrics"]["gpu__time_duration.sum"] == 3_212_544          # thousands separators gone, base unit
    assert k["units"]["gpu__time_duration.sum"] == "nsecond"
    row = profile.derive(k, "01_naive")
    assert row["duration_us"] == pytest.approx(3212.544)
    assert row["sectors_per_request"] == pytest.approx(40_108_032 / 2_228_224)
    assert row["dram_read_MB"] == pytest.approx(152.829952) and row["dram_write_MB"] == pytest.approx(134.283264)
    assert row["dram_GBps"] == pytest.approx(89.37251, rel=1e-6)
    assert (row["l2_hit_pct"], row["occupancy_pct"], row["registers"]) == (71.93, 83.41, 40)
    assert list(row["stalls"])[:2] == ["long_scoreboard", "lg_throttle"]   # largest first
    assert "selected" not in row["stalls"]                                  # issuing is not a stall
    assert row["stall_unit"] == "% of warp cycles"


def test_auto_scaled_units_become_base_units():
    assert profile.to_base(1.5, "Mbyte") == (1.5e6, "byte")
    assert profile.to_base(2.0, "usecond") == (2000.0, "nsecond")
    assert profile.to_base(3.0, "Tbyte/second") == (3e12, "byte/second")
    assert profile.to_base(2.5, "Gbyte/usecond")[0] == pytest.approx(2.5e15)
    assert profile.to_base(40.0, "register/thread") == (40.0, "register/thread")


def test_the_wide_form_with_two_kernels_gives_a_row_each():
    """--page raw: one line per kernel, a second line of units (synthetic numbers)."""
    text = "\n".join([
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","gpu__time_duration.sum","dram__bytes.sum","l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",'
        '"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"',
        '"","","","","","","","","","","","usecond","Mbyte","sector",""',
        '"0","7","python3","host","find_intervals(Array<float, 2>)","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0",'
        '"7.50","2.10","10,000","1,000"',
        '"1","7","python3","host","resample_in_flight","1","7","(128, 1, 1)","(1056, 1, 1)","0","9.0",'
        '"62.25","270.50","4,000,000","250,000"',
        "==PROF== Disconnected from process 7"])
    rows = [profile.derive(k, "05_double_buffered") for k in profile.parse_csv(text)]
    assert [r["kernel"] for r in rows] == ["find_intervals", "resample_in_flight"]
    assert rows[1]["duration_us"] == pytest.approx(62.25) and rows[1]["sectors_per_request"] == 16
    assert rows[0]["dram_MB"] == pytest.approx(2.1)
    p = profile.Profile(rows, label="synthetic")
    assert p.kernel("05_double_buffered")["kernel"] == "resample_in_flight"     # the longest by default
    assert p.kernel(5, name="find")["kernel"] == "find_intervals"
    assert "resample_in_flight" in repr(p) and "<table>" in p._repr_html_()


def test_issue_slots_and_the_busiest_pipe_are_shown_where_the_profile_has_them():
    """A compute-bound kernel runs into its issue slots or a pipe before any memory limit: the table shows the
    issue slots' share and the busiest pipe; a record taken before those metrics were asked for hides the columns."""
    m = {"gpu__time_duration.sum": 1000.0, "smsp__issue_active.avg.pct_of_peak_sustained_active": 78.4,
         "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active": 91.25,
         "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active": 60.0,
         "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active": 12.0}
    row = profile.derive({"kernel": "k", "metrics": m}, "05_lane_groups")
    assert row["issue_pct"] == 78.4 and row["busiest_pipe"] == "alu 91.2"
    assert row["pipes_pct"] == {"alu": 91.25, "fma": 60.0, "lsu": 12.0}
    shown = repr(profile.Profile([row], label="synthetic"))
    assert "issue %" in shown and "busiest pipe %" in shown and "alu 91.2" in shown
    old = profile.derive({"kernel": "k", "metrics": {"gpu__time_duration.sum": 1000.0}}, "05_lane_groups")
    assert old["issue_pct"] is None and old["busiest_pipe"] is None and old["pipes_pct"] == {}
    assert "busiest pipe" not in repr(profile.Profile([old], label="older record"))
    assert "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active" in profile.metric_names()


def test_the_l1_hit_rate_is_shown_where_the_profile_has_it():
    """A gather's pace is set by how often L1 already holds a sector: the table shows the global loads' L1 hit
    rate, and its note says what it is; an older record, without the metric, hides both."""
    m = {"gpu__time_duration.sum": 1000.0, "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct": 63.25,
         "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed": 88.5}
    row = profile.derive({"kernel": "k", "metrics": m}, "05_lane_groups")
    assert row["l1_hit_pct"] == 63.25 and row["l1_pipe_pct"] == 88.5
    shown = profile.Profile([row], label="synthetic")
    assert "L1 hit %" in repr(shown) and "63.2" in repr(shown) and "L1 already held" in shown.notes()
    assert "L1 pipe %" in repr(shown) and "88.5" in repr(shown) and "data pipe" in shown.notes()
    old = profile.Profile([profile.derive({"kernel": "k", "metrics": {"gpu__time_duration.sum": 1.0}}, "01")])
    assert "L1 hit" not in repr(old) and "L1 pipe" not in repr(old) and "L1 already held" not in old.notes()
    assert "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct" in profile.metric_names()
    assert "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed" in profile.metric_names()


def test_output_without_csv_gives_no_kernels():
    assert profile.parse_csv("==PROF== Connected\n==WARNING== No kernels were profiled.\n") == []


def test_kernel_names_are_shortened():
    assert profile.short_name("_ZN6cudapy8cudabook8resample9s01_naive14resample_naiveB2v1B94cw51cE5Array") \
        == "resample_naive"
    assert profile.short_name("void resample_tma<8>(CUtensorMap_st, float const*)") == "resample_tma"
    assert profile.short_name("resample_intervals") == "resample_intervals"


def test_metric_names_follow_what_this_gpu_offers():
    offered = {"gpu__time_duration", "dram__bytes_op_read", "dram__bytes_op_write", "dram__bytes",
               "smsp__warp_issue_stalled_long_scoreboard_per_warp_active",
               "smsp__warp_issue_stalled_barrier_per_warp_active"}
    names = profile.metric_names(offered)
    assert "dram__bytes_op_read.sum" in names and "dram__bytes_read.sum" not in names
    assert [n for n in names if "stalled" in n] == ["smsp__warp_issue_stalled_barrier_per_warp_active.pct",
                                                    "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct"]
    assert "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct" in profile.metric_names(None)


# ------------------------------------------------------------------------------------------- missing or forbidden

def test_a_missing_ncu_says_where_it_lives_and_how_to_name_it(no_ncu_anywhere):
    assert profile.find_ncu() is None
    with pytest.raises(profile.NcuMissing) as e:
        profile.require_ncu()
    assert "CUDABOOK_NCU" in str(e.value) and "CUDA toolkit" in str(e.value)
    assert e.value._render_traceback_() == [f"NcuMissing: {e.value}"]   # a notebook shows the message, no traceback


def test_a_wrong_cudabook_ncu_is_named(no_ncu_anywhere, monkeypatch, tmp_path):
    monkeypatch.setenv("CUDABOOK_NCU", str(tmp_path / "no" / "ncu"))
    with pytest.raises(profile.NcuMissing, match="CUDABOOK_NCU names .*not an executable file"):
        profile.require_ncu()


def test_a_forbidden_ncu_explains_the_permission(no_ncu_anywhere, monkeypatch, tmp_path):
    bin_ = tmp_path / "bin"
    fake_ncu(bin_, f"sys.stdout.write({PERMISSION_TEXT!r})\nsys.exit(1)\n")
    monkeypatch.setenv("PATH", str(bin_))
    ncu = profile.find_ncu()
    assert ncu == str(bin_ / "ncu")
    with pytest.raises(profile.NcuForbidden) as e:
        profile.collect(ncu, "resample", "01_naive")
    message = str(e.value)
    assert "ERR_NVGPUCTRPERM" in message and "NVreg_RestrictProfilingToAdminUsers=0" in message
    assert "root" in message and "Traceback" not in message


FAKE_NCU = f"""
args = sys.argv[1:]
if "--version" in args:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2099.1.0.0 (build 1) (public-release)")
    sys.exit(0)
if "--query-metrics" in args:
    sys.exit(1)
if "dram__bytes_read.sum" in args[args.index("--metrics") + 1]:
    print("==ERROR== Failed to find metric regex:^dram__bytes_read\\\\.(sum|avg)$")
    sys.exit(1)
info = args[args.index("--info") + 1]
open(info, "w").write(json.dumps({{"workload": "resample B=64 S=4096 T=4096 D=256 sorted",
                                   "min_bytes": 270532608, "size": {{}}, "params": {{}}}}))
sys.stdout.write(open({str(FIXTURE)!r}).read())
"""


def test_an_unknown_metric_is_dropped_and_the_rest_measured(no_ncu_anywhere, monkeypatch, tmp_path):
    """A fake ncu that does not know dram__bytes_read, then prints the synthetic fixture and the driver's info."""
    fake_ncu(tmp_path / "bin", FAKE_NCU)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    got = profile.collect(profile.find_ncu(), "resample", "01_naive")
    assert got["missing"] == ["dram__bytes_read.sum"]
    assert [k["kernel"] for k in got["kernels"]] == ["resample_naive"]
    assert got["info"]["min_bytes"] == 270532608
    assert "--profile-from-start" in got["ncu_args"] and "--metrics" in got["ncu_args"]
    assert profile.ncu_version(profile.find_ncu()) == "2099.1.0.0"


def test_record_writes_the_file_stage_by_stage(no_ncu_anywhere, monkeypatch, tmp_path):
    """record() end to end with the fake ncu (as if on a GPU): the file, its pedigree, its kernels."""
    fake_ncu(tmp_path / "bin", FAKE_NCU)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr("cudabook.SIMULATOR", False)
    lines = []
    path = profile.record("resample", ["01"], folder=tmp_path / "profiles", progress=lines.append)
    record = profile.load_record(path)
    assert record["ncu"] == "2099.1.0.0" and record["track"] == "resample"
    assert record["stages"]["01_naive"]["missing_metrics"] == ["dram__bytes_read.sum"]
    assert record["stages"]["01_naive"]["kernels"][0]["kernel"] == "resample_naive"
    assert any("resample_naive" in line for line in lines)


def test_profile_without_a_gpu_says_so(monkeypatch):
    monkeypatch.setattr("cudabook.SIMULATOR", True)
    with pytest.raises(profile.ProfileUnavailable, match="needs a GPU"):
        profile.profile("resample", "01_naive")


def test_the_command_line_prints_the_reason_not_a_traceback(capsys, monkeypatch):
    monkeypatch.setattr("cudabook.SIMULATOR", True)
    assert profile.main(["--record", "resample", "01"]) == 2
    err = capsys.readouterr().err
    assert "needs a GPU" in err and "Traceback" not in err


# -------------------------------------------------------------------------------------------------------- records

def _record(stage="01_naive", gpu="NVIDIA Testcard"):
    kernels = profile.parse_csv(FIXTURE.read_text())
    got = {"kernels": kernels, "info": {"workload": "resample B=64 S=4096 T=4096 D=256 sorted",
                                        "size": {"B": 64, "S": 4096, "T": 4096, "D": 256, "sorted_targets": True},
                                        "min_bytes": 270532608},
           "ncu_args": ["--csv"], "missing": []}
    machine = {"gpu": gpu, "driver_version": "13.0"}
    record = profile.new_record("resample", ncu_version="2099.1.0.0", machine=machine)
    record["stages"][stage] = profile.stage_entry(got)
    return json.loads(json.dumps(record))


def test_a_record_round_trips_and_keeps_other_stages(tmp_path):
    record = _record()
    path = profile.save_record(record, tmp_path)
    assert path == tmp_path / "Testcard_resample.json"
    assert profile.load_record(path) == record
    for key in ("gpu", "machine", "driver", "cuda_driver", "ncu", "commit", "date", "stages"):
        assert key in record
    stage = record["stages"]["01_naive"]
    assert stage["workload"].startswith("resample B=64") and stage["kernels"][0]["metrics"]
    profile.save_record(_record("03_coalesced"), tmp_path)
    assert set(profile.load_record(path)["stages"]) == {"01_naive", "03_coalesced"}
    failed = _record("03_coalesced")
    failed["stages"]["03_coalesced"] = {"error": "ncu did not finish"}
    profile.save_record(failed, tmp_path)                  # a failed try keeps the profile measured before
    assert profile.load_record(path)["stages"]["03_coalesced"]["kernels"]


@pytest.mark.parametrize("breakage, message", [
    (lambda r: r.pop("gpu"), "missing field gpu"),
    (lambda r: r.update(kind="gemm sizes"), "not 'ncu profile'"),
    (lambda r: r["stages"]["01_naive"].pop("kernels"), r"missing field stages\.01_naive\.kernels"),
    (lambda r: r["stages"]["01_naive"]["kernels"][0]["metrics"].update({"dram__bytes.sum": "lots"}),
     r"stages\.01_naive\.kernels\[0\]\.metrics\.dram__bytes\.sum should be a number"),
])
def test_a_malformed_record_names_the_field(tmp_path, breakage, message):
    record = _record()
    breakage(record)
    (tmp_path / "bad.json").write_text(json.dumps(record))
    with pytest.raises(profile.RecordError, match=message):
        profile.load_record(tmp_path / "bad.json")


def test_recorded_profile_is_labelled_with_the_card(tmp_path):
    profile.save_record(_record(), tmp_path)
    p = profile.recorded("resample", "01", folder=tmp_path)
    assert p.label.startswith("recorded on NVIDIA Testcard, ") and "ncu 2099.1.0.0" in p.label
    assert p.kernel("01_naive")["kernel"] == "resample_naive"
    assert p.min_bytes("01_naive") == 270532608
    assert p.workload == "resample B=64 S=4096 T=4096 D=256 sorted"
    assert profile.recorded("resample", "07_tma", folder=tmp_path) is None


def test_show_without_a_record_says_nothing_is_recorded(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("cudabook.SIMULATOR", True)
    assert profile.show("resample", "01_naive", folder=tmp_path) is None
    out = capsys.readouterr().out
    assert "No profile of resample 01_naive recorded yet" in out and "--record resample" in out


def test_show_draws_the_record_without_a_gpu(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("cudabook.SIMULATOR", True)
    profile.save_record(_record(), tmp_path)
    p = profile.show("resample", "01_naive", folder=tmp_path)
    out = capsys.readouterr().out
    assert "recorded on NVIDIA Testcard" in out and "resample_naive" in out and "long_scoreboard" in out
    assert p.kernel()["registers"] == 40


def test_no_profiles_are_recorded_under_results_by_these_tests():
    folder = profile.PROFILES
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.json")) if folder.exists() else []
    assert not any("Testcard" in n for n in names)
    assert os.path.basename(str(FIXTURE)).startswith("ncu_synthetic")


def test_a_live_profile_says_each_stage_as_it_starts(capsys, monkeypatch):
    # ncu takes seconds a stage (a process that prepares the full-size workload, then the replays): the cell says
    # which stage it is profiling before it waits, never silent
    from cudabook.profile import display
    from cudabook.profile.table import Profile

    def fake_profile(track, stage, size=None, **params):
        print(f"(ncu runs {stage})")
        return Profile([], track=track, gpu="NVIDIA Testcard", label="measured now", stages={stage: {}})
    monkeypatch.setattr(display, "profile", fake_profile)
    p = profile.show("resample", "04_smem_windows", "05_double_buffered", live=True)
    lines = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(lines) if "profiling resample 04_smem_windows now with ncu" in line)
    assert "(ncu runs 04_smem_windows)" in lines[first + 1]
    assert "profiling resample 05_double_buffered now with ncu" in lines[first + 2]
    assert sorted(p.stages) == ["04_smem_windows", "05_double_buffered"]


def _with_text(monkeypatch, name, extra):
    """Every read of the file called `name` (text or bytes) gets `extra` appended, as if the file had it."""
    import pathlib
    real_text, real_bytes = pathlib.Path.read_text, pathlib.Path.read_bytes
    monkeypatch.setattr(pathlib.Path, "read_text",
                        lambda self, *a, **k: real_text(self, *a, **k) + (extra if self.name == name else ""))
    monkeypatch.setattr(pathlib.Path, "read_bytes",
                        lambda self: real_bytes(self) + (extra.encode() if self.name == name else b""))


def test_a_stages_digest_follows_its_code(monkeypatch):
    from cudabook.profile import records
    a, b = records.stage_digest("resample", "05_double_buffered"), records.stage_digest("resample", "07_tma")
    assert a and b and a != b and a == records.stage_digest("resample", "05_double_buffered")
    assert records.stage_digest("msda", "03_smem_tiles") not in (a, b)
    _with_text(monkeypatch, "s05_double_buffered.py", "\nEXTRA = 1\n")
    assert records.stage_digest("resample", "05_double_buffered") != a          # its module changed
    assert records.stage_digest("resample", "07_tma") == b


def test_a_stages_digest_follows_the_workload_it_draws(monkeypatch):
    from cudabook.profile import records
    before = records.stage_digest("resample", "05_double_buffered")
    _with_text(monkeypatch, "inputs.py", "\ndef drawn_otherwise():\n    return 2\n")   # prepare's random_problem
    assert records.stage_digest("resample", "05_double_buffered") != before


def test_comments_docstrings_and_the_benchmarks_peers_leave_the_digest_and_older_records_standing(monkeypatch):
    """A comment fixed in a kernel or a header, a docstring, or a peer added to the benchmark cannot change a
    stage's counters: the code-only digest (what records keep) stays; the text digest older records hold moves,
    and todays_code accepts a record of either kind while its own kind still matches."""
    from cudabook.profile import records
    code, text = records.stage_digest("resample", "07_tma"), records.stage_digest("resample", "07_tma", False)
    assert records.todays_code("resample", "07_tma", code) and records.todays_code("resample", "07_tma", text)
    for name, extra in (("tma.cu", "\n// a comment fixed\n/* and a block */\n"), ("tma.cuh", "\n// a note\n"),
                        ("s07_tma.py", "\n# a comment\n"),
                        ("benchmark.py", "\nPEERS_TOO = ('another peer',)\n")):
        with monkeypatch.context() as m:
            _with_text(m, name, extra)
            assert records.stage_digest("resample", "07_tma") == code, name
            assert records.stage_digest("resample", "07_tma", False) != text, name
            assert records.todays_code("resample", "07_tma", code) and not records.todays_code("resample", "07_tma", text)
    assert records.python_code('"""doc"""\nx = 1  # c\ndef f():\n    """d"""\n    return 2\n') == \
        records.python_code("x=1\ndef f():\n    return 2\n")
    assert not records.todays_code("resample", "07_tma", None)


def test_code_text_is_the_same_on_every_python():
    """Records are made on the GPU machine's Python (3.12) and read on a learner's (3.11, 3.13): the code's text
    must not carry what a version adds (3.12's empty type_params, 3.12.1's empty piece in an f-string's spec)."""
    from cudabook.profile import records
    assert records.python_code("def f(x):\n    return x + 1\n") == (
        "Module(body=[FunctionDef(name='f', args=arguments(args=[arg(arg='x')]), body=[Return(value=BinOp("
        "left=Name(id='x', ctx=Load()), op=Add(), right=Constant(value=1)))])])")
    spec = records.python_code("f'{a:>{w}}'")
    assert "Constant(value='')" not in spec and "FormattedValue(value=Name(id='w'" in spec


def test_a_stages_digest_leaves_out_the_checker(monkeypatch):
    """A hint's wording in msda/checking.py cannot change a kernel's counters: its profile stays today's."""
    from cudabook.profile import records
    before = records.stage_digest("msda", "03_smem_tiles"), records.stage_digest("msda", "03_smem_tiles", False)
    _with_text(monkeypatch, "checking.py", "\nHINT = 'a hint reworded'\n")
    assert (records.stage_digest("msda", "03_smem_tiles"), records.stage_digest("msda", "03_smem_tiles", False)) \
        == before


def test_a_stages_digest_follows_the_kit_headers_it_includes_and_no_others(monkeypatch, tmp_path):
    import shutil

    from cudabook.profile import records
    shutil.copytree(records.INCLUDE, tmp_path, dirs_exist_ok=True)
    monkeypatch.setattr(records, "INCLUDE", tmp_path)
    before = {s: records.stage_digest("resample", s) for s in ("05_double_buffered", "07_tma")}
    (tmp_path / "stream_copy.cu").write_text("__global__ void rewritten() {}\n")
    assert {s: records.stage_digest("resample", s) for s in before} == before
    (tmp_path / "tma.cuh").write_text((tmp_path / "tma.cuh").read_text() + "\n__device__ int changed;\n")
    assert records.stage_digest("resample", "07_tma") != before["07_tma"]               # 07 includes tma.cuh


def _on_a_gpu(monkeypatch, card="NVIDIA Testcard"):
    """show() as on a GPU with ncu: profile() notes the stages it was asked to profile now."""
    from cudabook.profile import display, records
    from cudabook.profile.table import Profile
    monkeypatch.setattr("cudabook.SIMULATOR", False)
    monkeypatch.setattr(records, "_gpu_name", lambda: card)
    monkeypatch.delenv("CUDABOOK_PROFILE", raising=False)
    monkeypatch.delenv("CUDABOOK_FULL_LADDER", raising=False)
    live = []

    def fake_profile(track, stage, size=None, **params):
        live.append(stage)
        return Profile([], track=track, gpu=card, label="measured now", stages={stage: {}})
    monkeypatch.setattr(display, "profile", fake_profile)
    return live


def test_on_a_gpu_this_cards_record_of_todays_code_is_shown_not_profiled_again(tmp_path, capsys, monkeypatch):
    from cudabook.profile import records
    live = _on_a_gpu(monkeypatch)
    for stage in ("04_smem_windows", "05_double_buffered"):
        rec = _record(stage)
        rec["stages"][stage]["code"] = records.stage_digest("resample", stage)
        profile.save_record(rec, tmp_path)
    p = profile.show("resample", "04_smem_windows", "05_double_buffered", folder=tmp_path)
    out = capsys.readouterr().out
    assert live == [] and "‡ This card's profile" in out and "live=True" in out
    assert sorted(p.stages) == ["04_smem_windows", "05_double_buffered"]
    profile.show("resample", "04_smem_windows", "05_double_buffered", folder=tmp_path, live=True)
    assert live == ["04_smem_windows", "05_double_buffered"]
    live.clear()
    monkeypatch.setenv("CUDABOOK_PROFILE", "live")
    profile.show("resample", "04_smem_windows", folder=tmp_path)
    assert live == ["04_smem_windows"]
    monkeypatch.delenv("CUDABOOK_PROFILE")
    live.clear()
    profile.show("resample", "04_smem_windows", "07_tma", folder=tmp_path)      # 07 not recorded: both now
    assert live == ["04_smem_windows", "07_tma"]


def test_on_a_gpu_a_record_of_other_code_or_another_card_is_profiled_again(tmp_path, capsys, monkeypatch):
    from cudabook.profile import records
    live = _on_a_gpu(monkeypatch)
    rec = _record("05_double_buffered")
    rec["stages"]["05_double_buffered"]["code"] = "0123456789abcdef"          # the kernel changed since
    profile.save_record(rec, tmp_path)
    profile.show("resample", "05_double_buffered", folder=tmp_path)
    assert live == ["05_double_buffered"]
    old = _record("04_smem_windows")                                         # an older record: no digest
    profile.save_record(old, tmp_path)
    profile.show("resample", "04_smem_windows", folder=tmp_path)
    assert live == ["05_double_buffered", "04_smem_windows"]
    live.clear()
    other = _record("04_smem_windows", gpu="NVIDIA Othercard")
    other["stages"]["04_smem_windows"]["code"] = records.stage_digest("resample", "04_smem_windows")
    profile.save_record(other, tmp_path)
    profile.show("resample", "04_smem_windows", folder=tmp_path)
    assert live == ["04_smem_windows"] and "‡" not in capsys.readouterr().out


def test_on_a_gpu_a_record_of_another_size_is_profiled_again(tmp_path, monkeypatch):
    from cudabook.profile import records
    live = _on_a_gpu(monkeypatch)
    rec = _record("05_double_buffered")
    rec["stages"]["05_double_buffered"].update(code=records.stage_digest("resample", "05_double_buffered"),
                                               workload="resample B=8 S=4096 T=4096 D=256 sorted")
    profile.save_record(rec, tmp_path)
    profile.show("resample", "05_double_buffered", folder=tmp_path)
    assert live == ["05_double_buffered"]


def test_a_variants_record_is_shown_for_those_settings_only(tmp_path, capsys, monkeypatch):
    # a variant (a stage with some settings moved) is shown on this card for the same settings, profiled again for
    # others, and never passed off as the defaults' profile
    from cudabook.profile import records
    live = _on_a_gpu(monkeypatch)
    rec = _record("05_double_buffered")
    rec["stages"]["05_double_buffered"].update(code=records.stage_digest("resample", "05_double_buffered"),
                                               params={"threads": 64})
    profile.save_record(rec, tmp_path)
    p = profile.show("resample", "05_double_buffered", folder=tmp_path, threads=64)
    assert live == [] and "‡ This card's profile" in capsys.readouterr().out
    assert "with 05_double_buffered threads=64" in p.label
    profile.show("resample", "05_double_buffered", folder=tmp_path, threads=256)
    profile.show("resample", "05_double_buffered", folder=tmp_path)
    assert live == ["05_double_buffered", "05_double_buffered"]
    monkeypatch.setattr("cudabook.SIMULATOR", True)
    assert profile.show("resample", "05_double_buffered", folder=tmp_path) is None
    out = capsys.readouterr().out
    assert "No profile of resample 05_double_buffered recorded yet" in out and f"--folder {tmp_path}" in out
    assert profile.show("resample", "05_double_buffered", folder=tmp_path, threads=64) is not None


def test_a_variant_is_recorded_and_found_in_a_folder_named_by_its_settings(monkeypatch, tmp_path):
    from cudabook.profile import cli, display, records
    monkeypatch.setattr(records, "PROFILES", tmp_path)
    folder = records.variant_folder("resample", "05", {"threads": 64, "vec_bytes": 16})   # 16: the default
    assert folder.parent == tmp_path / "variants" and folder.name.startswith("resample_05_double_buffered_threads-64_")
    assert records.variant_folder("resample", "05", {"threads": 128}) is None                 # the defaults' own
    wrote = []
    monkeypatch.setattr(cli, "record", lambda track, stages, **kw: wrote.append((stages, kw)) or tmp_path / "x")
    assert cli.main(["--record", "resample", "04", "05", "--params", '{"threads": 64}']) == 0
    assert [(s, kw["folder"], kw["params"]) for s, kw in wrote] == [
        (["04"], records.variant_folder("resample", "04", {"threads": 64}), {"04_smem_windows": {"threads": 64}}),
        (["05"], records.variant_folder("resample", "05", {"threads": 64}), {"05_double_buffered": {"threads": 64}})]
    asked = []
    monkeypatch.setattr(display, "recorded", lambda track, *names, folder=None, gpu=None, only_gpu=False:
                        asked.append(folder))
    monkeypatch.setattr("cudabook.SIMULATOR", True)
    profile.show("resample", "04", "05", threads=64)                       # each stage from its own folder
    assert asked == [records.variant_folder("resample", s, {"threads": 64}) for s in ("04", "05")]


def test_variant_folders_never_collide_and_refuse_what_is_not_data(monkeypatch, tmp_path):
    from cudabook.profile import records
    monkeypatch.setattr(records, "PROFILES", tmp_path)
    pairs = [({"threads": "64"}, {"threads": 64}), ({"threads": [6, 4]}, {"threads": [64]}),
             ({"buffers": "a b"}, {"buffers": "ab"}), ({"threads": True}, {"threads": "true"})]
    for a, b in pairs:
        assert records.variant_folder("resample", "05", a) != records.variant_folder("resample", "05", b), (a, b)
    with pytest.raises(ValueError, match="setting threads=<class 'object'> is not plain data"):
        records.variant_folder("resample", "05", {"threads": object})


def test_the_command_line_checks_params_and_shows_a_variant_as_asked(monkeypatch, tmp_path, capsys):
    from cudabook.profile import cli, records
    monkeypatch.setattr(records, "PROFILES", tmp_path)
    monkeypatch.setattr("cudabook.SIMULATOR", True)
    for argv, message in ((["--record", "resample", "05", "--params", "5"], "a JSON object of settings"),
                          (["--record", "resample", "--params", '{"threads": 64}'], "needs the stages"),
                          (["--record", "resample", "05", "--params", '{"threads": 64}', "--size", '{"B": 8}'],
                           "--size with --params needs --folder")):
        with pytest.raises(SystemExit):
            cli.main(argv)
        assert message in capsys.readouterr().err
    profile.save_record(_record("05_double_buffered"), tmp_path)          # the defaults only
    cli.main(["--show", "resample", "05", "--params", '{"threads": 64}'])
    out = capsys.readouterr().out
    assert "No profile of resample 05_double_buffered with {'threads': 64} recorded yet" in out
    assert "resample_naive" not in out                                    # the defaults' table is not shown


def test_variants_prints_each_recorded_setting_against_the_defaults(monkeypatch, tmp_path, capsys):
    from cudabook.profile import records
    monkeypatch.setattr(records, "PROFILES", tmp_path)
    profile.save_record(_record("05_double_buffered"), tmp_path)
    slow = _record("05_double_buffered")
    slow["stages"]["05_double_buffered"]["params"] = {"threads": 64}
    slow["stages"]["05_double_buffered"]["kernels"][0]["metrics"]["gpu__time_duration.sum"] *= 2
    profile.save_record(slow, records.variant_folder("resample", "05", {"threads": 64}))
    small = _record("05_double_buffered")
    small["stages"]["05_double_buffered"].update(params={"threads": 32}, workload="resample B=8 tiny")
    small["stages"]["05_double_buffered"]["kernels"][0]["metrics"]["lts__t_sector_hit_rate.pct"] = None
    profile.save_record(small, records.variant_folder("resample", "05", {"threads": 32}))
    rows = profile.variants("resample", "05", [{"threads": 64}, {"threads": 256}, {"threads": 32}])
    out = capsys.readouterr().out
    assert [r["params"] for r in rows] == [{}, {"threads": 64}]
    assert rows[1]["duration_us"] == pytest.approx(2 * rows[0]["duration_us"])
    assert "NVIDIA Testcard, resample 05_double_buffered under ncu" in out and "2.000" in out
    assert "threads=256: not recorded on NVIDIA Testcard" in out and "--params '{\"threads\": 256}'" in out
    assert "threads=32: recorded on another workload (resample B=8 tiny), not compared" in out
    assert profile.variants("resample", "05", [{"threads": 64}], gpu="NVIDIA Othercard") == []
    assert "No profile of resample 05_double_buffered on NVIDIA Othercard" in capsys.readouterr().out


def test_cxx_code_drops_comments_but_not_what_looks_like_them_in_literals():
    from cudabook import nvrtc
    text = ('#include "a.h"  // the header\n'
            'const char* s = "a // not a comment", *t = "/* nor this */"; /* a block\n'
            'over two lines */ int x = \'/\';   \n'
            '\n'
            'asm volatile("mov.u32 %0, %1;" : "=r"(x) : "r"(1)); // pinned\n')
    assert nvrtc.cxx_code(text) == ('#include "a.h"\n'
                                    'const char* s = "a // not a comment", *t = "/* nor this */";   int x = \'/\';\n'
                                    'asm volatile("mov.u32 %0, %1;" : "=r"(x) : "r"(1));')
    assert nvrtc.cxx_code('char q = \'"\'; // "quoted"\nint y;') == "char q = '\"';\nint y;"


def test_an_edit_is_profiled_beside_its_rung(no_ncu_anywhere, monkeypatch, tmp_path, capsys):
    """--edit: the kernel the edit applies to, then its edited copy (the driver is told the edit's file and which
    side to launch), both kept as a reading that show_edits prints; an adopted edit's "rung" is the kernel at its
    BASE. The edit must be of the stage asked for, and is never a record."""
    from cudabook.profile import cli
    calls = tmp_path / "calls.txt"
    log = f"open({str(calls)!r}, 'a').write(' '.join(args) + '\\n')\ninfo = args"
    fake_ncu(tmp_path / "bin", FAKE_NCU.replace("info = args", log))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr("cudabook.SIMULATOR", False)
    monkeypatch.setattr("cudabook.profile.measure._gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr("cudabook.profile.edits._gpu_name", lambda: "NVIDIA H200")
    from cudabook import results
    from cudabook import track as tracks
    monkeypatch.setattr(tracks.get("msda"), "unavailable", lambda stage: None)     # (as on a GPU)
    readings = tmp_path / "results" / "readings"
    assert cli.main(["--edit", "msda05_heads_outer_wide", "--folder", str(readings), "msda", "05"]) == 0
    out = capsys.readouterr().out
    assert out.count("measured now on NVIDIA H200") == 2 and "edited by msda05_heads_outer_wide" in out
    runs = [line for line in calls.read_text().splitlines() if "--run" in line]
    assert len(runs) == 2 and runs[0].endswith("msda05_heads_outer_wide.py --side rung")
    assert runs[1].endswith("msda05_heads_outer_wide.py --side edited")
    path = readings / "H200_msda_05_lane_groups_profile_edit_msda05_heads_outer_wide.json"
    reading = json.loads(path.read_text())
    assert reading["rung_at"] == "072c6ff" and len(reading["cases"]) == 1
    assert reading["cases"][0]["rung"][0]["kernel"] == "resample_naive"       # (the fake ncu's fixture)
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    shown = []
    assert profile.show_edits("msda", "05", out=shown.append) == 1
    assert "the rung at 072c6ff, before it adopted the edit" in "\n".join(shown)
    for argv, says in ((["--edit", "msda05_heads_outer", "msda", "04"], "edits msda 05_lane_groups"),
                       (["--edit", "msda05_heads_outer", "--record", "msda"], "a record describes")):
        with pytest.raises(SystemExit):
            cli.main(argv)
        assert says in capsys.readouterr().err
