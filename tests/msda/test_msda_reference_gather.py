"""The deformable-attention track's corner gather is a reference kernel, not a bound (issue 29, item 4): rung 05
matched or beat it on the `uniform` workload while it took its groups heads fastest; it is now timed in both
orders and the faster kept. Its table column, record summary, plot and sweep labels,
progress lines and lesson prose call it the reference gather and never a ceiling; the copy ceiling, which is a
bound, keeps its name. The record keys (pct_of_ceiling, ceiling_GBps, gather_us) stay, so old records load."""
import pathlib
import re
import types

from cudabook import bench, results, sizes
from cudabook.msda import benchmark

from test_msda_track import _record

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEAD = "% of reference gather"


def _no_gather_ceiling(text):
    """The words "ceiling" in the text (not the record keys pct_of_ceiling, ceiling_GBps) that are not the copy
    ceiling, each with what comes before it: empty when the copy ceiling is the only ceiling named."""
    return [text[max(0, m.start() - 40):m.end()] for m in re.finditer(r"(?<![\w])ceilings?(?![\w])", text, re.I)
            if not re.search(r"\bcopy\s+$", text[max(0, m.start() - 20):m.start()], re.I)]


def test_the_columns_name_the_reference_gather_and_keep_the_copy_ceiling():
    heads = {key: head for head, key, _ in benchmark.COLUMNS}
    assert heads["pct_of_ceiling"] == HEAD                   # the old key, the new label
    assert heads["pct_of_copy"] == "% of copy"
    assert not any("ceiling" in head.lower() or "bound" in head.lower() for head in heads.values())
    assert "ceiling" not in benchmark.PLOT_LABEL.lower()


def test_a_record_table_and_summary_say_reference_gather_and_copy_ceiling():
    text = results.table(_record())
    assert f"| % of copy | {HEAD} |" in text
    assert "copy ceiling 3,000 GB/s" in text and "reference gather 2,425 GB/s of corners" in text
    assert _no_gather_ceiling(text) == []
    assert benchmark.summary({"copy_GBps": 3000.0}) == "copy ceiling 3,000 GB/s"   # the copy ceiling alone


def test_the_readme_rung_table_and_plot_labels_say_reference_gather():
    table = results.rung_table("msda", [_record()])
    assert f"50.0 {HEAD}" in table and "2.5 % of copy" in table
    assert "ceiling" not in table.split("\n\n")[0].lower()                         # the table, not its caption
    record = {"track": "msda"}
    assert sizes.label(record, "pct_of_ceiling") == HEAD
    assert sizes.label(record, "pct_of_copy") == benchmark.PLOT_LABEL


def test_the_context_progress_lines_say_reference_gather(monkeypatch):
    """context() on a stand-in problem, with the copy and the gather timed by stand-ins (no GPU here): its
    progress lines and the record's description call the gather a reference, and the copy a ceiling."""
    monkeypatch.setattr(bench, "copy_ceilings", lambda nbytes: {"driver": 3000.0, "kernel": 2900.0})
    monkeypatch.setattr(benchmark, "reference_gather_us",
                        lambda problem, heads_outer=False: 20000.0 if heads_outer else 25000.0)
    problem = types.SimpleNamespace(min_bytes=3_000_000_000, gather_bytes=48_500_000_000)
    said = []
    ctx = benchmark.context(problem, progress=said.append)
    assert ctx["gather_us"] == 20000.0 and ctx["ceiling_GBps"] == 2425.0           # the keys old records have
    assert said[0].startswith("copy ceiling: 3,000 GB/s")
    assert said[1].startswith("reference gather: 2,425 GB/s of corner bytes") and "not a bound" in said[1]
    assert "head by head; heads fastest 25,000.0 µs" in said[1]                   # both orders said
    assert "head by head" in benchmark.summary(ctx)
    assert "reference" in ctx["ceiling_how"] and "not a bound" in ctx["ceiling_how"]
    assert _no_gather_ceiling(" ".join(said) + ctx["ceiling_how"]) == []


def test_a_disagreeing_share_is_named_by_its_label():
    bad = _record(pct_of_ceiling=70.0)
    w = next(iter(bad["workloads"].values()))
    why = benchmark.consistency(w["stages"]["01_naive"], w, bad)
    assert "% of reference gather" in why and "reference gather took 20000.0 µs" in why
    assert _no_gather_ceiling(why) == []


def test_the_lessons_call_the_gather_a_reference_measure_the_l1_bound_and_say_the_rest_is_open():
    sources = {p.name: p.read_text() for p in sorted((ROOT / "lessons" / "msda").glob("*.py"))}
    for name, text in sources.items():
        prose = " ".join(line.lstrip("# ") for line in text.splitlines())
        assert not re.search(r"gather\s+ceiling|ceiling\s+kernel|%\s+of\s+(?:the\s+)?ceiling", prose, re.I), name
        assert _no_gather_ceiling(prose) == [], name
    lesson05 = " ".join(line.lstrip("# ") for line in sources["05_lane_groups.py"].splitlines())
    assert re.search(r"times the gather both ways on every workload and keeps the\s+faster", lesson05)
    assert "tools/probe_reference_gather.py" in lesson05                     # the two orders, read beside rung 05
    assert "reference gather is **not a bound**" in lesson05
    assert "## A bound from the L1" in sources["05_lane_groups.py"]        # the bound for global-load gathers
    assert "tools/probe_l1_gather.py" in lesson05 and "A line a cycle, or 128 bytes a cycle" in lesson05
    assert re.search(r"beats the floor has to load fewer corners than the samples ask for", lesson05)
    assert re.search(r"whether that pays here is \*\*open\*\*", lesson05)                      # what lies past it
    assert "reference gather" in sources["01_naive.py"] and "not measured" in sources["01_naive.py"]


def test_the_readme_prose_calls_it_a_reference():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## The deformable-attention track"):]
    section = section[:section.index("<!-- rungs msda:begin")]
    assert "reference gather" in section and "copy ceiling" in section
    assert _no_gather_ceiling(section) == []
    assert "gather ceiling" not in readme


def test_the_context_keeps_the_faster_order_of_the_reference_gather(monkeypatch):
    """The reference at its strongest: both orders of its groups timed, the faster one's time kept, whichever it
    is, with both times and the order's name in the record."""
    monkeypatch.setattr(bench, "copy_ceilings", lambda nbytes: {"driver": 3000.0})
    problem = types.SimpleNamespace(min_bytes=3_000_000_000, gather_bytes=48_500_000_000)
    for heads_fastest, head_by_head, order in ((3451.5, 3768.3, "heads fastest"), (4716.9, 3833.9, "head by head")):
        monkeypatch.setattr(benchmark, "reference_gather_us", lambda problem, heads_outer=False:
                            head_by_head if heads_outer else heads_fastest)
        ctx = benchmark.context(problem, progress=lambda line: None)
        assert ctx["gather_order"] == order and ctx["gather_us"] == min(heads_fastest, head_by_head)
        assert ctx["gather_orders_us"] == {"heads fastest": heads_fastest, "head by head": head_by_head}
