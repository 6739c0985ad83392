# Shared helpers for integration tests (sourced). Each test file counts its
# checks and ends with "N passed, N failed" through finish.
BUILD=${BUILD:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROFCTL="$ROOT/$BUILD/profctl"
passed=0
failed=0
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# TARGET_ARCH=aarch64: the tests that support it (test_abi, test_shadow_stack)
# run that architecture's targets (build/aarch64/, `make ARCH=aarch64`) under
# qemu-user with its agent, against this host's profd and profctl, without
# sampling (perf cannot sample an emulated process). TARGET_VARIANT=pac: its
# builds with pointer authentication and BTI pads (build/aarch64/tests/targets/pac/).
TARGET_ARCH=${TARGET_ARCH:-}
if [ -n "$TARGET_ARCH" ]; then
	TARGETS="$ROOT/$BUILD/$TARGET_ARCH/tests/targets${TARGET_VARIANT:+/$TARGET_VARIANT}"
	RUNNER=("qemu-$TARGET_ARCH")
	PROFILE_OPTS=(--freq 0)
else
	TARGETS="$ROOT/$BUILD/tests/targets"
	RUNNER=()
	PROFILE_OPTS=()
fi

check() { # description, then a command that must succeed
	local what=$1
	shift
	if "$@"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL: $what"
	fi
}

check_eq() { # description, actual, expected
	if [ "$2" = "$3" ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL: $1: got '$2', expected '$3'"
	fi
}

wait_for() { # file, extended regex: until a line matches, up to 10 s
	for _ in $(seq 200); do
		grep -qE "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

skip() {
	echo "skip: $*"
}

# Perfetto's importer as the judge: with trace_processor_shell on PATH, every
# trace the test left in $WORK (*.pftrace, any depth) is loaded and fails the
# test on an import error or data loss (its stats), or a thread or process
# that the importer holds twice. A pid the kernel reused within the session is
# two processes, not twice one: the first ended (its end_ts) when or before
# the second began (its start_ts); their threads likewise. Traces a test
# damages on purpose match TP_CHECK_EXCLUDE (a grep -E pattern over their
# paths). Without it (CI has none) nothing is checked and nothing is said:
# the count stays the same.
TP_CHECK_EXCLUDE=${TP_CHECK_EXCLUDE:-}
tp_check_traces() {
	local tp q t row rc
	tp=$(command -v trace_processor_shell) || return 0
	q="$WORK/.tp_check.sql"
	cat >"$q" <<'SQL'
select
  (select coalesce(group_concat(name || '=' || value, ' '), '') from stats
     where value > 0 and severity in ('error', 'data_loss')) as errors,
  (select count(*) from thread a join thread b on a.tid = b.tid and a.utid < b.utid
     left join process pa on pa.upid = a.upid left join process pb on pb.upid = b.upid
     where a.tid != 0 and not (pa.upid != pb.upid and pa.pid = pb.pid
       and pa.end_ts is not null and pb.start_ts >= pa.end_ts)) as tids_twice,
  (select count(*) from process a join process b on a.pid = b.pid and a.upid < b.upid
     where a.pid != 0 and not (a.end_ts is not null and b.start_ts >= a.end_ts)) as pids_twice;
SQL
	while IFS= read -r t; do
		[ -n "$TP_CHECK_EXCLUDE" ] && grep -qE "$TP_CHECK_EXCLUDE" <<<"$t" && continue
		timeout 900 "$tp" -q "$q" "$t" >"$q.out" 2>/dev/null
		rc=$?
		row=$(sed -n 2p "$q.out" | tr -d '"')
		if [ "$rc" = 124 ]; then
			# no verdict on the trace: a loaded machine starved the importer
			echo "skip: Perfetto's importer did not finish with ${t#"$WORK"/} in 900 s"
		elif [ -z "$row" ]; then
			echo "FAIL: trace_processor could not load $t"
			failed=$((failed + 1))
		elif [ "$row" != ",0,0" ]; then
			echo "FAIL: Perfetto's importer on ${t#"$WORK"/}: errors [${row%%,*}]," \
				"tids twice, pids twice: ${row#*,}"
			failed=$((failed + 1))
		fi
	done < <(find "$WORK" -name '*.pftrace' -type f -size +0 2>/dev/null | sort)
}

finish() {
	tp_check_traces
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}

# "SLICES CALLS OFF_TIMELINE NAME" per function (all threads) from a
# `profctl report --dump` on stdin. Names may hold spaces (C++), and a slice
# line ends "TS DUR PARENT" plus SELF_SAMPLES when a sample landed in it: the
# name ends before the first of those, which is the one that is a number
# (no symbol's last word is).
dump_func_counts() {
	awk '
	function name(from, to,    s, i) { s = $from; for (i = from + 1; i <= to; i++) s = s " " $i; return s }
	$1 == "slice" { slices[name(4, $(NF - 3) ~ /^[0-9]+$/ ? NF - 4 : NF - 3)]++ }
	$1 == "total" && $2 == 0 { n = name(3, NF - 12); calls[n] = $(NF - 11); off[n] = $(NF - 9) }
	END { for (f in calls) print slices[f] + 0, calls[f], off[f], f }'
}

# "MADE RECORDED DROPPED" from a summary's "profctl: calls: ..." line in FILE.
calls_made_recorded_dropped() { # file
	sed -nE 's/^profctl: calls: ([0-9]+) made, ([0-9]+) recorded, ([0-9]+) dropped.*/\1 \2 \3/p' "$1"
}

# 16 bytes of live code at SYMBOL of the program EXE in process PID, as hex:
# every patched byte must be back after a detach.
symbol_bytes() { # pid, exe, symbol
	local base off
	base=$(awk -v exe="$2" '$6 == exe && $3 == "00000000" {print $1; exit}' "/proc/$1/maps")
	off=$(nm "$2" | awk -v s="$3" '$3 == s {print $1}')
	dd if="/proc/$1/mem" bs=1 skip=$((0x${base%-*} + 0x$off)) count=16 2>/dev/null |
		od -An -tx1 | tr -d ' \n'
}
