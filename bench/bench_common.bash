# shellcheck shell=bash
# Sourced by the bench/*.sh scripts: what more than one of them needs. Uses ROOT
# and BUILD (set by the caller); never exits except where it says so.

# A profd of the bench's own, not the one profctl would start per session, so
# that every session goes to one process whose CPU time can be read. Starts
# `profd --foreground` on DIR/profd.sock (log: DIR/profd.log), sets profd_pid
# and exports PROFD_SOCKET. Exits 1 if profd does not listen within 5 s.
profd_start() { # DIR
	"$ROOT/$BUILD/profd" --foreground --socket "$1/profd.sock" 2>"$1/profd.log" &
	# shellcheck disable=SC2034 # the caller reads it
	profd_pid=$!
	for _ in $(seq 100); do [ -S "$1/profd.sock" ] && break; sleep 0.05; done
	if [ ! -S "$1/profd.sock" ]; then
		echo "FAIL: profd did not start listening on $1/profd.sock" >&2
		cat "$1/profd.log" >&2
		exit 1
	fi
	export PROFD_SOCKET="$1/profd.sock"
}

# A temporary directory in tmp, removed at exit, after the bench's profd
# (profd_pid, when profd_start started one) is stopped.
bench_tmp() {
	tmp=$(mktemp -d)
	profd_pid=
	trap 'if [ -n "$profd_pid" ]; then kill -TERM "$profd_pid" 2>/dev/null || true; fi
		wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
}

# The counts of profctl's summary line
#   profctl: calls: M made, R recorded, D dropped (...)
# as "RECORDED_EVENTS DROPPED_CALLS" (2 events per recorded call), nothing if absent.
summary_counts() { # PROFCTL_STDERR_FILE
	sed -nE 's/^profctl: calls: [0-9]+ made, ([0-9]+) recorded, ([0-9]+) dropped.*/\1 \2/p' \
		"$1" | awk '{ print 2 * $1, $2; exit }'
}

# Exits 1 (the one place it does) unless BUILD holds what the benches of
# bench/load_target run: profd, profctl, the agent and the target.
require_load_target_build() {
	local f
	for f in profd profctl libprofagent.so bench/load_target; do
		if [ ! -x "$ROOT/$BUILD/$f" ]; then
			echo "FAIL: $ROOT/$BUILD/$f is missing: make -j2 all $BUILD/bench/load_target" >&2
			exit 1
		fi
	done
}
