"""8- and 16-byte accesses to arrays of uint32 words, for Numba kernels: one access on a GPU
(ld/st .v2/.v4.u32), the same words one by one in the simulator, with the alignment check a GPU makes.

    load4 = loader(4, 3)            load4(a, n, r, i) -> the words a[n, r, i:i+4]   (i a multiple of 4)
    store2 = storer(2, 1)           store2(a, i, w0, w1): a[i:i+2] = w0, w1        (i even)

`indices` is how many indices the array takes (the last one names the first word); `what` names the access in
the simulator's misalignment message ("load", "shared-memory store", ...); `dtype` is the arrays' element,
"uint32" or "float32" (then the words are float32 values: ld/st .v4.f32).
"""
from __future__ import annotations

from . import SIMULATOR

if SIMULATOR:
    from .simalign import check as _aligned

    def loader(words: int, indices: int, what: str = "load", dtype: str = "uint32"):
        def load(a, *index):
            _aligned(a, index, 4 * words, what)
            head, i = index[:-1], index[-1]
            return tuple(a[head + (i + k,)] for k in range(words))
        return load

    def storer(words: int, indices: int, what: str = "store", dtype: str = "uint32"):
        def store(a, *rest):
            index, values = rest[:indices], rest[indices:]
            _aligned(a, index, 4 * words, what)
            head, i = index[:-1], index[-1]
            for k, w in enumerate(values):
                a[head + (i + k,)] = w
        return store
else:  # pragma: no cover - GPU only
    from llvmlite import ir
    from numba.cuda import cgutils, types
    from numba.cuda.extending import intrinsic

    _ELEMENTS = {"uint32": (ir.IntType(32), types.uint32), "float32": (ir.FloatType(), types.float32)}

    def _named(fn, name):
        fn.__name__ = fn.__qualname__ = name
        return fn

    def _pointer(context, builder, array_type, array, index, vector):
        ary = context.make_array(array_type)(context, builder, array)
        ptr = cgutils.get_item_pointer(context, builder, array_type, ary, index, wraparound=False)
        return builder.bitcast(ptr, vector.as_pointer())

    def _load_codegen(words, indices, element):
        vector = ir.VectorType(element, words)

        def codegen(context, builder, signature, args):
            vec = builder.load(_pointer(context, builder, signature.args[0], args[0], args[1:1 + indices], vector),
                               align=4 * words)
            parts = [builder.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(words)]
            return context.make_tuple(builder, signature.return_type, parts)
        return codegen

    def _store_codegen(words, indices, element):
        vector = ir.VectorType(element, words)

        def codegen(context, builder, signature, args):
            vec = ir.Constant(vector, ir.Undefined)
            for k in range(words):
                vec = builder.insert_element(vec, args[1 + indices + k], ir.Constant(ir.IntType(32), k))
            builder.store(vec, _pointer(context, builder, signature.args[0], args[0], args[1:1 + indices], vector),
                          align=4 * words)
            return context.get_dummy_value()
        return codegen

    def loader(words: int, indices: int, what: str = "load", dtype: str = "uint32"):
        element, value = _ELEMENTS[dtype]
        codegen = _load_codegen(words, indices, element)
        suffix = "" if dtype == "uint32" else f"_{dtype}"

        def typing(a, *index):
            return types.UniTuple(value, words)(a, *([types.intp] * indices)), codegen
        if indices == 1:
            return intrinsic(_named(lambda typingctx, a, i: typing(a, i), f"load{words}_1{suffix}"))
        if indices == 3:
            return intrinsic(_named(lambda typingctx, a, n, r, i: typing(a, n, r, i), f"load{words}_3{suffix}"))
        raise ValueError("loader: 1 or 3 indices")

    def storer(words: int, indices: int, what: str = "store", dtype: str = "uint32"):
        element, value = _ELEMENTS[dtype]
        codegen = _store_codegen(words, indices, element)
        suffix = "" if dtype == "uint32" else f"_{dtype}"

        def typing(a):
            return types.void(a, *([types.intp] * indices), *([value] * words)), codegen
        table = {
            (1, 2): lambda typingctx, a, i, w0, w1: typing(a),
            (1, 4): lambda typingctx, a, i, w0, w1, w2, w3: typing(a),
            (3, 2): lambda typingctx, a, n, r, i, w0, w1: typing(a),
            (3, 4): lambda typingctx, a, n, r, i, w0, w1, w2, w3: typing(a),
        }
        return intrinsic(_named(table[(indices, words)], f"store{words}_{indices}{suffix}"))
