#!/usr/bin/env bash
# make bench: runs the benchmarks under bench/ and prints their figures.
set -eu
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== overhead: empty function, plain vs instrumented (same process) =="
"$ROOT/$BUILD/profctl" run --freq 0 --funcs 'bench_instrumented' -o "$tmp/overhead.pftrace" -- \
	"$ROOT/$BUILD/bench/overhead" 2>"$tmp/overhead.err"
grep -E "events:" "$tmp/overhead.err" || true
