#!/usr/bin/env bash
# Attaches that cannot be done end with one clear line, and the target runs
# on as before: no such process, already traced, statically linked, under
# seccomp, another user's process. Then a real program nobody here wrote
# (the sqlite3 shell in the middle of a script) is attached and detached.
set -u
. "$(dirname "$0")/common.bash"

wait_ready() { for _ in $(seq 100); do grep -q ready "$1" 2>/dev/null && break; sleep 0.05; done; }
expect_refusal() { # description, pid, pattern of the error line
	"$PROFCTL" attach "$2" --funcs 'x*' -o "$WORK/refused.pftrace" 2>"$WORK/refused.err"
	local rc=$?
	check "$1: refused (exit $rc)" test "$rc" -ne 0
	check "$1: says why" grep -qE "$3" "$WORK/refused.err"
	check "$1: the target still runs" kill -0 "$2"
}

"$PROFCTL" attach 999999999 --funcs 'x*' -o "$WORK/e.pftrace" 2>"$WORK/e.err"
check "no such process: refused" test $? -ne 0
check "no such process: says so" grep -q "no such process" "$WORK/e.err"

sleep 60 &
sleeper=$!
if command -v strace >/dev/null; then
	strace -p "$sleeper" -o /dev/null 2>/dev/null &
	tracer=$!
	sleep 0.3
	expect_refusal "already traced" "$sleeper" "already (being )?traced"
	kill "$tracer" 2>/dev/null
	wait "$tracer" 2>/dev/null
else
	skip "strace is not installed"
fi

if cc -static -O2 -o "$WORK/static_sleep" -x c - <<<'#include <unistd.h>
int main(void) { sleep(60); return 0; }' 2>/dev/null; then
	"$WORK/static_sleep" &
	static_pid=$!
	sleep 0.2
	# no loader to dlopen the agent with: one line, then samples and scheduler states only
	timeout 60 "$PROFCTL" attach "$static_pid" --funcs 'x*' --duration 1 \
		-o "$WORK/static.pftrace" 2>"$WORK/static.err"
	check_eq "statically linked: the attach goes on without the agent (exit $?)" "$?" 0
	check_eq "statically linked: one line says why" \
		"$(grep -c 'statically linked: functions cannot be instrumented' "$WORK/static.err")" 1
	check "statically linked: the target still runs" kill -0 "$static_pid"
	kill "$static_pid"
else
	skip "no static libc to build a static program"
fi

"$ROOT/$BUILD/tests/targets/seccomp_target" "$WORK/seccomp_stop" >"$WORK/seccomp.out" &
sec_pid=$!
wait_ready "$WORK/seccomp.out"
expect_refusal "seccomp" "$sec_pid" "seccomp"
touch "$WORK/seccomp_stop"
wait "$sec_pid"
check_eq "seccomp: the target exits normally" "$?" 0

if [ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null; then
	id profd-test >/dev/null 2>&1 || useradd -M -s /bin/sh profd-test 2>/dev/null
	chmod o+rx "$WORK"
	if id profd-test >/dev/null 2>&1; then
		su profd-test -s /bin/sh -c "TMPDIR=/tmp '$PROFCTL' attach $sleeper --funcs 'x*' -o /tmp/profd-test-$$.pftrace" \
			2>"$WORK/user.err"
		check "another user's process: refused" test $? -ne 0
		check "another user's process: says why" \
			grep -qiE "not permitted|belongs to uid|Operation not permitted" "$WORK/user.err"
		check "another user's process: it still runs" kill -0 "$sleeper"
		rm -f "/tmp/profd-test-$$.pftrace"
	fi
else
	skip "not root: cannot create a second user"
fi
kill "$sleeper" 2>/dev/null

# The target dies while profctl is attaching: killed the moment it is traced. The attach (a few
# ms) can be over before this shell polls /proc again (0.6 ms a poll); then the kill lands during
# the recording, which must be reported the same way. One after profctl ended tests nothing, so
# that round is retried.
attach_and_kill() {
	sleep 60 &
	victim=$!
	timeout 30 "$PROFCTL" attach "$victim" --funcs 'x*' --duration 2 -o "$WORK/exiting.pftrace" \
		2>"$WORK/exiting.err" &
	attacher=$!
	local start=${EPOCHREALTIME/./} now
	while :; do
		tracer=0
		while read -r key value; do [ "$key" = TracerPid: ] && tracer=$value; done \
			<"/proc/$victim/status" 2>/dev/null
		[ "$tracer" != 0 ] && break
		now=${EPOCHREALTIME/./}
		((now - start > 500000)) && break # missed it: the recording (2 s) is on by now
	done
	kill -0 "$attacher" 2>/dev/null
	local in_time=$?
	kill -9 "$victim"
	wait "$attacher"
	rc=$?
	wait "$victim" 2>/dev/null
	return $in_time
}
for round in 1 2 3 4 5; do
	attach_and_kill && break
	echo "  (round $round: the kill came after profctl had ended; again)"
done
check "target killed during the attach: profctl ends, no hang (exit $rc)" test "$rc" -ne 124
says_exited() { grep -qiE "exited|no such process" "$1" || { sed 's/^/  > /' "$1"; false; }; }
check "target killed during the attach: says so" says_exited "$WORK/exiting.err"
"$PROFCTL" report --dump "$WORK/exiting.pftrace" >/dev/null
check "target killed during the attach: the trace written so far loads" test $? -eq 0

if command -v sqlite3 >/dev/null; then
	cat >"$WORK/slow.sql" <<'SQL'
CREATE TABLE t(x INTEGER, y TEXT);
WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 300000)
INSERT INTO t SELECT n, printf('row %d', n) FROM c;
SELECT count(*), sum(x), max(y) FROM t;
WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3000000)
SELECT sum(n % 7) FROM c;
SELECT count(*) FROM t a JOIN t b ON a.x = b.x WHERE a.x % 1000 = 0;
SQL
	sqlite3 :memory: <"$WORK/slow.sql" >"$WORK/sql.plain" 2>&1
	sqlite3 :memory: <"$WORK/slow.sql" >"$WORK/sql.attached" 2>&1 &
	sql_pid=$!
	sleep 0.3
	"$PROFCTL" attach "$sql_pid" --funcs 'sqlite3*' --duration 1 -o "$WORK/sql.pftrace" \
		2>"$WORK/sql.err"
	check_eq "sqlite3 shell mid-script: attach and detach succeed" "$?" 0
	grep '^profctl: functions' "$WORK/sql.err"
	wait "$sql_pid"
	check_eq "sqlite3 shell: exits normally" "$?" 0
	check "sqlite3 shell: output identical to the plain run" \
		cmp -s "$WORK/sql.plain" "$WORK/sql.attached"
	"$PROFCTL" report --dump "$WORK/sql.pftrace" >"$WORK/sql.dump"
	check "sqlite3 shell: its calls are in the trace" grep -q '^slice .* sqlite3' "$WORK/sql.dump"
	check_eq "sqlite3 shell: the trace breaks no rule" "$(grep -c '^problem' "$WORK/sql.dump")" 0
else
	skip "sqlite3 is not installed"
fi
finish
