#!/usr/bin/env bash
# `make demo`: profiles the bundled example (examples/demo.c) with profctl run
# and tells where the trace is and how to open it.
set -eu
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT="$ROOT/$BUILD/demo.pftrace"
echo "profiling $BUILD/examples/demo: fib* and worker* instrumented, CPU sampled at 999 Hz"
"$ROOT/$BUILD/profctl" run --funcs 'fib*,worker*' -o "$OUT" -- "$ROOT/$BUILD/examples/demo"
echo
"$ROOT/$BUILD/profctl" report "$OUT" | head -n 25
echo
echo "trace written to $OUT"
echo "open it in a browser at https://ui.perfetto.dev (Open trace file), or: profctl report $OUT"
