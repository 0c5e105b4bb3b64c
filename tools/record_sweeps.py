"""Record every lesson's sweep (`gemm.sweep(...)`, a track's own) on this GPU, for learners without one to see.

Finds the calls in lessons/*.py and lessons/<track>/*.py with `ast` (their arguments must be literals or simple
expressions of SIMULATOR, such as `[1, 2, 4] if SIMULATOR else [1, 2, 4, 8, 16]`, read with SIMULATOR=False:
the values a GPU sweeps), runs each through cudabook.lesson.sweep with CUDABOOK_RECORD_SWEEPS set, and so merges
each into results/sweeps/<gpu>_lessons.json (see cudabook.lesson.save_sweep). A call it cannot read is listed
and skipped; a sweep that fails is reported and the next one runs. Without a GPU, lesson.sweep draws these
records.

    python tools/record_sweeps.py                      # every sweep of every lesson (a GPU)
    python tools/record_sweeps.py --track attention --only 05_wgmma_tma
    python tools/record_sweeps.py --list               # the calls found (any machine)
"""
from __future__ import annotations

import argparse
import ast
import os
import pathlib
import sys
import time

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _literal():
    """cudabook/literal.py alone (it needs only `ast`): reading the lessons, --list among them, imports no
    cudabook, so no Numba and no GPU probe."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("cudabook_literal", ROOT / "cudabook" / "literal.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_LITERAL = _literal()
Unreadable, evaluate = _LITERAL.Unreadable, _LITERAL.evaluate   # lesson.sweep arguments, read as a GPU would

LESSONS = ROOT / "lessons"
TRACKS = ("resample", "gemm", "msda", "attention")


def _is_sweep(node) -> bool:
    """A call `gemm.sweep(...)` (a track's own, bound to it), or `lesson.sweep(..., track="gemm")`."""
    f = node.func if isinstance(node, ast.Call) else None
    return isinstance(f, ast.Attribute) and f.attr == "sweep" and isinstance(f.value, ast.Name) \
        and f.value.id in ("lesson",) + TRACKS


def lesson_files():
    return sorted(LESSONS.glob("*.py")) + sorted(p for t in TRACKS for p in (LESSONS / t).glob("*.py"))


def find_calls(files=None):
    """([call], [skipped]) for every lesson.sweep call: a call is a dict {file, line, track, stage, param,
    values (the GPU's), values_simulator, fixed, size, condition (the `if` it sits in, or None)}; a skipped one
    {file, line, why}."""
    calls, skipped = [], []
    for path in files or lesson_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        conditions = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.If):
                for sub in ast.walk(node):
                    if sub is not node and _is_sweep(sub):
                        conditions.setdefault(id(sub), ast.unparse(node.test))
        for node in ast.walk(tree):
            if not _is_sweep(node):
                continue
            where = {"file": str(path.relative_to(ROOT)), "line": node.lineno}
            try:
                pos = [evaluate(a, False) for a in node.args]
                kw = {k.arg: evaluate(k.value, False) for k in node.keywords}
                if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
                    raise Unreadable("*args or **kwargs")
                names = ["stage", "param", "values"]
                if len(pos) > len(names):
                    raise Unreadable(f"{len(pos)} positional arguments")
                kw.update(zip(names, pos))
                missing = [n for n in names if n not in kw]
                if missing:
                    raise Unreadable(f"no {', '.join(missing)}")
                values_node = (node.args[2] if len(node.args) > 2
                               else next(k.value for k in node.keywords if k.arg == "values"))
                sim_values = evaluate(values_node, True)
            except Unreadable as e:
                skipped.append({**where, "why": str(e)})
                continue
            except Exception as e:  # an expression that evaluates to an error
                skipped.append({**where, "why": f"{type(e).__name__}: {e}"})
                continue
            unknown = set(kw) - {"stage", "param", "values", "fixed", "size", "track"}
            if unknown:
                skipped.append({**where, "why": f"unknown arguments {sorted(unknown)}"})
                continue
            if node.func.value.id in TRACKS:
                kw["track"] = node.func.value.id
            if "track" not in kw:
                skipped.append({**where, "why": "no track"})
                continue
            calls.append({**where, "track": kw["track"], "stage": kw["stage"],
                          "param": kw["param"], "values": list(kw["values"]), "values_simulator": list(sim_values),
                          "fixed": kw.get("fixed") or {}, "size": kw.get("size"),
                          "condition": conditions.get(id(node))})
    calls.sort(key=lambda c: (TRACKS.index(c["track"]) if c["track"] in TRACKS else 99, c["file"], c["line"]))
    return calls, skipped


def select(calls, track=None, only=None):
    out = []
    for c in calls:
        if track and c["track"] != track:
            continue
        if only and only not in (c["stage"], c["stage"].split("_")[0]):
            continue
        out.append(c)
    return out


def _describe(c) -> str:
    extra = f" fixed={c['fixed']}" if c["fixed"] else ""
    extra += f" size={c['size']}" if c["size"] else ""
    sim = f" (simulator: {c['values_simulator']})" if c["values_simulator"] != c["values"] else ""
    cond = f"   [only if {c['condition']}]" if c["condition"] else ""
    return f"{c['track']:9s} {c['stage']:22s} {c['param']:18s} {c['values']}{sim}{extra}{cond}"


def list_calls(calls, skipped):
    for c in calls:
        print(f"{_describe(c)}   {c['file']}:{c['line']}")
    for s in skipped:
        print(f"SKIPPED {s['file']}:{s['line']}: cannot read its arguments ({s['why']})")
    print(f"{len(calls)} sweep calls found" + (f", {len(skipped)} skipped" if skipped else ""))


def record(calls, out: pathlib.Path):
    """Run each call through lesson.sweep with recording on; [(call, status, seconds)]."""
    import matplotlib.pyplot as plt

    from cudabook import lesson
    from cudabook import track as tracks
    os.environ[lesson.SWEEP_ENV] = str(out)
    done, seen = [], set()
    for c in calls:
        key = lesson.sweep_key(c)
        if key in seen:
            done.append((c, "duplicate: recorded above", 0.0))
            continue
        seen.add(key)
        print(f"\n== {_describe(c)}   ({c['file']}:{c['line']})", flush=True)
        t = time.time()
        try:
            why = tracks.get(c["track"]).unavailable(c["stage"])
            if why:
                done.append((c, f"not run here: {why.split(';')[0][:80]}", 0.0))
                print(f"not run here: {why}", flush=True)
                continue
            rows = lesson.sweep(c["stage"], c["param"], c["values"], fixed=c["fixed"] or None, size=c["size"],
                                track=c["track"])
            if not rows or isinstance(rows, lesson.RecordedSweeps):
                status = "not run here (see above)"
            else:
                bad = sum(1 for r in rows if r[1] is None)
                wrong = sum(1 for r in rows if r[1] is not None and not r[3])
                status = f"recorded {len(rows) - bad} of {len(rows)}"
                status += f"; {bad} failed" if bad else ""
                status += f"; {wrong} WRONG" if wrong else ""
                if bad == len(rows):
                    status = f"every value failed: not recorded ({len(rows)} errors above)"
        except Exception as e:  # one failing sweep is reported; the next one runs
            status = f"ERROR {type(e).__name__}: {(str(e).splitlines() or [''])[0][:120]}"
            print(status, flush=True)
        finally:
            plt.close("all")
        done.append((c, status, time.time() - t))
    return done


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--track", choices=TRACKS, help="only this track's lessons")
    ap.add_argument("--only", metavar="STAGE", help="only this stage (05_wgmma_tma, or its number 05)")
    ap.add_argument("--out", type=pathlib.Path, help="the JSON file (default results/sweeps/<gpu>_lessons.json)")
    ap.add_argument("--list", action="store_true", help="print the calls found and stop (needs no GPU)")
    a = ap.parse_args(argv)
    calls, skipped = find_calls()
    calls = select(calls, a.track, a.only)
    if a.list:
        list_calls(calls, skipped)
        return 0
    from cudabook import SIMULATOR, device, results
    gpu = device.gpu()
    if gpu is None or SIMULATOR:
        print(f"recording sweeps needs a GPU: {device.why_no_gpu() or 'the simulator is forced'}. "
              f"`--list` shows the calls.")
        return 2
    out = (a.out or results.RESULTS / "sweeps" / f"{results.slug(gpu.name)}_lessons.json").resolve()
    print(f"{gpu.name}: {len(calls)} sweeps into {out}")
    for s in skipped:
        print(f"SKIPPED {s['file']}:{s['line']}: cannot read its arguments ({s['why']})")
    done = record(calls, out)
    print(f"\n{'track':9s} {'stage':22s} {'param':18s} {'s':>5}  status")
    for c, status, seconds in done:
        print(f"{c['track']:9s} {c['stage']:22s} {c['param']:18s} {seconds:5.0f}  {status}")
    failed = [1 for _, status, _ in done if status.startswith(("ERROR", "every"))]
    print(f"\n{len(done) - len(failed)} of {len(done)} sweeps ran ({len(skipped)} calls unreadable); "
          f"records in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
