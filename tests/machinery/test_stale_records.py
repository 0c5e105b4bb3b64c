"""tools/stale_records.py: the profiles and lesson sweeps a card must record again, found without a GPU."""
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools import stale_records  # noqa: E402


def _profile(gpu, track, stages):
    return {"schema": 1, "kind": "ncu profile", "track": track, "gpu": gpu,
            "stages": {s: {"code": code, "params": params} for s, (code, params) in stages.items()}}


def test_a_profile_of_other_code_is_listed_with_the_command_to_record_it(tmp_path):
    from cudabook.profile.records import stage_digest
    today = stage_digest("resample", "03_coalesced")
    folder = tmp_path / "profiles"
    (folder / "variants" / "v").mkdir(parents=True)
    (folder / "Card_resample.json").write_text(json.dumps(_profile("Card", "resample", {
        "03_coalesced": (today, {}), "04_smem_windows": ("0" * 16, {})})))
    (folder / "variants" / "v" / "Card_resample.json").write_text(json.dumps(_profile("Card", "resample", {
        "04_smem_windows": ("0" * 16, {"window_rows": 8})})))
    found = stale_records.stale_profiles(folder)
    assert [(f["stages"], f["command"]) for f in found] == [
        (["04_smem_windows"], "python -m cudabook.profile --record resample 04"),
        (["04_smem_windows"], "python -m cudabook.profile --record resample 04 --params '{\"window_rows\": 8}'")]


def test_a_sweep_taken_under_other_defaults_is_listed_and_one_under_todays_is_not(tmp_path):
    from cudabook import results, track
    t = track.get("attention")
    stage = "06_warp_specialized"
    today = results.json_plain(results._gpu_defaults(t.stage(stage))[0])
    old = dict(today, schedule="static")
    sweeps = [{"track": "attention", "stage": stage, "param": "stages", "gpu": "Card", "defaults": old, "rows": []},
              {"track": "attention", "stage": stage, "param": "consumers", "gpu": "Card", "defaults": today,
               "rows": []}]
    (tmp_path / "Card_lessons.json").write_text(json.dumps({"gpu": "Card", "sweeps": sweeps}))
    found = stale_records.stale_sweeps(tmp_path)
    assert [(f["param"], f["command"]) for f in found] == [
        ("stages", "python tools/record_sweeps.py --track attention --only 06")]
    assert "schedule" in found[0]["why"]


def test_a_sweep_of_other_code_is_listed_and_one_of_todays_or_without_a_digest_is_not(tmp_path):
    """A sweep that recorded its stage's code digest (lesson.save_sweep, since 2026-11-30) is stale once that code
    changes, even under today's defaults: a kernel that changed may rank the swept values differently."""
    from cudabook import lesson, results, track
    from cudabook.profile.records import stage_digest
    t = track.get("msda")
    stage = "05_lane_groups"
    today = results.json_plain(results._gpu_defaults(t.stage(stage))[0])
    base = {"track": "msda", "stage": stage, "gpu": "Card", "defaults": today, "rows": []}
    sweeps = [dict(base, param="threads", stage_digest="0" * 16),
              dict(base, param="vectors", stage_digest=stage_digest("msda", stage)),
              dict(base, param="branchless")]
    (tmp_path / "Card_lessons.json").write_text(json.dumps({"gpu": "Card", "sweeps": sweeps}))
    found = stale_records.stale_sweeps(tmp_path)
    assert [(f["param"], f["why"]) for f in found] == [("threads", "the code has changed since")]
    saved = lesson.save_sweep(tmp_path / "saved.json", dict(base, param="threads", values=[128], fixed={}),
                              pedigree={"machine": {"gpu": "Card"}})
    assert json.loads(saved.read_text())["sweeps"][0]["stage_digest"] == stage_digest("msda", stage)


def test_the_tool_says_so_when_nothing_is_stale(tmp_path, capsys):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "sweeps").mkdir()
    assert stale_records.main(["--results", str(tmp_path)]) == 0
    assert "describes today's code" in capsys.readouterr().out


def test_a_results_folder_without_records_is_refused_by_name(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        stale_records.main(["--results", str(tmp_path / "nowhere")])
    assert e.value.code == 2
    assert "nowhere: no profiles/ folder there" in capsys.readouterr().err


def test_record_runs_each_command_listed_for_one_card_with_this_python(tmp_path, capsys, monkeypatch):
    import subprocess
    import types
    folder = tmp_path / "profiles"
    folder.mkdir()
    (tmp_path / "sweeps").mkdir()
    (folder / "Card_resample.json").write_text(json.dumps(_profile("NVIDIA Card", "resample", {
        "04_smem_windows": ("0" * 16, {})})))
    ran = []

    def fake_run(argv, cwd, env, timeout):
        ran.append((argv, env.get("NUMBA_ENABLE_CUDASIM")))
        return types.SimpleNamespace(returncode=0)
    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(stale_records, "_SET_SIMULATOR", True)     # as when run as a script: it set the variable
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    assert stale_records.main(["--results", str(tmp_path), "--gpu", "Card", "--record"]) == 0
    assert ran and ran[0][0][:4] == [sys.executable, "-m", "cudabook.profile", "--record"]
    assert ran[0][1] is None                     # the commands run on the GPU, not in the simulator
    assert "ok in" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        stale_records.main(["--results", str(tmp_path), "--record"])          # which card? refused
    assert "name it with --gpu" in capsys.readouterr().err


def test_importing_it_leaves_the_simulator_switch_alone():
    """Imported (as these tests do), it must not set NUMBA_ENABLE_CUDASIM: Numba reads it again when it compiles,
    and on a GPU machine every kernel decorated afterwards in that process was the simulator's."""
    import os
    import subprocess
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDABOOK_SET_CUDASIM")}
    said = subprocess.run([sys.executable, "-c", "import os, sys; sys.path.insert(0, sys.argv[1]); "
                           "from tools import stale_records; print('NUMBA_ENABLE_CUDASIM' in os.environ)", str(ROOT)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert said.stdout.strip() == "False", said.stderr[-2000:]
