"""The float64 references, remembered for the inputs they were made from: in this process, and on disk.

A benchmark judges every stage and peer on the same large inputs, and between two of those judgements the
grader's small cases are judged too. Keeping only the last reference would let each small case push the large
one out, and at full size a float64 reference takes seconds to minutes to make again. So one reference is kept
for the last large inputs and one for the last small ones. Inputs are matched by identity (`is`), and the memo
holds them, so their ids stay theirs while it does.

On disk: a lesson draws its full-size inputs from a recorded seed and says so (`drawn(inputs, key)`, the key
naming the track, the workload, its size and the seed). A reference of inputs so drawn is kept in
$CUDABOOK_CACHE/references (~/.cache/cudabook/references by default; CUDABOOK_NO_DISK_CACHE=1: never), one file
per (memo, key), named also by the code that makes the reference and NumPy's version (a file made by older code
is deleted when the new one is written), so the next notebook on this machine reads it back instead of making it
again. At deformable attention's full size a file holds 3 GB (the reference and its bound, float64). The file
also keeps a fingerprint of the inputs (their shapes, dtypes and a strided sample of their bytes): where today's
inputs differ from the ones it was made from (another NumPy drawing other numbers from the same seed), it is made
again. Inputs drawn without a seed (the benchmark's fresh ones, the grader's) never go to disk.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import sys
import time
import weakref

LARGE = 1 << 22        # elements over all inputs from which a reference counts as large
SAMPLE = 1 << 20       # elements of each input read into its fingerprint
SEED_ENV = "CUDABOOK_LESSON_SEED"


def cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("CUDABOOK_CACHE", pathlib.Path.home() / ".cache" / "cudabook")) / "references"


def disk_allowed() -> bool:
    return os.environ.get("CUDABOOK_NO_DISK_CACHE", "") in ("", "0")


# ---------------------------------------------------------------------------------------------- seeds and origins
def machine_seed() -> int:
    """The seed a lesson draws its full-size inputs from: CUDABOOK_LESSON_SEED if set, else one drawn once on this
    machine and kept beside the references (so every notebook here judges the same inputs, and pays for their
    reference once; another machine draws other inputs)."""
    if os.environ.get(SEED_ENV):
        return int(os.environ[SEED_ENV])
    path = cache_dir() / "seed"
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        pass
    import secrets
    seed = secrets.randbits(32)
    if disk_allowed():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{seed}\n")
        except OSError:          # a read-only home: this process keeps its seed, the next draws another
            pass
    return seed


_ORIGINS: list = []     # [(weak references to the inputs' arrays, the other inputs, key)]: the last few drawn


def drawn(inputs, key: dict):
    """Say that `inputs` (the tuple a track's prepare returned) were drawn as `key` says (track, workload, size,
    seed: JSON-able): their references may then be kept on disk under that key."""
    refs, others = [], []
    for x in inputs:
        if hasattr(x, "shape"):
            refs.append(weakref.ref(x))
        else:
            others.append(x)
    _ORIGINS.insert(0, (refs, others, json.loads(json.dumps(key, sort_keys=True, default=str))))
    del _ORIGINS[4:]


def origin(inputs) -> dict | None:
    """The key `inputs` were drawn under (drawn()), or None: the very arrays, in order, and equal other items."""
    arrays = [x for x in inputs if hasattr(x, "shape")]
    others = [x for x in inputs if not hasattr(x, "shape")]
    for refs, their_others, key in _ORIGINS:
        if (len(refs) == len(arrays) and all(r() is a for r, a in zip(refs, arrays))
                and their_others == others):
            return key
    return None


def fingerprint(inputs) -> str:
    """sha256 of the inputs' shapes and dtypes and a strided sample of their values (SAMPLE elements each):
    enough to tell other draws apart, without reading gigabytes."""
    import numpy as np
    h = hashlib.sha256()
    for x in inputs:
        if not hasattr(x, "shape"):
            h.update(repr(x).encode())
            continue
        a = np.asarray(x)
        h.update(f"{a.shape} {a.dtype}".encode())
        flat = a.reshape(-1)
        step = max(1, flat.size // SAMPLE)
        h.update(np.ascontiguousarray(flat[::step]).tobytes())
    return h.hexdigest()[:32]


# ---------------------------------------------------------------------------------------------- progress
_SAY: list = []         # the progress callables of the reporting() blocks now open, innermost last


@contextlib.contextmanager
def reporting(progress):
    """Within the block, making (or reading back) a large reference is said through progress(line)."""
    _SAY.append(progress)
    try:
        yield
    finally:
        _SAY.pop()


def _say(line):
    if _SAY:
        _SAY[-1](line)


# ---------------------------------------------------------------------------------------------- the memo
def code_digest(module_name: str, leave_out: tuple[str, ...] = ()) -> str:
    """sha256 of the code a memo's references come from: the module that made the memo and every module of the
    cudabook package whose functions it imports (a track's checking.py and its inputs.py, say), but for those
    whose last name is in leave_out."""
    module = sys.modules.get(module_name)
    names = {module_name}
    for value in vars(module).values() if module else ():
        owner = getattr(value, "__module__", None)
        if (callable(value) and isinstance(owner, str) and owner.split(".")[0] == "cudabook"
                and owner.rsplit(".", 1)[-1] not in leave_out):
            names.add(owner)
    h = hashlib.sha256()
    for name in sorted(names):
        path = getattr(sys.modules.get(name), "__file__", None)
        h.update(name.encode() + b"\0")
        if path:
            h.update(pathlib.Path(path).read_bytes())
    return h.hexdigest()[:16]


class References:
    """memo.get(inputs, make): make() for these inputs, or what it gave the last time for these very objects,
    or, for inputs drawn from a recorded seed (drawn()), what it gave on this machine before (on disk).

    name: what tells this memo's files from another's (default: the module that made it, and how many memos
    that module made before it: "cudabook.attention.checking#1")."""

    _made: dict = {}

    def __init__(self, large=LARGE, name=None):
        self.large = large
        self._kept: dict[bool, tuple] = {}
        caller = sys._getframe(1).f_globals.get("__name__", "?")
        self.module = caller
        if name is None:
            n = References._made.get(caller, 0)
            References._made[caller] = n + 1
            name = f"{caller}#{n}"
        self.name = name

    def _slot(self, inputs) -> bool:
        import numpy as np
        return sum(int(np.size(x)) for x in inputs if hasattr(x, "shape")) >= self.large

    def kept(self, inputs):
        """What is kept for these very inputs, or None."""
        inputs = tuple(inputs)
        kept = self._kept.get(self._slot(inputs))
        if kept is not None and len(kept[0]) == len(inputs) and all(a is b for a, b in zip(kept[0], inputs)):
            return kept[1]
        return None

    def get(self, inputs, make):
        inputs = tuple(inputs)
        value = self.kept(inputs)
        if value is None:
            large = self._slot(inputs)
            path = self.path(inputs) if disk_allowed() else None
            value = _read(path, inputs) if path else None
            if value is None:
                if large:
                    _say("float64 reference: making it" + (f" (once on this machine: kept in {path.parent})"
                                                           if path else "") + " …")
                t0 = time.perf_counter()
                value = make()
                if large:
                    _say(f"float64 reference: made in {time.perf_counter() - t0:.1f} s")
                if path:
                    _write(path, inputs, value)
            self._kept[large] = (inputs, value)
        return value

    def path(self, inputs) -> pathlib.Path | None:
        """The file this memo keeps the reference of `inputs` in, or None where they were not drawn from a seed."""
        key = origin(inputs)
        if key is None:
            return None
        import numpy as np
        which = json.dumps({"memo": self.name, "key": key}, sort_keys=True)
        how = json.dumps({"code": code_digest(self.module), "numpy": np.__version__}, sort_keys=True)
        return cache_dir() / f"{_digest(which)}-{_digest(how)}.npz"


def _digest(text) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _read(path, inputs):
    """The reference kept in `path`, if there is one and it was made from inputs with today's fingerprint."""
    import numpy as np
    if not path.exists():
        return None
    t0 = time.perf_counter()
    try:
        with np.load(path, allow_pickle=False) as f:
            if str(f["__fingerprint__"]) != fingerprint(inputs):
                _say(f"float64 reference: {path.name} was made from other inputs; making it again")
                return None
            n = int(f["__count__"])
            value = tuple(f[f"v{i}"] for i in range(n)) if n >= 0 else f["v"]
    except Exception as e:  # a damaged or foreign file: made again (and written over)
        _say(f"float64 reference: could not read {path} ({type(e).__name__}); making it again")
        return None
    _say(f"float64 reference: read back from {path} in {time.perf_counter() - t0:.1f} s")
    return value


def _write(path, inputs, value):
    """Keep `value` (an array, or a tuple of arrays) in `path`, through a temporary file renamed over it; other
    values, and a disk that refuses, are said and skipped: the reference is then only kept in memory."""
    import tempfile

    import numpy as np
    if isinstance(value, np.ndarray):
        arrays = {"v": value, "__count__": np.array(-1)}
    elif isinstance(value, tuple) and all(isinstance(v, np.ndarray) for v in value):
        arrays = {**{f"v{i}": v for i, v in enumerate(value)}, "__count__": np.array(len(value))}
    else:
        return
    arrays["__fingerprint__"] = np.array(fingerprint(inputs))
    t0 = time.perf_counter()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".npz", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, path)
            for older in path.parent.glob(f"{path.stem.split('-')[0]}-*.npz"):   # the same inputs' reference made
                if older != path:                                                   # by older code: never read
                    older.unlink(missing_ok=True)                                   # again
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    except OSError as e:
        _say(f"float64 reference: not kept on disk ({type(e).__name__}: {e})")
        return
    _say(f"float64 reference: kept in {path} ({time.perf_counter() - t0:.1f} s to write)")
