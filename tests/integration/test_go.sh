#!/usr/bin/env bash
# A cgo Go program (tests/targets/go_cgo) under profctl run: goroutines grow
# their stacks (runtime.copystack reads every return address), panic and
# recover, run the GC, call C and are called back from C. Go's code must never
# be return-hijacked: 20 runs under its own glob and 20 under '*' each exit and
# print exactly what the unprofiled run does; the Go functions are listed as
# skipped with their reason, the C ones are timed, every call counted (Go
# exits by a raw exit_group: the agent's hook on runtime.exit sends the
# figures first). Skips when `go` is not installed; builds offline.
set -u
. "$(dirname "$0")/common.bash"
RUNS=${GO_RUNS:-20}

if ! command -v go >/dev/null; then
	skip "go not installed (tools/install-deps.sh installs golang-go): no Go program to profile"
	finish
	exit
fi

# Offline and inside build/: no module download, no toolchain switch, no $HOME cache.
export GOCACHE="$ROOT/$BUILD/go/cache" GOPATH="$ROOT/$BUILD/go/path" GOTOOLCHAIN=local \
	GOPROXY=off GO111MODULE=off GOFLAGS= CGO_ENABLED=1
PROG="$ROOT/$BUILD/tests/targets/go_cgo"
mkdir -p "$GOCACHE" "$GOPATH" "$(dirname "$PROG")"
(cd "$ROOT/tests/targets/go_cgo" && go build -o "$PROG" .) >"$WORK/go-build.log" 2>&1
check "go_cgo builds ($(go version | cut -d' ' -f3))" test -x "$PROG"
[ -x "$PROG" ] || { sed 's/^/  /' "$WORK/go-build.log" | head -n 20; finish; exit; }

(cd "$WORK" && timeout 600 "$PROG" >ref.out 2>ref.err; echo $? >ref.rc)
check_eq "go_cgo unprofiled exits 0" "$(cat "$WORK/ref.rc")" 0

# figure DIR FUNC: the calls of FUNC in a run's exact per-function figures.
figure() {
	timeout 600 "$PROFCTL" report --funcs "$2" "$1/trace.pftrace" 2>/dev/null |
		awk -v f="$2" '$NF == f && $1 ~ /^[0-9]+$/ { print $1; exit }'
}

# runs GLOB: RUNS profiled runs; counts how many differ, crash, or miss a call.
runs() {
	local glob=$1 differ=0 crashed=0 miscounted=0 i d
	for i in $(seq 1 "$RUNS"); do
		d="$WORK/run-$i"
		mkdir -p "$d"
		(cd "$d" && timeout 600 "$PROFCTL" run --funcs "$glob" -o trace.pftrace -- "$PROG" \
			>out 2>err; echo $? >rc)
		grep -vE '^profctl: |^  skipped |^  \.\.\. and [0-9]+ more skipped' "$d/err" >"$d/prog.err"
		if [ "$(cat "$d/rc")" != 0 ] || grep -q 'fatal error' "$d/err"; then
			crashed=$((crashed + 1))
			[ "$crashed" = 1 ] && grep -m3 -E 'fatal|unexpected|runtime:' "$d/err" | sed 's/^/    /'
		fi
		cmp -s "$WORK/ref.out" "$d/out" && cmp -s "$WORK/ref.err" "$d/prog.err" ||
			differ=$((differ + 1))
		# 8 workers x 20 rounds; c_leaf: 50 per c_work and one per c_calls_go
		[ "$(figure "$d" c_work)" = 160 ] && [ "$(figure "$d" c_calls_go)" = 160 ] &&
			[ "$(figure "$d" c_leaf)" = 8160 ] || {
			miscounted=$((miscounted + 1))
			echo "  run $i [$glob]: c_work $(figure "$d" c_work), c_calls_go" \
				"$(figure "$d" c_calls_go), c_leaf $(figure "$d" c_leaf);" \
				"$(sed -n 's/^profctl: calls: //p' "$d/err")"
		}
		[ "$i" = 1 ] && cp "$d/err" "$WORK/first-$glob.err"
		[ "$i" = 1 ] && cp "$d/trace.pftrace" "$WORK/first.pftrace"
		rm -rf "$d"
	done
	check_eq "[$glob] runs that crashed or exited otherwise" "$crashed" 0
	check_eq "[$glob] runs whose output differs from the unprofiled run" "$differ" 0
	check_eq "[$glob] runs whose C calls were not all counted (c_work 160, c_leaf 8160)" \
		"$miscounted" 0
	echo "counts [--funcs '$glob']: $(sed -n 's/^profctl: functions: //p' "$WORK/first-$glob.err");" \
		"$(sed -n 's/^profctl: calls: //p' "$WORK/first-$glob.err")"
}

runs 'main.*,c_*'
timeout 600 "$PROFCTL" report --dump "$WORK/first.pftrace" >"$WORK/dump" 2>&1
check "[main.*,c_*] the trace has c_work slices" grep -qE '^slice .*c_work' "$WORK/dump"
check_eq "[main.*,c_*] no Go function has a slice" \
	"$(grep -cE '^slice .*(main\.|runtime\.)' "$WORK/dump")" 0
runs '*'

# What profctl funcs says: Go's functions skipped with the reason, the C ones instrumented.
timeout 600 "$PROFCTL" funcs 'main.*,c_*,runtime.mallocgc' -- "$PROG" >"$WORK/funcs" 2>&1
check "funcs: main.grow skipped as Go code" \
	grep -qE "skipped main\.grow \(.*Go code: Go's runtime reads its return addresses" "$WORK/funcs"
check "funcs: runtime.mallocgc skipped as Go code" \
	grep -qE "skipped runtime\.mallocgc \(.*Go code" "$WORK/funcs"
check "funcs: c_work instrumented" grep -qE "^  instrumented c_work$" "$WORK/funcs"
check_eq "funcs: no Go function instrumented" \
	"$(grep -cE '^  instrumented (main|runtime)\.' "$WORK/funcs")" 0
finish
