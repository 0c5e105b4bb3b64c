"""A track's ladder of stages, and the face every track package shows (see cudabook/track.py for the face).

    ladder = face(globals(), ("01_naive", "02_smem_tiles", ...), "GEMM stage")   in a track's __init__
"""
from __future__ import annotations

import importlib

from ..errors import StageUnavailable


class Ladder:
    """A track's stages: names in ladder order ("01_naive", ...), each a module of the track's package.

        ladder = Ladder(__name__, {"01_naive": "s01_naive", ...}, "GEMM stage")
        ladder.stages            the names whose modules exist, in order
        ladder.stage(name)       the module, by name ("02_smem_tiles") or number ("02" or 2)
        ladder.unavailable(name) None, or why this machine cannot run it
        ladder.run(name, upload, *inputs, **params)   upload, poison, launch, the result as NumPy
    """

    def __init__(self, package: str, modules: dict, label: str = "stage"):
        import importlib.util
        self.package, self.modules, self.label = package, dict(modules), label
        self.stages = tuple(name for name, module in modules.items()
                            if importlib.util.find_spec(f"{package}.{module}") is not None)

    def stage(self, name):
        """The module of a stage, by its name or its number ("02" or 2)."""
        if isinstance(name, bool) or not isinstance(name, (str, int)):
            raise ValueError(f"a {self.label} is named by a string such as {self.stages[0]!r} or a number, "
                             f"got {name!r}; the stages are: {', '.join(self.stages)}")
        if isinstance(name, int) or (name.isascii() and name.isdigit()):
            matches = [s for s in self.stages if int(s[:2]) == int(name)]
            name = matches[0] if matches else str(name)
        if name not in self.stages:
            raise ValueError(f"unknown {self.label} {name!r}; the stages are: {', '.join(self.stages)}")
        return importlib.import_module(f"{self.package}.{self.modules[name]}")

    def unavailable(self, name) -> str | None:
        """None if this machine can run the stage, else why not."""
        check = getattr(self.stage(name), "unavailable", None)
        return check() if check else None

    def run(self, name, upload, *inputs, **params):
        module = self.stage(name)
        problem = upload(*inputs)               # bad input is named first, even where the stage cannot run
        why = self.unavailable(name)
        if why:
            raise StageUnavailable(why)
        problem.poison()
        module.launch(problem, **params)
        return problem.result()


def face(namespace: dict, stages, label: str = "stage") -> Ladder:
    """Fill a track package's namespace (its `globals()`) with the face every track shares, and return its Ladder
    (for the track's own `run`):

        STAGES, stage(name), unavailable(name)    the ladder: stage "02_smem_tiles" is the module s02_smem_tiles
        grade, hint, splice                       cudabook.labs with track= this track
        ladder_so_far, sweep                      cudabook.lesson with track= this track

    The bound helpers reach the machinery by name when they are called (as get() reaches a track): a track
    imports nothing above it."""
    package = namespace["__name__"]
    ladder = Ladder(package, {name: f"s{name}" for name in stages}, label)
    track = package.rsplit(".", 1)[-1]

    def bound(module, helper):
        def call(*args, **kwargs):
            return getattr(importlib.import_module(f"cudabook.{module}"), helper)(*args, track=track, **kwargs)
        call.__name__ = call.__qualname__ = helper
        call.__doc__ = f"cudabook.{module}.{helper}(..., track={track!r}): see there."
        return call
    namespace.update(STAGES=ladder.stages, stage=ladder.stage, unavailable=ladder.unavailable,
                     **{helper: bound(module, helper) for module, helpers in
                        (("labs", ("grade", "hint", "splice")), ("lesson", ("ladder_so_far", "sweep")))
                        for helper in helpers})
    return ladder
