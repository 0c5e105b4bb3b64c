"""Size sweeps (tools/sweep_sizes.py on a GPU, results/sizes/<gpu>_<track>.json) loaded and drawn without one."""
import json
import pathlib
import subprocess
import sys

from cudabook import results, sizes

ROOT = pathlib.Path(__file__).resolve().parents[2]
PEDIGREE = {"commit": "abc1234", "dirty": False, "source_digest": "0123456789abcdef",
            "date": "2025-01-02T03:04:05+00:00", "machine": {"gpu": "NVIDIA H100 80GB HBM3"}}
STAGES = ("05_wgmma_tma", "06_warp_specialized")


def _pct(stage, N, d, causal):
    """A made-up % of SDPA, different for every (stage, size), so a line drawn from the wrong rows shows."""
    return round(50 + 10 * STAGES.index(stage) + N / 256 + d / 64 + (5 if causal else 0), 1)


def _record(gpu="NVIDIA H100 80GB HBM3", commit="abc1234"):
    rows, done = [], []
    for d in (128, 64):
        for causal in (False, True):
            for N in (1024, 2048, 4096):
                size = dict(B=4, H=16, N=N, d=d, causal=causal)
                done.append({"size": size, "workload": f"attention B=4 H=16 N={N} d={d} causal={causal}",
                             "context": {"flops": 1}, "seconds": 1.0})
                for stage in STAGES:
                    pct = _pct(stage, N, d, causal)
                    rows.append({"size": size, "stage": stage, "peer": False, "median_us": 1000.0 / pct,
                                 "TFLOPs": pct * 6, "pct_of_sdpa": pct,
                                 "correct": not (stage == STAGES[0] and N == 2048 and d == 64)})
                rows.append({"size": size, "stage": "sdpa_cudnn", "peer": True, "median_us": 10.0, "TFLOPs": 600.0,
                             "pct_of_sdpa": 100.0, "correct": True})
                rows.append({"size": size, "stage": "sdpa_efficient", "peer": True,
                             "skipped": "not run: refuses this problem"})
    rows.append({"size": dict(B=4, H=16, N=4096, d=64, causal=True), "stage": "04_mma_cp_async", "peer": False,
                 "error": "ValueError: too much shared memory"})
    return {"schema": 1, "kind": sizes.KIND, "track": "attention", "gpu": gpu, **PEDIGREE, "commit": commit,
            "x": ["N"], "panels": ["d", "causal"], "fixed": {"B": 4, "H": 16}, "plot_key": "pct_of_sdpa",
            "plot_label": "% of SDPA (its fastest backend)", "stages": list(STAGES) + ["04_mma_cp_async"],
            "peers": ["sdpa_cudnn", "sdpa_efficient"], "repeats": 10, "slow_ms": 50, "complete": True,
            "seconds": 12.0, "sizes": done, "rows": rows}


def _lines(ax):
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


def test_a_record_is_saved_loaded_and_drawn(tmp_path):
    path = sizes.save(_record(), tmp_path)
    assert path == tmp_path / "H100_80GB_HBM3_attention.json"
    sizes.save(_record(gpu="NVIDIA H200", commit="def5678"), tmp_path)
    (tmp_path / "H100_80GB_HBM3_gemm.json").write_text(json.dumps(dict(_record(), track="gemm")))
    (tmp_path / "broken_attention.json").write_text("{not json")
    found = sizes.load("attention", tmp_path)
    assert [r["gpu"] for r in found] == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]        # one per card
    record = found[0]
    assert record["commit"] == "abc1234" and record["rows"][0]["size"]["N"] == 1024

    fig = sizes.figure(record)
    assert len(fig.axes) == 4                                               # d x causal
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["d=128, causal=False", "d=128, causal=True", "d=64, causal=False", "d=64, causal=True"]
    assert "H100 80GB HBM3" in fig.get_suptitle() and "abc1234" in fig.get_suptitle()
    for ax, (d, causal) in zip(fig.axes, [(128, False), (128, True), (64, False), (64, True)]):
        lines = _lines(ax)
        assert set(lines) >= set(STAGES) | {"sdpa_cudnn"}                  # a line per stage and peer
        assert "sdpa_efficient" not in lines and "04_mma_cp_async" not in lines   # skipped, error: nothing to draw
        for stage in STAGES:
            assert list(lines[stage].get_xdata()) == [1024, 2048, 4096]
            assert list(lines[stage].get_ydata()) == [_pct(stage, N, d, causal) for N in (1024, 2048, 4096)]
            assert lines[stage].get_linestyle() == "-"
        assert lines["sdpa_cudnn"].get_linestyle() == "--"                 # peers dashed
        assert list(lines["sdpa_cudnn"].get_ydata()) == [100.0] * 3
        assert ax.get_xscale() == "log"                                    # N doubles: a log2 axis
    wrong = [line for line in fig.axes[2].get_lines() if line.get_label() == "_wrong output"]
    assert len(wrong) == 1 and list(wrong[0].get_xdata()) == [2048]

    tflops = sizes.figure(record, key="TFLOPs", where={"d": 128})
    assert len(tflops.axes) == 2 and tflops.axes[0].get_ylabel() == "TFLOP/s"
    assert list(_lines(tflops.axes[1])[STAGES[1]].get_ydata()) == [_pct(STAGES[1], N, 128, True) * 6
                                                                   for N in (1024, 2048, 4096)]


def test_table_rows():
    rows = sizes.table(_record())
    assert rows[0] == ["d", "causal", "N", *STAGES, "04_mma_cp_async", "sdpa_cudnn", "sdpa_efficient"]
    assert len(rows) == 1 + 12
    first = rows[1]
    assert first[:3] == ["128", "False", "1024"] and first[3] == f"{_pct(STAGES[0], 1024, 128, False):.1f}"
    assert first[5] == "–" and first[7] == "–"                             # not measured, skipped
    assert rows[-1][5] == "error" and rows[-2][3].endswith("✗")            # an error, a wrong output
    assert "sdpa_cudnn" in sizes.format_table(rows).splitlines()[0]


def test_show_without_records_says_how_to_record(tmp_path, capsys):
    assert sizes.show("gemm", folder=tmp_path) is None
    assert "python tools/sweep_sizes.py --track gemm" in capsys.readouterr().out


def test_show_draws_every_card(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)                      # results/sizes/ under the default
    sizes.save(_record(), tmp_path / "sizes")
    sizes.save(_record(gpu="NVIDIA H200"), tmp_path / "sizes")
    shown = sizes.show("attention")
    assert len(shown) == 2 and all(len(f.axes) == 4 for f in shown)
    out = capsys.readouterr().out
    assert "Recorded on NVIDIA H100 80GB HBM3 at commit abc1234" in out and "NVIDIA H200" in out


def test_show_says_when_a_stage_ran_with_other_settings_than_todays(tmp_path, capsys, monkeypatch):
    from cudabook.attention import s05_wgmma_tma
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    record = _record()
    stage_rows = [r for r in record["rows"] if r.get("stage") == "05_wgmma_tma"]
    assert stage_rows
    for r in stage_rows:
        r["params"] = dict(s05_wgmma_tma.PARAMS)
    sizes.save(record, tmp_path / "sizes")
    sizes.show("attention")
    assert "other than the stages' defaults" not in capsys.readouterr().out
    key = next(iter(s05_wgmma_tma.PARAMS))
    stage_rows[0]["params"] = {k: v for k, v in s05_wgmma_tma.PARAMS.items() if k != key}
    sizes.save(record, tmp_path / "sizes")
    sizes.show("attention")
    out = capsys.readouterr().out
    assert f"other than the stages' defaults today: 05_wgmma_tma: {key} not in the record" in out


def test_list_names_sizes_and_stages_of_every_track():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "sweep_sizes.py"), "--list"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for line in ("attention B=4 H=16 N=512 d=128 causal=False", "attention B=4 H=16 N=8192 d=64 causal=True",
                 "gemm M=256 N=256 K=256", "gemm M=8192 N=8192 K=8192",
                 "resample B=64 S=4096 T=4096 D=64 sorted", "resample B=64 S=4096 T=4096 D=512 sorted",
                 "msda N=48 Lq=1000 M=8 L=4 P=8 D=32 local", "msda N=48 Lq=15420 M=8 L=4 P=8 D=32 local"):
        assert line in out
    chosen = [line.split(": ", 1)[1].split(", ") for line in out.splitlines() if "stages (as if" in line]
    assert len(chosen) == 4 and all(1 <= len(c) <= 3 for c in chosen)           # resample, gemm, msda, attention
    assert not any("naive" in s for c in chosen for s in c)                       # no slow rung by default
