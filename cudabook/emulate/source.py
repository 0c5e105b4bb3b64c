"""From a kernel's CUDA C++ to a C++ file the host compiler takes (see runtime.h for what the result runs on).

Three rewrites, each keeping the line count so the compiler's messages keep the kernel's own line numbers:
    asm volatile("ptx" : outputs : inputs : clobbers);  ->  ::emu::ptx("ptx", {::emu::out(x), ::emu::in(y)});
    extern __shared__ T name[];                          ->  T* name = (T*)::emu::dynamic_smem();
    quoted #include "file" from the include path         ->  the file's text, between #line markers
and, for each `extern "C" __global__` kernel, an entry point emu_entry_<name>(void** args) that unpacks the
launch's argument pointers (and, for a kernel declared with __cluster_dims__(X, Y, Z), emu_cluster_<name>, which
gives the cluster's shape: the launch runs the blocks of each cluster together).
"""
from __future__ import annotations

import pathlib
import re

HERE = pathlib.Path(__file__).parent


class RewriteError(ValueError):
    """The source has a construct the rewriter cannot take apart (reported with the line)."""


def inline_includes(text: str, name: str, include_path, seen=None) -> str:
    """Put the text of each quoted #include found in include_path in place, with #line markers."""
    seen = set() if seen is None else seen
    out = [f'#line 1 "{name}"']
    for number, line in enumerate(text.split("\n"), 1):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        path = next((pathlib.Path(d) / m.group(1) for d in include_path
                     if m and (pathlib.Path(d) / m.group(1)).is_file()), None)
        if path is None:
            out.append("" if re.match(r"\s*#\s*pragma\s+once", line) else line)
            continue
        if str(path) not in seen:
            seen.add(str(path))
            out.append(inline_includes(path.read_text(), path.name, include_path, seen))
        out.append(f'#line {number + 1} "{name}"')
    return "\n".join(out)


def _skip_string(text: str, i: int) -> int:
    """Index just past the string or character literal that starts at text[i]."""
    quote = text[i]
    i += 1
    while i < len(text) and text[i] != quote:
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _matching_paren(text: str, i: int) -> int:
    """Index of the ')' that closes the '(' at text[i]."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c in "\"'":
            i = _skip_string(text, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise RewriteError("an unbalanced parenthesis")


def _split_top(text: str, sep: str) -> list[str]:
    """Split at `sep` outside strings, parentheses, brackets and braces."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c in "\"'":
            i = _skip_string(text, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            if sep == ":" and text[i + 1:i + 2] == ":" and not text[start:i].strip() == "" and False:
                pass
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return parts


_CAST = {"r": "(unsigned long long)(unsigned)", "l": "(unsigned long long)", "n": "(long long)",
         "h": "(unsigned long long)(unsigned short)", "f": "(float)", "d": "(double)", "c": "(unsigned long long)"}


def _operand(spec: str, line: int, output: bool) -> str:
    m = re.fullmatch(r'\s*"([=+&]*)(\w)"\s*\((.*)\)\s*', spec, re.S)
    if not m:
        raise RewriteError(f"line {line}: an asm operand the emulator cannot read: {spec.strip()!r}")
    _, kind, expr = m.groups()
    if output:
        return f"::emu::out({expr})"
    return f"::emu::in({_CAST.get(kind, '')}({expr}))"


def _asm_call(inside: str, line: int) -> str:
    parts = _split_top(inside, ":")
    template = parts[0].strip()
    if not template.startswith('"'):
        raise RewriteError(f"line {line}: an asm statement without a string template")
    outputs = [p for p in _split_top(parts[1], ",") if p.strip()] if len(parts) > 1 else []
    inputs = [p for p in _split_top(parts[2], ",") if p.strip()] if len(parts) > 2 else []
    ops = [_operand(p, line, True) for p in outputs] + [_operand(p, line, False) for p in inputs]
    return f"::emu::ptx({template}, {{{', '.join(ops)}}})"


_ASM = re.compile(r"\b(?:asm|__asm__)\b(\s*(?:volatile|__volatile__)\s*)?\s*\(")


def rewrite_asm(text: str) -> str:
    out, i = [], 0
    while True:
        m = _ASM.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        # skip matches inside comments or strings: only a statement start counts
        line_start = text.rfind("\n", 0, m.start()) + 1
        if "//" in text[line_start:m.start()]:
            out.append(text[i:m.end()])
            i = m.end()
            continue
        open_at = m.end() - 1
        close = _matching_paren(text, open_at)
        inside = text[open_at + 1:close]
        line = text.count("\n", 0, m.start()) + 1
        call = _asm_call(inside, line)
        out.append(text[i:m.start()])
        out.append(call + "\n" * text.count("\n", m.start(), close + 1))
        i = close + 1


_DYNAMIC = re.compile(r"extern\s+__shared__\s+(?:(?:__align__|alignas)\s*\(\s*\d+\s*\)\s+)?([\w\s]+?)\s+(\w+)\s*\[\s*\]\s*;")


def rewrite_shared(text: str) -> str:
    return _DYNAMIC.sub(lambda m: f"{m.group(1)}* {m.group(2)} = ({m.group(1)}*)::emu::dynamic_smem();", text)


_ATTRIBUTES = ("__launch_bounds__", "__cluster_dims__", "__maxnreg__")


def kernels(text: str) -> list[tuple[str, list[str]]]:
    """[(name, [parameter type, ...])] of the extern "C" __global__ kernels."""
    return [(name, types) for name, types, _ in kernel_declarations(text)]


def kernel_declarations(text: str) -> list[tuple[str, list[str], tuple | None]]:
    """[(name, [parameter type, ...], cluster dims)] of the extern "C" __global__ kernels; the cluster dims are
    the three expressions of a __cluster_dims__(X, Y, Z) attribute (missing ones "1"), or None."""
    found = []
    for m in re.finditer(r'extern\s+"C"\s+__global__\s+void\s+', text):
        i = m.end()
        cluster = None
        while True:                                   # attributes between `void` and the name, in any order
            at = re.compile(r"\s*(\w+)\s*\(").match(text, i)
            if not at or at.group(1) not in _ATTRIBUTES:
                break
            close = _matching_paren(text, at.end() - 1)
            if at.group(1) == "__cluster_dims__":
                dims = [d.strip() for d in _split_top(text[at.end():close], ",") if d.strip()]
                cluster = tuple((dims + ["1", "1", "1"])[:3])
            i = close + 1
        name_m = re.compile(r"\s*(\w+)\s*\(").match(text, i)
        if not name_m:
            continue
        open_at = name_m.end() - 1
        params = text[open_at + 1:_matching_paren(text, open_at)]
        types = []
        for p in _split_top(params, ","):
            p = " ".join(p.split())
            if not p or p == "void":
                continue
            pm = re.fullmatch(r"(.*?)(\w+)\s*", p)
            types.append(pm.group(1).strip() if pm else p)
        found.append((name_m.group(1), types, cluster))
    return found


_FIXED_WIDTH = re.compile(r"^[ \t]*typedef[ \t]+[\w \t]+[ \t]u?int(8|16|32|64)_t[ \t]*;", re.M)


def host_source(text: str, name: str, include_path) -> str:
    """The whole file the host compiler gets: runtime, the rewritten kernel, its entry points. A kernel's own
    typedefs of uint32_t and friends (NVRTC has no <cstdint>) are dropped: the host's are the same types."""
    body = _FIXED_WIDTH.sub("", inline_includes(text, name, include_path))
    body = rewrite_shared(rewrite_asm(body))
    entries = []
    for kname, types, cluster in kernel_declarations(body):
        unpack = ", ".join(f"*(emu_t{i}*)args[{i}]" for i in range(len(types)))
        aliases = "".join(f"    typedef {t} emu_t{i};\n" for i, t in enumerate(types))
        entries.append(f'extern "C" void* emu_entry_{kname}(void** args) {{\n{aliases}    {kname}({unpack});\n'
                       f"    return nullptr;\n}}\n")
        if cluster is not None:                       # __cluster_dims__: its expressions, evaluated by the compiler
            entries.append(f'extern "C" void emu_cluster_{kname}(unsigned* d) {{\n'
                           + "".join(f"    d[{i}] = (unsigned)({e});\n" for i, e in enumerate(cluster)) + "}\n")
    code = re.sub(r"//[^\n]*|/\*.*?\*/", "", body, flags=re.S)
    static = int(bool(re.search(r"\b__shared__\b", code)))     # (the extern ones are rewritten by now)
    entries.append(f'extern "C" {{ int emu_static_shared = {static}; }}\n')
    return '#include "runtime.h"\n' + body + "\n" + "\n".join(entries)
