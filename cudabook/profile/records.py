"""Profile records, results/profiles/<gpu>_<track>.json: written, checked, merged, read back as a Profile."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from ..nvrtc import INCLUDE, _local_includes
from ..results import RecordError, read_record, require_field
from .ncu import ROOT
from .table import Profile, derive


PROFILES = ROOT / "results" / "profiles"
SCHEMA = 1


def _stage_name(t, stage) -> str:
    module = t.stage(stage)
    return next(s for s in t.STAGES if t.stage(s) is module)


def _gpu_name():
    from .. import device
    g = device.gpu()
    return g.name if g else None


def python_code(text: str) -> str:
    """A Python module's code without its comments, docstrings and layout (its syntax tree, docstrings dropped):
    what a digest of the code should see. A text that does not parse is returned as it is."""
    import ast
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return _tree_text(tree)


def _tree_text(node) -> str:
    """A syntax tree as text that the Python version does not change: each node's fields that hold something
    (ast.dump's own text does change: 3.12 gives every function and class an empty `type_params`, so a record
    made on the GPU machine's Python would never match a learner's; some 3.12 releases put an empty piece at
    the end of an f-string's format spec)."""
    import ast
    if isinstance(node, ast.AST):
        fields = [(name, getattr(node, name, None)) for name in node._fields]
        if isinstance(node, ast.JoinedStr):
            fields = [("values", [v for v in node.values if not (isinstance(v, ast.Constant) and v.value == "")])]
        return f"{type(node).__name__}({', '.join(f'{k}={_tree_text(v)}' for k, v in fields if v not in (None, []))})"
    if isinstance(node, list):
        return f"[{', '.join(_tree_text(v) for v in node)}]"
    return repr(node)


def _owners(namespace: dict, names=None, leave_out=()) -> set[str]:
    """The cudabook modules that define the callables of `namespace` (those in `names` only, if given), but for
    those whose last name is in leave_out."""
    found = set()
    for key, value in namespace.items():
        owner = getattr(value, "__module__", None)
        if ((names is None or key in names) and callable(value) and isinstance(owner, str)
                and owner.split(".")[0] == "cudabook" and owner.rsplit(".", 1)[-1] not in leave_out):
            found.add(owner)
    return found


def _code_names(code) -> set[str]:
    """Every global name a function's code (and the functions and lambdas inside it) refers to."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def _workload_code(bench) -> str:
    """What a profile takes from a track's benchmark: its first workload and the code of `prepare`, which draws
    and uploads it (and the modules of the functions prepare calls), not its peers, columns or sweeps."""
    import inspect
    import json

    from ..results import json_plain
    prepare = bench.prepare
    parts = [json.dumps(json_plain(bench.WORKLOADS[0]), sort_keys=True), python_code(
        inspect.cleandoc("\n" + inspect.getsource(prepare)))]
    for name in sorted(_owners(prepare.__globals__, _code_names(prepare.__code__), ("checking",))):
        parts.append(name + "\0" + python_code(pathlib.Path(sys.modules[name].__file__).read_text()))
    return "\n".join(parts)


def stage_digest(track, stage, code_only: bool = True) -> str | None:
    """sha256 of the code a stage's profile measures. A recorded profile whose stages' digests are today's
    measured today's code. None when the stage cannot be imported.

    code_only (what records keep since 2026-11-28): the stage's module and the cudabook modules whose functions
    it uses, the workload the profile draws (the benchmark's first workload and its `prepare`, with the modules
    of the functions that calls), the CUDA C++ the stage compiles (its SOURCE), every kernel file of its track
    and the headers these include (the kit's among them), each as code alone: without comments, docstrings and
    layout (python_code, nvrtc.cxx_code). A comment fixed in a kernel, a docstring, or a peer added to the
    benchmark leaves the records standing. code_only=False: the digest older records hold: the files' text, the
    whole benchmark module (refmemo.code_digest), not the track's checker. todays_code accepts both."""
    import hashlib

    from .. import track as tracks
    from ..nvrtc import cxx_code
    from ..refmemo import code_digest
    t = tracks.get(track)
    try:
        module = t.stage(stage)
    except Exception:
        return None
    h = hashlib.sha256()
    if code_only:
        for name in sorted({module.__name__} | _owners(vars(module), leave_out=("checking",))):
            h.update(name.encode() + b"\0" + python_code(pathlib.Path(sys.modules[name].__file__).read_text()).encode())
        h.update(_workload_code(t.bench).encode())
    else:
        for name in (module.__name__, t.bench.__name__):
            h.update(code_digest(name, leave_out=("checking",)).encode())
    files = [pathlib.Path(module.SOURCE)] if getattr(module, "SOURCE", None) else []
    kernels = pathlib.Path(module.__file__).parent / "kernels"
    files += sorted(kernels.glob("*.cu*"))
    headers = {}         # the kit's headers these include (not the rest of the kit: the copy ceiling's kernels)
    for f in dict.fromkeys(files):
        if f.is_file():
            text = f.read_bytes()
            h.update(f.name.encode() + b"\0" + (cxx_code(text.decode()).encode() if code_only else text))
            headers.update(_local_includes(text.decode(), [kernels, INCLUDE]))
    for name in sorted(headers):
        h.update(name.encode() + b"\0" + (cxx_code(headers[name]) if code_only else headers[name]).encode())
    return h.hexdigest()[:16]


def todays_code(track, stage, recorded_digest) -> bool:
    """Whether a recorded stage digest is that of the stage's code today: the code-only digest (records made
    since 2026-11-28), or the text digest older records hold."""
    return recorded_digest is not None and recorded_digest in (stage_digest(track, stage),
                                                               stage_digest(track, stage, code_only=False))


def variant_settings(track, stage, params) -> dict:
    """The settings of `params` that differ from the stage's defaults (as a GPU runs it), as plain JSON values:
    what names a variant. {} for the defaults. A value that is not plain data is refused, naming the setting."""
    import json

    from .. import track as tracks
    from ..results import _gpu_defaults, json_plain
    t = tracks.get(track) if isinstance(track, str) else track
    module = t.stage(stage)
    try:
        defaults = _gpu_defaults(module)[0]
    except TypeError:
        defaults = _gpu_defaults.__wrapped__(module)[0]
    out = {}
    for k, v in sorted((params or {}).items()):
        try:
            json.dumps(json_plain(v))
        except TypeError:
            raise ValueError(f"profile variant of {t.NAME} {_stage_name(t, stage)}: setting {k}={v!r} is not "
                             f"plain data (numbers, strings, booleans, lists, dicts)") from None
        if not (isinstance(defaults, dict) and k in defaults and json_plain(defaults[k]) == json_plain(v)):
            out[k] = json_plain(v)
    return out


def variant_folder(track, stage, params) -> pathlib.Path | None:
    """Where the profiles of a stage run with other settings than its defaults are recorded: a folder of their
    own under results/profiles/variants/ (a record holds one profile a stage, so the defaults' record and each
    variant's cannot share a file), named by the stage and the settings that differ from its defaults, readable,
    then a short hash of them (so that settings that read alike, 1 and "1", never share a folder). None for the
    defaults (settings equal to them included): their record is results/profiles/ itself."""
    import hashlib
    import json
    import re

    from .. import track as tracks
    t = tracks.get(track) if isinstance(track, str) else track
    name = _stage_name(t, stage)
    settings = variant_settings(t, name, params)
    if not settings:
        return None
    text = json.dumps(settings, sort_keys=True)
    words = [f"{k}-{json.dumps(v)}" for k, v in settings.items()]
    readable = re.sub(r"[^A-Za-z0-9_.=-]+", "", "_".join([t.NAME, name, *words]))[:120]
    return PROFILES / "variants" / f"{readable}_{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def record_path(gpu: str, track: str, folder=None) -> pathlib.Path:
    from ..results import slug
    return pathlib.Path(folder or PROFILES) / f"{slug(gpu)}_{track}.json"


def _driver_release() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        return out[0].strip() if out else None
    except (OSError, subprocess.SubprocessError):
        return None


def stage_entry(got: dict, params=None) -> dict:
    """What a record keeps of one stage's profile: the workload, every counter read per kernel, and the
    pedigree of the code that ran."""
    from ..results import _pedigree
    info, ped = got["info"], _pedigree()
    return {"workload": info.get("workload"), "size": info.get("size"), "min_bytes": info.get("min_bytes"),
            "params": params or {}, "ncu_args": got.get("ncu_args", []), "missing_metrics": got.get("missing", []),
            "commit": ped["commit"], "dirty": ped["dirty"], "source_digest": ped["source_digest"],
            "date": ped["date"],
            "kernels": [{k: v for k, v in kern.items() if k in ("function", "kernel", "block", "grid", "metrics",
                                                                  "units")} for kern in got["kernels"]]}


def new_record(track: str, *, ncu_version=None, machine=None) -> dict:
    from ..results import _pedigree
    ped = _pedigree()
    machine = machine or ped["machine"]
    return {"schema": SCHEMA, "kind": "ncu profile", "track": track, "gpu": machine["gpu"], "machine": machine,
            "driver": _driver_release(), "cuda_driver": machine.get("driver_version"), "ncu": ncu_version,
            "commit": ped["commit"], "dirty": ped["dirty"], "source_digest": ped["source_digest"],
            "date": ped["date"], "stages": {}}


def validate_record(record, where="record") -> dict:
    """Raise RecordError naming the file and the missing or malformed field."""
    def need(obj, key, kind, at=""):
        return require_field(where, obj, key, kind, at)

    if need(record, "kind", str) != "ncu profile":
        raise RecordError(f"{where}: kind is {record['kind']!r}, not 'ncu profile'")
    need(record, "schema", int)
    need(record, "gpu", str)
    need(record, "track", str)
    need(record, "date", str)
    for sname, s in need(record, "stages", dict).items():
        at = f"stages.{sname}."
        if "skipped" in s or "error" in s:
            continue
        for i, k in enumerate(need(s, "kernels", list, at)):
            need(k, "kernel", str, f"{at}kernels[{i}].")
            for name, value in need(k, "metrics", dict, f"{at}kernels[{i}].").items():
                if value is not None and not isinstance(value, (int, float)):
                    raise RecordError(f"{where}: {at}kernels[{i}].metrics.{name} should be a number, got {value!r}")
    return record


def save_record(record, folder=None) -> pathlib.Path:
    """Write results/profiles/<gpu>_<track>.json. Stages already in that file and not in this record stay,
    each with its own commit and date, and so does a stage's profile where this record has only an error."""
    validate_record(record)
    path = record_path(record["gpu"], record["track"], folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        old, stages = load_record(path)["stages"], dict(record["stages"])
        for k, v in stages.items():      # a failed try does not replace a profile measured before
            if "error" in v and "kernels" in old.get(k, {}):
                stages[k] = old[k]
        record = dict(record, stages={**{k: v for k, v in old.items() if k not in stages}, **stages})
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def load_record(path) -> dict:
    return read_record(path, validate_record)


def load_records(track, folder=None) -> list[dict]:
    folder = pathlib.Path(folder or PROFILES)
    return [r for r in (load_record(p) for p in sorted(folder.glob(f"*_{track}.json"))) if r["track"] == track]


def from_record(record, stages) -> Profile:
    """The profile of `stages` as a record holds it (stages it lacks are left out)."""
    rows, info = [], {}
    for name in stages:
        s = record["stages"].get(name)
        if not s or "kernels" not in s:
            continue
        rows += [derive(k, name) for k in s["kernels"]]
        info[name] = {k: s.get(k) for k in ("workload", "size", "min_bytes", "params", "date", "commit", "code")}
    dates = sorted({(s.get("date") or "")[:10] for s in info.values()} - {""})
    when = ", ".join(dates) or (record.get("date") or "?")[:10]
    settings = "; ".join(f"{n} " + ", ".join(f"{k}={v!r}" for k, v in s["params"].items())
                         for n, s in info.items() if s.get("params"))
    return Profile(rows, track=record["track"], gpu=record["gpu"], ncu=record.get("ncu"), stages=info,
                   label=f"recorded on {record['gpu']}, {when} (ncu {record.get('ncu') or '?'})"
                         + (f", with {settings}" if settings else ""), date=when)


def recorded(track, *stages, folder=None, gpu=None, only_gpu=False) -> Profile | None:
    """The recorded profile of `stages` (all recorded ones if none named): from this GPU's record if there is
    one (or `gpu`'s), else from the most recent record that has them; None if nothing is recorded (only_gpu:
    nothing on `gpu` itself)."""
    from .. import track as tracks
    t = tracks.get(track)
    names = [_stage_name(t, s) for s in stages] or list(t.STAGES)
    records = [r for r in load_records(t.NAME, folder) if any(n in r["stages"] and "kernels" in r["stages"][n]
                                                               for n in names)]
    if only_gpu:
        records = [r for r in records if r["gpu"] == gpu]
    if not records:
        return None
    want = gpu or _gpu_name()
    records.sort(key=lambda r: (r["gpu"] == want, sum(n in r["stages"] for n in names), r.get("date") or ""))
    return from_record(records[-1], names)
