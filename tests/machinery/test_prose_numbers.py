"""Numbers in the prose come from records. A measurement typed into the markdown of a lesson source, or into the
hand-written prose of README.md and GUIDE.md (a number with a unit of time or rate, a share of a yardstick, a
speed-up, a lead, a clock frequency, bytes moved through DRAM or L2), must be one of three things: gone from the
prose, printed instead from results/ (by a lesson's code cell, or in a region of README or GUIDE that
`python -m cudabook.results readme` or `python tools/guide.py` writes); on the short list below, with the reason
it is not a measurement of this workbook's (a spec-sheet figure, a setting, a worked example, a figure quoted
from a named source); or a reading that is in no record, whose sentence says where it was measured: the card,
what kind of reading (one run, not a record, Nsight Compute) and the commit it was taken at. A reading's sentence
may not also cite a record or a sweep: a number from a record is printed, not typed."""
import pathlib
import re

import sys

import pytest

from cudabook import notebooks, results

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools import guide  # noqa: E402

LESSONS = sorted((ROOT / "lessons").glob("**/*.py"))
PAGES = [results.README, guide.GUIDE]

_N = r"(?<![\w.,^/-])\d(?:[\d,]*\d)?(?:\.\d+)?(?:\s?[–-]\s?\d+(?:\.\d+)?)?"
_BYTES = r"\s?(?:[KMGT]i?B|kB|B)\b(?!/)"
_MOVED = r"(?=(?:\s+[\w'()-]+){0,3}?\s+(?:read|written|from\s(?:DRAM|L2)|of\s(?:DRAM|L2)\straffic)\b)"
MEASUREMENT = re.compile("|".join(f"(?:{p})" for p in (
    _N + r"\s?(?:µs|us|ms|ns|s|seconds?|min|minutes?|hours?|clocks|cycles)\b",     # a time
    _N + r"\s?(?:[TGM]FLOP/?s|TFLOPs|[GT]i?B/s)",                                  # a rate
    _N + r"\s?%\s(?:of\s(?:the\s)?(?:cuBLAS|cuDNN|SDPA|copy|needed|peak|its\speak|fastest|gather|ceiling|torch|bf16|"
         r"the\scompiler)|faster|slower|less|more|ahead|behind)",                  # a share, a difference
    r"\b(?:within|costs?|gain(?:ed|s)?|saves?|loses?)\s(?:about\s)?" + _N + r"\s?%",
    _N + r"\s?(?:x|×|times)\s(?=faster|slower|rung|as\sfast|cuBLAS|cuDNN|torch|SDPA|at\s|from\s|over\s|on\s)",
    _N + r"\s?[MG]Hz\b",                                                           # a clock
    _N + _BYTES + _MOVED,                                                          # bytes read or written
    r"\b(?:DRAM|L2)\b(?:\s+[\w'-]+){0,2}?\s+(?P<bytes>" + _N + _BYTES + ")",       # bytes DRAM or L2 moved
)))
# a header cell of a table whose numbers are measurements though its cells carry no unit
UNIT_HEADER = re.compile(r"µs|\bms\b|TFLOP|GB/s|TB/s|% of")

CARD = re.compile(r"\bH[128]00\b")
READING = re.compile(r"\bone (?:run|process|session|launch)\b|\bruns? each\b|\bscratch runs?\b|\breadings?\b|"
                     r"\bnot (?:a |the )?(?:results/ )?records?\b|Nsight Compute|\bncu\b|\bnot rerun\b|"
                     r"\bwhile (?:this|the) (?:stage|rung) was (?:built|tuned|written)\b")
COMMIT = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
CITES_A_RECORD = re.compile(r"\b(?:the|this|its|H[12]00) (?:\w+ )?(?:record|sweep)s?\b(?! (?:of|but) )|"
                            r"\bsweeps? (?:below|above|at the end)\b|\bresults/sweeps\b")

WATCHDOG_NS = int(re.search(r"#define WATCHDOG_NS (\d+)ull",
                            (ROOT / "cudabook/kit/include/tma.cuh").read_text()).group(1))

# (the typed text, what the sentence must also say, why it is not a measurement from a record)
ALLOWED = [
    ("989 TFLOP/s", r"spec|arXiv|lesson 05 used", "the H100 SXM's dense bf16 tensor-core peak (spec sheet; the "
                                                   "FlashAttention-3 paper uses it too)"),
    ("67 TFLOP/s", r"spec|peak", "the H100 SXM's fp32 CUDA-core peak (spec sheet)"),
    ("8.4 TFLOP/s", r"67 / 8", "arithmetic on the spec sheet: the fp32 peak over 8"),
    ("3.35 TB/s", r"spec|peak|round figures", "the H100 SXM's HBM3 peak bandwidth (spec sheet)"),
    ("50 MiB", r"L2 holds 50 MiB on the H100", "the H100's L2 size (spec sheet), not bytes moved"),
    ("1.83 GHz", r"989 TFLOP/s", "arithmetic on the spec sheet: 989 TFLOP/s over 132 SMs at 4096 flop a clock"),
    ("1,830 MHz", r"989 TFLOP/s over 132 SMs|the spec\s+implies", "the same arithmetic, in MHz"),
    ("2 GHz", r"up to about 2 GHz", "the H100 SXM's top SM clock, 1,980 MHz, rounded: a property of the card"),
    ("3.9 TFLOP/s", r"arXiv|lesson\s+05's", "the special-function rate the FlashAttention-3 paper gives for the "
                                            "H100 (arXiv:2407.08608)"),
    ("700 ns", r"round figures|at 700 ns", "a round DRAM latency for the Little's-law arithmetic, not a reading"),
    ("512 clocks", r"2\^20 / 2048|8192 / 16", "worked arithmetic: 2^20 multiply-adds at 2048 a clock, 8192 ex2 at 16"),
    ("1024 clocks", r"d = 128", "worked arithmetic: the 512 clocks of d = 64, doubled at d = 128"),
    ("2 MB", r"int64\W+index", "arithmetic: torch.compile's int64 index, 64 x 4096 targets x 8 bytes"),
    (f"{WATCHDOG_NS // 10**9} seconds", r"watchdog", "the kernels' watchdog, WATCHDOG_NS in kit/include/tma.cuh"),
    (f"{WATCHDOG_NS // 10**9} s", r"watchdog", "the kernels' watchdog, WATCHDOG_NS in kit/include/tma.cuh"),
    ("45–47 % of cuBLAS", r"the log's own claim", "GEMM 09: quoted from the optimisation logs this workbook grew "
                                                  "from (fp16 on an H800 PCIe), not a reading of this workbook's"),
    ("5 % less", r"\baim", "resampling 08's aim against torch.compile (AIM in its cell): a target, not a reading"),
    ("10 s", r"CUDABOOK_CELL_SECONDS=10", "GUIDE: the threshold that command sets, not a reading"),
    ("7–9 minutes", r"`make test`.*\.ci/run", "README: the test suite's wall time without a GPU, which `.ci/run` "
                                                "prints after each CI run: a planning figure, not a kernel's time"),
]


def units(markdown):
    """The prose of one markdown cell as (text, table or None) units: a sentence, or a table with the sentence
    before it (its caption). Code blocks are left out: they show code and schematics."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    lines, block, out = text.split("\n"), [], []

    def flush():
        joined = " ".join(block).strip()
        out.extend((s, None) for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(`*\"])", joined) if s)
        block.clear()

    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("|"):
            flush()
            table = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                table.append(lines[i])
                i += 1
            caption = out.pop()[0] if out and out[-1][1] is None else ""
            out.append((caption, table))
            continue
        if re.match(r"\s*(?:[-*] |\d+\. |#)", lines[i]) or not lines[i].strip():   # a list item, a heading or
            flush()                                                                   # a blank line ends a block
        block.append(lines[i])
        i += 1
    flush()
    return out


def allowed(typed, sentence):
    return any(typed == text and re.search(context, sentence) for text, context, _ in ALLOWED)


def a_named_reading(sentence, header=""):
    """A sentence (a table's caption, with its header row) that says where its reading was taken: the card, the
    kind of reading and the commit, and cites no record beside them."""
    return bool(CARD.search(sentence + header) and READING.search(sentence) and COMMIT.search(sentence)
                and not CITES_A_RECORD.search(sentence))


def problems_in(markdown):
    """The typed measurements of one markdown cell that are neither allowed nor a named reading."""
    found = []
    for sentence, table in units(markdown):
        if table is None:
            words = re.sub(r"`[^`\n]*`", "`code`", sentence)     # a name in backticks (`64s`) is code, not a unit
            typed = [(m.group("bytes") or m.group(0)).strip() for m in MEASUREMENT.finditer(words)]
            if any(not allowed(t, sentence) for t in typed) and not a_named_reading(sentence):
                found.append(f"{sentence[:160]!r}: {', '.join(typed)}")
            continue
        body = "\n".join(table)
        numbers = [c for row in table[2:] for c in row.split("|")[1:-1] if re.fullmatch(r"\s*[\d.,]+\s*", c)]
        measured = MEASUREMENT.search(body) or (UNIT_HEADER.search(table[0]) and numbers)
        if measured and not a_named_reading(sentence, table[0]):
            found.append(f"a table of measurements after {sentence[-120:]!r}: {table[0].strip()}")
    return found


def generated(page):
    """(begin, end) patterns of the regions of a page that its generator writes from the records: the README's
    results section, rung tables and lead lines (cudabook.results), the guide's regions (tools/guide.py)."""
    if page == results.README:
        return [(re.escape(results.BEGIN), re.escape(results.END)),
                (results.RUNGS_BEGIN.pattern, re.escape(results.RUNGS_END)),
                (results.LEAD_BEGIN.pattern, re.escape(results.LEAD_END))]
    return [tuple(map(re.escape, guide.markers(name))) for name in guide.regions()]


def handwritten(page, text=None):
    """A page's text with the regions its generator writes left out: what is left was typed by hand."""
    text = page.read_text() if text is None else text
    for begin, end in generated(page):
        text = re.sub(f"(?:{begin}).*?(?:{end})", "\n\n", text, flags=re.S)
    return text


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: str(p.relative_to(ROOT / "lessons")))
def test_lesson_prose_types_no_recorded_measurement(path):
    found = []
    for n, cell in enumerate(notebooks.parse_percent(path.read_text())):
        if cell["cell_type"] == "markdown":
            found += [f"cell {n}: {p}" for p in problems_in(cell["source"])]
    assert not found, ("typed measurements: print them from results/ in a code cell, or (a reading in no record) "
                       "name the card, the kind of reading and the commit in the sentence:\n" + "\n".join(found))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_readme_and_guide_type_no_recorded_measurement(page):
    found = problems_in(handwritten(page))
    assert not found, (f"typed measurements in {page.name}'s hand-written prose: have its generator write them "
                       f"from results/, or (a reading in no record) name the card, the kind of reading and the "
                       f"commit in the sentence:\n" + "\n".join(found))


def test_only_the_generated_regions_are_left_out():
    readme = handwritten(results.README)
    assert "How hard is the ceiling?" in readme and "% of SDPA" not in readme and "| 01_naive |" not in readme
    guide_text = handwritten(guide.GUIDE)
    assert "## Where learners stall" in guide_text and "Measured on:" not in guide_text
    assert "| 01_naive |" not in guide_text and "Resampling lab 01_naive" not in guide_text
    # a region is exempt only where its generator writes it: a comment of another name leaves the text in
    fake = "<!-- lead resample:begin -->\nIt takes 5.0 µs.\n<!-- lead:end -->\n"
    assert problems_in(handwritten(results.README, fake))
    real = "<!-- lead resample:begin (generated by python -m cudabook.results readme) -->\n5.0 µs\n<!-- lead:end -->"
    assert not problems_in(handwritten(results.README, real))


def test_a_claim_of_a_lead_is_read_from_the_records():
    def row(us, ok=True):
        return {"median_us": us, "correct": ok}
    record = {"gpu": "NVIDIA Testcard", "commit": "abc1234", "workloads": {"resample B=1 S=8 T=8 D=8 sorted": {
        "track": "resample", "stages": {"07_tma": row(110.0), "08_fused_gather": row(90.0), "05_double_buffered":
                                        row(80.0, ok=False)},                   # wrong answers lead nothing
        "peers": {"torch_eager": row(1000.0), "torch_compile": row(100.0), "torch_compile_max_autotune": row(95.0)}}}}
    assert results.lead_lines("resample", [record]) == (
        "- NVIDIA Testcard · resample B=1 S=8 T=8 D=8 sorted · commit abc1234: the fastest peer, "
        "torch_compile_max_autotune, 95.0 µs; 08_fused_gather takes 5.3 % less time (90.0 µs).")
    record["workloads"]["resample B=1 S=8 T=8 D=8 sorted"]["peers"]["torch_compile"] = row(80.0)
    assert results.lead_lines("resample", [record]).endswith(
        "the fastest peer, torch_compile, 80.0 µs; no rung is ahead: the fastest, 08_fused_gather, takes 12.5 % "
        "more time (90.0 µs).")
    assert results.lead_lines("gemm", [record]) == "No record of this track has both rungs and peers yet."



def test_a_lead_in_gemm_compares_each_rung_with_the_peers_of_its_arithmetic():
    """bf16 07 against cuBLAS, FP8 08 against cuBLASLt's FP8: never 07 against the (faster) FP8 library."""
    def row(us):
        return {"median_us": us, "correct": True}
    record = {"gpu": "NVIDIA Testcard", "commit": "abc1234", "workloads": {"gemm M=8 N=8 K=8": {
        "track": "gemm", "stages": {"07_clusters": row(100.0), "08_fp8": row(50.0)},
        "peers": {"cublas": row(105.0), "cublaslt_fp8": row(60.0), "cublaslt_fp8_fast": row(48.0)},
        "head_to_head": [{"stage": "07_clusters", "peer": "cublas", "rounds": 6, "ratio": 1.05}]}}}
    assert results.lead_lines("gemm", [record]) == (
        "- NVIDIA Testcard · gemm M=8 N=8 K=8 · commit abc1234: 07_clusters 100.0 µs, 4.8 % less time than cublas "
        "(105.0 µs); 08_fp8 50.0 µs, 4.2 % more time than cublaslt_fp8_fast (48.0 µs, the fastest of cublaslt_fp8, "
        "cublaslt_fp8_fast).\n"
        "  - timed again against cublas in 6 interleaved rounds, which share the card's clock (the comparison to "
        "quote): 07_clusters takes 4.8 % less time (median of the rounds' ratios, 1.050x)")


def test_the_check_catches_a_typed_timing():
    assert problems_in("Rung 05 takes 256.2 µs, 67 % of cuBLAS.")
    assert problems_in("On the H100 it runs 1.84 x rung 07.")                        # a card, but no reading
    assert problems_in("In the H100 record, two vectors a lane take 1 % less time than one.")
    assert problems_in("One run on an H100 (not a record): 5.0 µs; the sweep below gives 4.1 µs.")  # a record too
    assert problems_in("A reading:\n\n| | TFLOP/s |\n|---|---:|\n| rung 08 | 1461 |\n")      # bare numbers
    assert problems_in("The 989 TFLOP/s that rung 07 reached.")                      # an allowed figure out of place
    assert not problems_in("An H100 SXM's spec sheet gives 3.35 TB/s and 989 TFLOP/s.")
    assert not problems_in("Measured on an H200 while this stage was built (commit 2a2d922, one run, not a "
                           "record): 7 µs.")
    assert not problems_in("Readings on one H100, one process at commit 2a2d922 (not records):\n\n| | H100 |\n"
                           "|---|---:|\n| the main kernel | 94.6 µs |\n")
    assert problems_in("Readings on one H100, one process (not records):\n\n| | H100 |\n|---|---:|\n"
                       "| the main kernel | 94.6 µs |\n")                              # a table's reading: the commit
    assert not problems_in("Rung 08 runs about twice rung 07 (the cell above prints it from results/).")
    assert problems_in("It takes 10–11 minutes.")
    assert problems_in("One run on an H200 (not a record): 7 µs.")                  # the card, but no commit
    assert not problems_in("The probe's `64s` setting reads 64-byte pieces.")        # a setting's name is code
    assert problems_in("The `64s` setting took 7 µs.")                               # its time is not
    assert not problems_in("One run on an H200 at 2a2d922 (not a record): 7 µs.")


def test_the_check_catches_a_typed_clock_or_traffic():
    assert problems_in("Under load the SMs ran at 1,530 MHz.")
    assert problems_in("It ran at 1.5 GHz.")
    assert problems_in("The kernel read 11.4 GB from DRAM.")
    assert problems_in("DRAM read 202.2 MB against the 201.3 MB of the inputs.")
    assert problems_in("It moved 3.1 GB of L2 traffic.")
    assert problems_in("About 2 MB written and read back.")
    assert problems_in("The L2 holds 40 MiB here.")                                   # a size after L2: allowed or not
    assert not problems_in("Nsight Compute on an H200 at commit 21368d8, one launch: DRAM read 202.2 MB.")
    assert not problems_in("L2 holds 50 MiB on the H100, 60 MiB on the H200.")      # on the list: the spec sheet
    # plain sizes and register counts are not traffic
    assert not problems_in("A box of B is 8 KiB (64 rows x 128 bytes), and 2 KiB of A.")
    assert not problems_in("The L2 cache (50 MiB on an H100) can serve it. Each thread keeps 56 registers.")
    assert not problems_in("Four stages of 32 KiB leave room for one block an SM.")

def test_every_allowed_figure_is_still_in_the_prose():
    # an entry no lesson, README or guide needs any more is dropped, so that the list stays short
    prose = "\n".join([c["source"] for p in LESSONS for c in notebooks.parse_percent(p.read_text())
                       if c["cell_type"] == "markdown"] + [handwritten(page) for page in PAGES])
    unused = [text for text, _, _ in ALLOWED if not re.search(r"(?<![\w.])" + re.escape(text), prose)]
    assert not unused, f"allowed but in no lesson's, README's or guide's prose: {unused}"


def test_the_lessons_read_a_recorded_sweep_as_the_record_has_it(capsys):
    # lesson.recorded_against prints what the prose used to type: each value's time against one value's
    from cudabook import lesson
    found = lesson.recorded_sweeps("resample", "08_fused_gather", "pdl", {"search": "prepass"})
    assert found, "the recorded pdl sweep with the prepass is gone: pick another sweep for this test"
    us = {r["value"]: r["median_us"] for r in found[0]["rows"]}
    lesson.recorded_against("resample", "08_fused_gather", "pdl", True, fixed={"search": "prepass"})
    out = capsys.readouterr().out
    assert f"{found[0]['gpu']} at {found[0]['commit']}, search='prepass', time against pdl=True:" in out
    assert f"False {us[False] / us[True]:.2f}x ({100 * (us[False] / us[True] - 1):+.1f} %, " in out
    lesson.recorded_against("resample", "08_fused_gather", "pdl", "no such value")
    assert "no time at pdl='no such value'" in capsys.readouterr().out
