"""Benchmark records: a malformed one gets an error that names the field; the README is regenerated from them."""
import json

import pytest

from cudabook import results

RECORD = {
    "gpu": "NVIDIA Testcard", "copy_GBps": 3000.0, "commit": "abc1234", "date": "2026-11-26T00:00:00+00:00",
    "workloads": {"resample B=1 S=2 T=3 D=4 sorted": {"stages": {
        "01_naive": {"median_us": 100.0, "GBps": 300.0, "pct_of_copy": 10.0, "correct": True},
        "07_tma": {"skipped": "07_tma needs compute capability 9.0"}},
        "peers": {"torch_compile": {"median_us": 20.0, "GBps": 1500.0, "pct_of_copy": 50.0, "correct": True}}}},
}


def test_a_good_record_round_trips(tmp_path):
    path = results.save(RECORD, tmp_path)
    assert path.name == "Testcard.json"
    assert results.load(path) == RECORD


@pytest.mark.parametrize("breakage, message", [
    (lambda r: r.pop("gpu"), "missing field gpu"),
    (lambda r: r.update(copy_GBps="fast"), "field copy_GBps should be"),
    (lambda r: r["workloads"]["resample B=1 S=2 T=3 D=4 sorted"]["stages"]["01_naive"].pop("correct"),
     r"missing field workloads\.resample B=1 S=2 T=3 D=4 sorted\.stages\.01_naive\.correct"),
])
def test_a_malformed_record_names_the_field(tmp_path, breakage, message):
    record = json.loads(json.dumps(RECORD))
    breakage(record)
    (tmp_path / "bad.json").write_text(json.dumps(record))
    with pytest.raises(results.RecordError, match=message):
        results.load(tmp_path / "bad.json")


def test_not_json_is_an_error(tmp_path):
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(results.RecordError, match="bad.json: not valid JSON"):
        results.load(tmp_path / "bad.json")


def test_table_has_every_stage_and_peer():
    text = results.table(RECORD)
    assert "| 01_naive | 100.0 | 300 | 10.0 | 1.0× | ✓ |" in text
    assert "07_tma needs compute capability 9.0" in text
    assert "| torch_compile | 20.0 | 1,500 | 50.0 | 5.0× | ✓ |" in text


def test_a_stage_measured_with_other_settings_than_todays_is_marked():
    # a record keeps its settings; a reader must see when today's defaults differ (a setting added since, as
    # 07's pdl, or a default changed), read as a GPU runs the stage, not as the simulator does
    from cudabook.resample import s01_naive, s07_tma
    record = json.loads(json.dumps(RECORD))
    stages = record["workloads"]["resample B=1 S=2 T=3 D=4 sorted"]["stages"]
    stages["01_naive"]["params"] = dict(s01_naive.PARAMS)
    text = results.table(record)
    assert "†" not in text
    stages["01_naive"]["params"]["threads"] = 7
    stages["07_tma"] = {"median_us": 50.0, "correct": True, "params": {k: v for k, v in s07_tma.PARAMS.items()
                                                                       if k != "pdl"}}
    text = results.table(record)
    assert "| 01_naive † | 100.0 |" in text and "| 07_tma † | 50.0 |" in text
    assert "01_naive: threads=7 (now 128)" in text and "07_tma: pdl not in the record (now True)" in text


def test_a_default_that_differs_in_the_simulator_is_compared_as_a_gpu_runs_it():
    # msda 01's threads is 64 in the simulator and 256 on a GPU: a GPU's record of 256 is today's default
    from cudabook import track as tracks
    msda = tracks.get("msda")
    assert results.not_today(msda, "01_naive", {"threads": 256}) is None
    assert results.not_today(msda, "01_naive", {"threads": 64}) == "threads=64 (now 256)"
    assert results.not_today(msda, "01_naive", {"threads": 256, "old": 1}) == "old=1 (no longer a setting)"
    assert results.not_today(msda, "01_naive", {}) == "threads not in the record (now 256)"
    assert results.not_today(msda, "01_naive", {}, ignore={"threads"}) is None
    assert results.not_today(msda, "no_such_stage", {"threads": 1}) is None and \
        results.not_today(msda, "01_naive", None) is None


def test_settings_keyed_by_head_dim_and_causal_read_back_from_json_are_todays():
    # a setting keyed by head dim (attention 06's head_group, {64: 0, 128: 4}) is the same setting as a record
    # keeps it, with JSON's keys ("64"), and so is one keyed by causal under it; schedule and head_group came
    # later (ADDED_PARAMS: records before them ran "static" over all heads), and today's defaults are not those
    from cudabook import track as tracks
    from cudabook.attention import s06_warp_specialized as s06
    attention = tracks.get("attention")
    assert results.json_plain({64: True, 128: {False: True, True: False}}) == \
        {"64": True, "128": {"false": True, "true": False}}
    recorded = json.loads(json.dumps(results.json_plain(s06.PARAMS)))
    assert recorded["head_group"] == {"64": 0, "128": 4}
    assert results.not_today(attention, "06_warp_specialized", recorded) is None
    older = {k: v for k, v in recorded.items() if k not in ("schedule", "head_group")}
    assert "schedule not in the record" in results.not_today(attention, "06_warp_specialized", older)
    older["persistent"] = {"64": True, "128": {"false": True, "true": False}}
    assert "persistent=" in results.not_today(attention, "06_warp_specialized", older)


def test_a_setting_added_after_a_record_is_no_difference_while_its_default_runs_the_old_kernel(monkeypatch):
    # msda 04's `strided` came after its records; they ran the contiguous runs, today's default (False)
    from cudabook import track as tracks
    from cudabook.msda import s04_tma_boxes as s04
    msda = tracks.get("msda")
    old = {k: v for k, v in s04.PARAMS.items() if k != "strided"}
    assert results.not_today(msda, "04_tma_boxes", old) is None
    assert results.not_today(msda, "04_tma_boxes", {**old, "strided": True}) == "strided=True (now False)"
    monkeypatch.setattr(s04, "ADDED_PARAMS", {"strided": True})   # had the records run another kernel: a difference
    assert results.not_today(msda, "04_tma_boxes", old) == "strided not in the record (now False)"


def test_every_stages_defaults_are_readable_from_its_source():
    # so that a record's table reads the same on a CPU and on a GPU
    import inspect

    from cudabook import literal
    from cudabook import track as tracks
    for name in tracks.TRACKS:
        t = tracks.get(name)
        for stage in t.STAGES:
            module = t.stage(stage)
            if getattr(module, "PARAMS", None):
                got = literal.assigned(inspect.getsource(module), "PARAMS", simulator=False)
                assert got.keys() == module.PARAMS.keys(), (name, stage)


def test_a_default_is_read_as_a_gpu_runs_it():
    from cudabook import literal
    source = ("import x\nTILE = 16 if SIMULATOR else 32\nBM, BN = (1, 2) if SIMULATOR else (3, 4)\n"
              "OTHER = x.y()\nPARAMS = {'tile': TILE, 'bm': BM, 'n': [BN, -1], 'on': not SIMULATOR}\n")
    assert literal.assigned(source, "PARAMS") == {"tile": 32, "bm": 3, "n": [4, -1], "on": True}
    assert literal.assigned(source, "PARAMS", simulator=True) == {"tile": 16, "bm": 1, "n": [2, -1], "on": False}
    with pytest.raises(literal.Unreadable, match="the name OTHER"):
        literal.assigned(source + "LATER = OTHER\n", "LATER")
    with pytest.raises(literal.Unreadable, match="no module-level `MISSING"):
        literal.assigned(source, "MISSING")
    for change in ("PARAMS['tile'] = 8", "PARAMS.update(tile=8)", "PARAMS = {}", "PARAMS |= {'a': 1}"):
        with pytest.raises(literal.Unreadable, match="changed after its assignment"):
            literal.assigned(source + change + "\n", "PARAMS")
    assert literal.assigned("PARAMS: dict = {'a': 1}\n", "PARAMS") == {"a": 1}


def test_readme_is_regenerated_from_the_records(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{results.BEGIN}\nstale\n{results.END}\nafter\n")
    folder = tmp_path / "results"
    results.save(RECORD, folder)
    assert results.update_readme(readme, folder)
    text = readme.read_text()
    assert "stale" not in text and "NVIDIA Testcard" in text and text.endswith(f"{results.END}\nafter\n")
    assert (folder / "Testcard.png").exists()
    assert not results.update_readme(readme, folder)


def test_a_tracks_readme_section_gets_its_rung_table_from_the_records(tmp_path):
    from cudabook import notebooks
    begin = "<!-- rungs {}:begin (generated by python -m cudabook.results readme) -->"
    readme = tmp_path / "README.md"
    readme.write_text(f"{results.BEGIN}\n{results.END}\n## Resampling\n{begin.format('resample')}\nstale\n"
                      f"{results.RUNGS_END}\n## GEMM\n{begin.format('gemm')}\n{results.RUNGS_END}\nafter\n")
    folder = tmp_path / "results"
    results.save(RECORD, folder)
    assert results.update_readme(readme, folder)
    text = readme.read_text()
    resample = text.split("## Resampling", 1)[1].split("## GEMM", 1)[0]
    title = notebooks._title(notebooks.SOURCES / "resample" / "01_naive.py")
    assert "stale" not in resample and "NVIDIA Testcard" in resample
    assert f"| 01 | [{title}](notebooks/resample/01_naive.ipynb) | [lab](labs/resample/01_naive.ipynb) | " \
           "Numba: GPU or simulator | 100.0 µs · 10.0 % of copy |" in resample
    assert "| 07 | " in resample and "| sm_90+; no GPU: the CPU emulator | – |" in resample     # skipped there
    assert "| torch_compile | a peer, timed in the same process |  |  | 20.0 µs · 50.0 % of copy |" in resample
    gemm = text.split("## GEMM", 1)[1]
    assert "| 07 | " in gemm and "No benchmark record of this track yet" in gemm and gemm.endswith("after\n")
    assert not results.update_readme(readme, folder)


def test_committed_readme_matches_committed_records(tmp_path):
    import shutil
    readme = tmp_path / "README.md"
    shutil.copy(results.README, readme)
    assert not results.update_readme(readme, results.RESULTS, plots=False), \
        "README's results section is stale: run `python -m cudabook.results readme`"


def test_committed_records_are_valid():
    for record in results.load_all():
        assert record["workloads"]


def test_the_resampling_figures_must_agree_with_the_time(tmp_path):
    record = json.loads(json.dumps(RECORD))
    w = record["workloads"]["resample B=1 S=2 T=3 D=4 sorted"]
    w["min_bytes"] = 30_000
    w["stages"]["01_naive"]["GBps"] = 0.3          # 30,000 bytes in 100 µs
    w["stages"]["01_naive"]["pct_of_copy"] = 0.0
    w["peers"]["torch_compile"].update(GBps=1.5, pct_of_copy=0.1)
    results.validate(record, "ok")
    w["stages"]["01_naive"]["GBps"] = 300.0
    with pytest.raises(results.RecordError, match="GBps 300.0 but 30,000 bytes in 100.0 µs is 0.3 GB/s"):
        results.validate(record, "bad")


def _code_at(commit):
    """{path: text} of the workbook's code (cudabook/**/*.py, *.cu, *.cuh) at `commit`, read in one `git cat-file
    --batch` (a `git show` a file took seconds a record), or None where this clone lacks the commit."""
    import subprocess
    listing = subprocess.run(["git", "ls-tree", "-r", commit, "cudabook"], cwd=results.ROOT, capture_output=True,
                             text=True)
    if listing.returncode:
        return None                           # a shallow clone without that commit
    blobs = {}
    for line in listing.stdout.splitlines():
        meta, path = line.split("\t", 1)
        if path.endswith((".py", ".cu", ".cuh")):
            blobs[path] = meta.split()[2]
    batch = subprocess.run(["git", "cat-file", "--batch"], cwd=results.ROOT, capture_output=True,
                           input="".join(f"{sha}\n" for sha in blobs.values()).encode())
    out, texts, at = batch.stdout, {}, 0
    for path in blobs:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        texts[path] = out[header_end + 1:header_end + 1 + size].decode()
        at = header_end + 1 + size + 1            # the blob, then a newline
    return texts


def test_committed_records_measured_the_code_of_the_commit_they_name():
    """A record names a commit and the digest of the code it ran: where that commit is in this clone's history,
    its code must have that digest (a dirty tree, or a commit claimed for other code, fails)."""
    checked, digests = 0, {}
    for record in results.load_all():
        for name, w in record["workloads"].items():
            commit, digest = w.get("commit") or record.get("commit"), w.get("source_digest")
            if not digest or not commit:
                continue                      # measured before records kept a digest
            if commit not in digests:
                code = _code_at(commit)
                digests[commit] = code and results.source_digest(code.__getitem__, list(code))
            if digests[commit] is None:
                continue
            assert digests[commit] == digest, f"{name}: not the code of commit {commit}"
            assert not w.get("dirty"), f"{name} was measured on a tree with uncommitted changes"
            checked += 1
    if not checked:
        pytest.skip("no record with a source digest yet")


def test_the_digest_is_of_the_code():
    here = results.source_digest()
    assert len(here) == 16 and results.source_digest(lambda p: "changed", ["cudabook/x.py"]) != here


def test_a_large_reference_outlives_the_small_ones_judged_after_it():
    """The benchmark judges each stage at full size, then the grader's small cases: the full-size reference must
    still be kept for the next stage (at full size it takes minutes to make again)."""
    import numpy as np

    from cudabook.refmemo import References
    memo, made = References(large=100), []

    def make(tag):
        made.append(tag)
        return tag
    big, small = (np.zeros(200), np.zeros(3)), (np.zeros(2), np.zeros(2))
    assert memo.get(big, lambda: make("big")) == "big"
    for i in range(3):                                     # the small cases, each new inputs
        assert memo.get((np.zeros(2), np.zeros(2)), lambda: make(f"small {i}")) == f"small {i}"
    assert memo.get(big, lambda: make("big again")) == "big" and made.count("big again") == 0
    assert memo.get(small, lambda: make("s")) == "s" and memo.get(small, lambda: make("s2")) == "s"
    assert memo.get((np.zeros(200), big[1]), lambda: make("other big")) == "other big"   # matched by identity
    assert memo.kept(big) is None                          # one large one kept: the newest


def _fake_track(calls):
    """A track in plain Python (no GPU): it logs what is prepared, measured and launched."""
    import types

    import numpy as np

    class Problem:
        def poison(self):
            self.out = None

        def result(self):
            return self.out

    class Bench:
        PEERS_FIRST = True
        WORKLOADS = [dict(n=4)]
        COLUMNS = [("µs", "median_us", "{}")]

        @staticmethod
        def workload_name(n):
            return f"n={n}"

        @staticmethod
        def prepare(size):
            calls.append(("prepare", size["n"]))
            return (np.arange(size["n"]),), Problem()

        @staticmethod
        def context(problem, progress=print):
            calls.append("context")
            return {"copy_GBps": 1.0}

        @staticmethod
        def peers(args, problem, ctx, repeats=25, progress=print):
            calls.append("peers")
            ctx["peer_us"] = 2.0
            return {"torch": {"median_us": 2.0}}

        @staticmethod
        def metrics(problem, us, ctx):
            return {"vs_peer": ctx.get("peer_us", 0) / us}

    def launch(problem, **params):
        calls.append("launch")
        problem.out = 1

    stage = types.SimpleNamespace(launch=launch, PARAMS={})
    return types.SimpleNamespace(NAME="fake", bench=Bench, STAGES=["01_x"], unavailable=lambda s: None,
                                 stage=lambda s: stage, judge=lambda got, *a: types.SimpleNamespace(ok=got == 1),
                                 grading_cases=lambda s: [])


def test_a_lesson_prepares_its_workload_and_peers_once_per_process(monkeypatch):
    """A lesson's ladder and its sweeps share one workload: inputs, ceilings and peers are made once (at full size
    they take minutes), and the ladder's figures still use the peers' time."""
    from cudabook import lesson, results
    calls = []
    t = _fake_track(calls)
    monkeypatch.setattr(lesson, "_WORKLOAD", {})
    monkeypatch.setattr(results, "_timing", lambda fn, repeats: (fn(), 4.0)[1])
    w = lesson.workload(t, dict(n=4), peers=True)
    assert calls == [("prepare", 4), "context", "peers"]
    assert lesson.workload(t, dict(n=4), peers=True) is w and len(calls) == 3
    row = results.measure_workload(t, dict(n=4), peers=True, check_cases=False, progress=lambda *a: None,
                                   prepared=(w["args"], w["problem"], w["ctx"], w["peers"]))
    assert [c for c in calls if c != "launch"] == [("prepare", 4), "context", "peers"]
    assert row["peers"] == {"torch": {"median_us": 2.0}} and row["stages"]["01_x"]["vs_peer"] == 0.5
    assert row["stages"]["01_x"]["correct"]
    lesson.workload(t, dict(n=5))                          # another size: prepared anew, the old one let go
    assert calls[-2:] == [("prepare", 5), "context"] and lesson._WORKLOAD["key"] == ("fake", "n=5")
    assert results.measure_workload(t, dict(n=5), peers=False, check_cases=False, progress=lambda *a: None,
                                    prepared=(w["args"], w["problem"], w["ctx"], None))["peers"] == {}


def test_a_lesson_runs_back_to_back_only_the_pair_that_decides_each_claim(monkeypatch):
    """Two peers against one rung (cuDNN and flash against attention 06): a lesson runs the seconds-long
    back-to-back comparison only against the nearer peer; a record (make bench) against both."""
    import contextlib
    import types

    from cudabook import bench
    times = {"06": 1.0, "near": 1.02, "far": 1.9, "08": 1.0, "other": 1.1}
    last = []
    monkeypatch.setattr(bench, "time_ms", lambda fn, **kw: fn() or times[last[-1]])
    ran = []
    monkeypatch.setattr(bench, "run_for", lambda fn, seconds: fn() or ran.append(last[-1]) or times[last[-1]])

    @contextlib.contextmanager
    def peer_calls(args, problem):
        yield {name: (lambda name=name: last.append(name)) for name in ("near", "far", "other")}
    spec = types.SimpleNamespace(HEAD_TO_HEAD=(("06", "far"), ("06", "near"), ("08", "other")),
                                 peer_calls=peer_calls, SUSTAINED_S=2)
    toy = types.SimpleNamespace(bench=spec, stage=lambda name: types.SimpleNamespace(
        launch=lambda problem, **p: last.append(name)))
    rows = {s: {"correct": True} for s in ("06", "08")}
    peers = {p: {"correct": True} for p in ("near", "far", "other")}
    for which, expect in (("closest", {("06", "near"), ("08", "other")}),
                          ("all", {("06", "near"), ("06", "far"), ("08", "other")}), ("none", set())):
        duels = results.head_to_head(toy, (), None, rows, peers, progress=lambda *a: None, sustained=which)
        assert {(d["stage"], d["peer"]) for d in duels if "sustained" in d} == expect, which
        assert [d["peer"] for d in duels] == ["far", "near", "other"]      # every pair still timed in rounds
    duels = results.head_to_head(toy, (), None, rows, peers, progress=lambda *a: None, sustained="closest",
                                 sustained_stages=("08",))          # a lesson on rung 08: 06 has its own
    assert {(d["stage"], d["peer"]) for d in duels if "sustained" in d} == {("08", "other")}
    assert [d["peer"] for d in duels] == ["far", "near", "other"]
    with pytest.raises(ValueError, match="sustained must be"):
        results.head_to_head(toy, (), None, rows, peers, progress=lambda *a: None, sustained="some")


def test_head_to_head_rounds_alternate_and_a_track_pair_is_timed_again_and_claimed(monkeypatch):
    import contextlib
    import types

    from cudabook import bench
    order = []
    got = bench.head_to_head({"rung": "r", "peer": "p"}, rounds=4, time=lambda f: order.append(f) or len(order))
    assert order == list("rppr" "rppr") and got == {"rung": [1, 4, 5, 8], "peer": [2, 3, 6, 7]}

    clock = iter(range(1, 1000))            # a card that slows: every timing 1 ms longer than the one before
    monkeypatch.setattr(bench, "time_ms", lambda fn, **kw: fn() or float(next(clock)))
    launched = []

    @contextlib.contextmanager
    def peer_calls(args, problem):
        yield {"lib": lambda: launched.append("lib")}
    spec = types.SimpleNamespace(HEAD_TO_HEAD=(("07", "lib"), ("08", "lib")), peer_calls=peer_calls, SUSTAINED_S=3)
    held = []                               # bench.sustained's runs: the peer first, then the rung twice, the peer
    monkeypatch.setattr(bench, "run_for", lambda fn, seconds: held.append((fn(), seconds)) or {"lib": 2.0}.get(
        launched[-1], 1.9))
    toy = types.SimpleNamespace(bench=spec, stage=lambda name: types.SimpleNamespace(
        launch=lambda problem, **p: launched.append(name)))
    rows = {"07": {"correct": True, "median_us": 10.0}, "08": {"correct": False, "median_us": 5.0}}
    duels = results.head_to_head(toy, (), None, rows, {"lib": {"correct": True, "median_us": 11.0}},
                                 progress=lambda *a: None)
    assert [(d["stage"], d["peer"], d["rounds"]) for d in duels] == [("07", "lib", 6)]   # 08 was wrong: left out
    assert launched.count("07") == launched.count("lib") == 6 + 2
    assert abs(duels[0]["ratio"] - 1) < 0.02 and len(duels[0]["stage_us"]) == 6   # the drift shared out: no lead
    assert [s for _, s in held] == [3] * 4 and launched[-4:] == ["lib", "07", "07", "lib"]
    assert duels[0]["sustained"] == {"seconds": 3, "order": ["lib", "07", "07", "lib"], "stage_us": [1900.0] * 2,
                                     "peer_us": [2000.0] * 2, "ratio": round(2.0 / 1.9, 4)}
    record = {"gpu": "NVIDIA Testcard", "commit": "abc", "workloads": {"gemm M=64 N=64 K=64": {
        "stages": {"07_clusters": {"median_us": 10.0, "correct": True}},
        "peers": {"cublas": {"median_us": 11.0, "correct": True}},
        "head_to_head": [{"stage": "07_clusters", "peer": "cublas", "rounds": 6, "ratio": 1.02, "sustained": {
            "seconds": 2.0, "order": ["cublas", "07_clusters", "07_clusters", "cublas"], "ratio": 0.99}}]}}}
    text = results.lead_lines("gemm", [record])
    assert "and each run back to back for 2 s (cublas, 07_clusters, 07_clusters, cublas), as a long job meets " \
           "the card's power cap (the comparison to quote): 07_clusters takes 1.0 % more time (0.990x)" in text
    assert "timed again against cublas in 6 interleaved rounds, which share the card's clock, a few milliseconds " \
           "each after a pause: 07_clusters takes 2.0 % less time (median of the rounds' ratios, 1.020x)" in text
    del record["workloads"]["gemm M=64 N=64 K=64"]["head_to_head"][0]["sustained"]
    assert "timed again against cublas in 6 interleaved rounds, which share the card's clock (the comparison to " \
           "quote): 07_clusters takes 2.0 % less time" in results.lead_lines("gemm", [record])
    record["workloads"]["gemm M=64 N=64 K=64"]["head_to_head"][0]["sustained_error"] = "RuntimeError: boom"
    assert "(the back-to-back run failed: RuntimeError: boom)" in results.lead_lines("gemm", [record])


def test_file_at_reads_a_file_at_a_commit_or_says_none():
    """A lesson compiles the kernel a record ran from the record's commit (results.file_at); where git cannot show
    it (no history, an unknown commit) the answer is None and the lesson says it used today's kernel."""
    from cudabook import results
    head = results._git("rev-parse", "--short", "HEAD")
    if head is None:
        pytest.skip("no git history here")
    assert "msda_lane_groups" in results.file_at(head.strip(), "cudabook/msda/kernels/lane_groups.cu")
    assert results.file_at("0" * 40, "cudabook/msda/kernels/lane_groups.cu") is None
