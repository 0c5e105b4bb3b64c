"""Literal expressions in the workbook's source, read as a GPU would run them.

Lessons and stage modules write settings that differ in the simulator as `[1, 2] if SIMULATOR else [1, 2, 4, 8]`
or `{"threads": 64 if SIMULATOR else 256}`. `evaluate` gives such an expression's value for either machine
without running anything else: only literals, containers, arithmetic, comparisons and the name SIMULATOR are
read; anything else (another name, a call) is Unreadable. tools/record_sweeps.py reads lesson.sweep calls with
it; cudabook.results reads a stage's PARAMS with it, to tell a record made with other settings.
"""
from __future__ import annotations

import ast

SAFE = (ast.Expression, ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.IfExp, ast.Name, ast.Load,
        ast.UnaryOp, ast.BinOp, ast.BoolOp, ast.Compare, ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or, ast.Add,
        ast.Sub, ast.Mult, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot)
NAMES = {"SIMULATOR", "True", "False", "None"}


class Unreadable(ValueError):
    pass


def evaluate(node, simulator: bool, known=None):
    """The value of a literal or simple expression of SIMULATOR (and of the names in `known`, a dict of values);
    Unreadable for anything else (other names, calls)."""
    known = known or {}
    for sub in ast.walk(node):
        if not isinstance(sub, SAFE):
            raise Unreadable(f"{type(sub).__name__} in `{ast.unparse(node)}`")
        if isinstance(sub, ast.Name) and sub.id not in NAMES and sub.id not in known:
            raise Unreadable(f"the name {sub.id} in `{ast.unparse(node)}`")
    code = compile(ast.Expression(body=node), "<literal expression>", "eval")
    return eval(code, {"__builtins__": {}}, {**known, "SIMULATOR": simulator})


def assigned(source: str, name: str, simulator: bool = False):
    """The value of the module-level `name = <expression>` (or `name: T = ...`) in `source`, read with SIMULATOR =
    `simulator`. The expression may use names assigned readable values above it (`TILE = 16 if SIMULATOR else
    32`, `BM, BN = ...`). Unreadable when there is no such assignment at module level (one inside an `if` is not
    seen), when its expression is not one `evaluate` reads, or when the module changes `name` afterwards
    (`name[k] = ...`, `name.update(...)`, a second assignment): then the source alone does not give the value."""
    known, body = {}, ast.parse(source).body
    for at, node in enumerate(body):
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) and node.value is not None else None
        if target is None:
            continue
        if isinstance(target, ast.Name) and target.id == name:
            value = evaluate(node.value, simulator, known)
            _unchanged(body[at + 1:], name)
            return value
        try:
            value = evaluate(node.value, simulator, known)
        except Unreadable:
            continue
        if isinstance(target, ast.Name):
            known[target.id] = value
        elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts) \
                and isinstance(value, tuple) and len(value) == len(target.elts):
            known.update((e.id, v) for e, v in zip(target.elts, value))
    raise Unreadable(f"no module-level `{name} = ...`")


MUTATORS = {"update", "setdefault", "pop", "popitem", "clear", "append", "extend", "insert", "remove"}


def _unchanged(rest, name):
    """Unreadable if any statement in `rest` assigns to `name`, to an item of it, or calls a mutating method."""
    def named(node):
        return isinstance(node, ast.Name) and node.id == name
    for stmt in rest:
        for node in ast.walk(stmt):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if named(t) or (isinstance(t, (ast.Subscript, ast.Attribute)) and named(t.value)):
                    raise Unreadable(f"`{name}` is changed after its assignment (line {node.lineno})")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and named(node.func.value) \
                    and node.func.attr in MUTATORS:
                raise Unreadable(f"`{name}` is changed after its assignment (line {node.lineno})")
