#!/usr/bin/env python
"""Where a serving call's time goes, read from a TensorFlow profiler trace.

    python bench/trace_summary.py TRACE_DIR [--calls N]

TRACE_DIR is what `tf.profiler.experimental.start(TRACE_DIR)` wrote (the
`plugins/profile/<run>/*.xplane.pb` files under it; serving_bench.py
--profile writes one per path). The host plane's op events (TensorFlow
kernels on the executor threads, XLA thunks inside a compiled cluster) are
summed by kind:

    tokenize+pack   tensorflow-text and string/ragged ops (normalize,
                    WordPiece, packing)
    matmul          MatMul / BatchMatMul / Einsum kernels and XLA `dot`s
    other model     every other op: softmax, layer norm, GELU, adds, gathers

plus the wall time of the traced calls. Op times are summed over threads,
so on 2 cores they can exceed the wall time; shares are of the summed op
time. Executor bookkeeping events (ExecutorState::..., ThunkExecutor) wrap
ops and are not counted.
"""

import argparse
import collections
import glob
import json
import os
import re

# tensorflow-text's kernels and the string/ragged ops of packing (not the
# model's own `Split` of its fused projection).
TOKENIZE = re.compile(r"Wordpiece|WordPiece|Normalize|Unicode|String|Regex|Ragged|"
                      r"Sentencepiece|SentencePiece|UTF8|Tokenize", re.I)
MATMUL = re.compile(r"MatMul|Einsum", re.I)
WRAPPERS = ("ExecutorState::", "ExecutorDoneCallback", "ThunkExecutor::", "KernelAndDeviceFunc",
            "EagerKernelExecute", "EagerExecute", "EagerLocalExecute", "FunctionRun",
            "TFE_Py_", "signature_wrapper")


def kind_of(name):
    """'tokenize+pack', 'matmul', 'other model', or None for bookkeeping."""
    if name.startswith(WRAPPERS):
        return None
    if ":" in name:  # a TensorFlow kernel: "scope/op_name:OpType"
        scope, op_type = name.rsplit(":", 1)
        if TOKENIZE.search(op_type) or "Ragged" in scope or "tokenize" in scope.lower():
            return "tokenize+pack"
        if MATMUL.search(op_type):
            return "matmul"
        return "other model"
    # An XLA thunk of a compiled cluster: "dot.531", "bitcast_add_fusion.clone";
    # a "call" thunk runs nested thunks (counted themselves).
    if re.match(r"call\b", name):
        return None
    return "matmul" if re.match(r"dot\b", name) else "other model"


def summarize(trace_dir, top=8):
    """{"op_ms": {kind: ms}, "shares": {kind: share}, "top": [(op, ms)]}
    summed over every xplane file under trace_dir."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
    if not files:
        raise FileNotFoundError(f"no *.xplane.pb under {trace_dir}")
    by_kind = collections.Counter()
    by_op = collections.Counter()
    for path in files:
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        for plane in space.planes:
            if not plane.name.startswith("/host:CPU"):
                continue
            names = plane.event_metadata
            for line in plane.lines:
                if line.name == "python":
                    continue
                for event in line.events:
                    name = names[event.metadata_id].name
                    kind = kind_of(name)
                    if kind is None:
                        continue
                    ms = event.duration_ps / 1e9
                    by_kind[kind] += ms
                    op = name.rsplit(":", 1)[-1] if ":" in name else re.sub(
                        r"\.(\d+|clone)", "", name)
                    by_op[op] += ms
    total = sum(by_kind.values()) or 1.0
    return {"op_ms": {k: round(v, 1) for k, v in by_kind.items()},
            "shares": {k: round(v / total, 4) for k, v in by_kind.items()},
            "top": {op: round(ms, 1) for op, ms in by_op.most_common(top)}}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace_dir")
    args = p.parse_args(argv)
    print(json.dumps(summarize(args.trace_dir), indent=1))


if __name__ == "__main__":
    main()
