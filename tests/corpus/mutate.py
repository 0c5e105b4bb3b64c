"""Planted bugs as small edits of a stage's own kernel source.

A mutant is the stage's function, read from its module, with one or more exact text replacements, compiled in
the module's namespace (plus any names you override, such as a mutated device function). When the stage
changes, its planted bugs follow; an edit that no longer applies fails loudly instead of testing nothing.
"""
import importlib
import linecache

from cudabook import notebooks


def mutant(module_name, function, edits=(), **names):
    module = importlib.import_module(module_name)
    path = module_name.split("cudabook.", 1)[1].replace(".", "/")
    src = notebooks.strip_markers(notebooks.function_source(path, function))
    for old, new in edits:
        if src.count(old) != 1:
            raise AssertionError(f"mutant of {function}: {old!r} occurs {src.count(old)} times in the stage's "
                                 f"source, not once: the stage changed, update this planted bug")
        src = src.replace(old, new)
    namespace = dict(vars(module), **names)
    filename = f"<mutant of {module_name}.{function}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)   # its lines, as a cell's are
    exec(compile(src, filename, "exec"), namespace)
    return namespace[function]
