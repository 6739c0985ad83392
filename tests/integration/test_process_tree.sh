#!/usr/bin/env bash
# profctl run follows every process the command starts: forked workers,
# fork+exec, posix_spawn, vfork+exec, a shell running two programs, a
# grandchild, a child that execs a static binary, a child gone before its
# agent could connect; --no-inherit keeps to the first. Each process's slices
# are its own calls (each prints "pid PID fibf N"), and every process that
# computed has samples; a process recording a few calls populates a few pages
# of its ring, not whole segments. No timing is asserted.
set -u
. "$(dirname "$0")/common.bash"
TREE="$ROOT/$BUILD/tests/targets/proc_tree"
DEMO="$ROOT/$BUILD/examples/demo"

# name: run CMD under --funcs fibf into NAME.{out,err,dump}
profile() {
	local name=$1
	shift
	timeout 300 "$PROFCTL" run --funcs 'fibf' -o "$WORK/$name.pftrace" -- "$@" \
		>"$WORK/$name.out" 2>"$WORK/$name.err"
	check_eq "$name: exits as the program does" "$?" 0
	"$PROFCTL" report --dump "$WORK/$name.pftrace" >"$WORK/$name.dump"
	check_eq "$name: the trace breaks no rule" "$(grep -c '^problem' "$WORK/$name.dump")" 0
}

# name: every "pid P fibf N" line has N slices of fibf on P's (only) thread, and samples on P
# (report --dump: "slice TID DEPTH NAME ...", "sample TID ...", "thread PID TID NAME")
per_process() {
	local name=$1 pid n bad=0 nosamples=0
	while read -r _ pid _ n; do
		slices=$(awk -v p="$pid" '$1 == "slice" && $2 == p && $4 == "fibf"' \
			"$WORK/$name.dump" | wc -l)
		[ "$slices" -eq "$n" ] || { echo "  pid $pid: $slices slices, $n calls"; bad=1; }
		grep -q "^sample $pid " "$WORK/$name.dump" || { echo "  pid $pid: no sample"; nosamples=1; }
	done <"$WORK/$name.out"
	check_eq "$name: each process's slices are its own calls" "$bad" 0
	check_eq "$name: each process has samples" "$nosamples" 0
	check_eq "$name: one Perfetto process per program run" \
		"$(grep -c '^process ' "$WORK/$name.dump")" "$2"
}

profile fork "$TREE" fork 3 22
check_eq "fork: 4 processes print their counts" "$(wc -l <"$WORK/fork.out")" 4
per_process fork 4
check "fork: the summary names 4 processes, all instrumented" \
	grep -q '^profctl: processes: 4 seen, 4 followed (4 instrumented)' "$WORK/fork.err"
made=$(sed -nE 's/^profctl: calls: ([0-9]+) made.*/\1/p' "$WORK/fork.err")
check_eq "fork: calls in total = the sum of the processes' own" "$made" \
	"$(awk '{n += $4} END {print n}' "$WORK/fork.out")"

"$PROFCTL" report "$WORK/fork.pftrace" >"$WORK/fork.report"
check_eq "fork: report has a row per process" \
	"$(awk '/^processes \(/ {n = 1; next} n && $1 ~ /^[0-9]+$/ && NF >= 4 {r++} /^$/ {n = 0} END {print r}' \
		"$WORK/fork.report")" 4
check_eq "fork: report's per-process calls = each process's own" \
	"$(awk '/^processes \(/ {n = 1; next} n && $1 ~ /^[0-9]+$/ {print $1, $2} /^$/ {n = 0}' \
		"$WORK/fork.report" | sort)" "$(awk '{print $2, $4}' "$WORK/fork.out" | sort)"

# workers ending by _exit: no destructor sends their figures, the agent's _exit hook does
profile forkexit "$TREE" forkexit 3 22
per_process forkexit 4
profile forkexec "$TREE" forkexec "$TREE" work 20
per_process forkexec 2
profile spawn "$TREE" spawn "$TREE" work 20
per_process spawn 2
profile vfork "$TREE" vfork "$TREE" work 20
per_process vfork 2
profile grand "$TREE" grand 20
per_process grand 3
check "grand: the grandchild's parent is the child" awk -v g="$(awk 'NR==2 {print $2}' "$WORK/grand.out")" \
	'$1 == "profctl:" && $2 == g {found = 1} END {exit !found}' "$WORK/grand.err"

profile quick "$TREE" quick
# (whether profd read the child's EXIT record before the session ended decides which words)
check_eq "quick: the child gone before its agent connected is named" \
	"$(grep -cE 'not instrumented: (exited before its agent connected|its agent never connected)' \
		"$WORK/quick.err")" 1

# a shell running two programs: the shell has no fibf, each demo its own fib
timeout 300 "$PROFCTL" run --funcs 'fib*,worker*' -o "$WORK/sh.pftrace" -- \
	sh -c "'$DEMO' >'$WORK/d1.out'; '$DEMO' >'$WORK/d2.out'" 2>"$WORK/sh.err"
check_eq "sh -c: exits 0" "$?" 0
"$PROFCTL" report --dump "$WORK/sh.pftrace" >"$WORK/sh.dump"
want=$(awk '$2 == "fib" && $3 == "calls" {n += $4} END {print n}' "$WORK/d1.out")
for pid in $(awk '$1 == "profctl:" && $4 == "demo" {print $2}' "$WORK/sh.err"); do
	check_eq "sh -c: demo $pid's fib slices = its calls" \
		"$(awk -v p="$pid" '$1 == "thread" {pid_of[$3] = $2}
			$1 == "slice" && pid_of[$2] == p && $4 == "fib"' "$WORK/sh.dump" | wc -l)" "$want"
done
check_eq "sh -c: two demos followed" "$(awk '$1 == "profctl:" && $4 == "demo"' "$WORK/sh.err" | wc -l)" 2
check "sh -c: no 'matched no function' warning" bash -c "! grep -q 'matched no function' '$WORK/sh.err'"

# --no-inherit: the first process only, the others counted
timeout 300 "$PROFCTL" run --no-inherit --funcs 'fibf' -o "$WORK/noinh.pftrace" -- \
	"$TREE" fork 2 20 >"$WORK/noinh.out" 2>"$WORK/noinh.err"
"$PROFCTL" report --dump "$WORK/noinh.pftrace" >"$WORK/noinh.dump"
check_eq "--no-inherit: one process in the trace" "$(grep -c '^process ' "$WORK/noinh.dump")" 1
check "--no-inherit: the children are counted, not followed" \
	grep -q '2 not followed (--no-inherit)' "$WORK/noinh.err"

# attach --children: a pre-forking server's worker running at the attach, and the
# workers forked after it, are recorded
mkfifo "$WORK/fifo"
"$TREE" server "$WORK/fifo" >"$WORK/srv.out" &
srv=$!
wait_for "$WORK/srv.out" '^ready'
echo "20 $WORK/old.release" >"$WORK/fifo" # running still when attached to, whatever the load
for _ in $(seq 200); do old=$(pgrep -P "$srv") && break; sleep 0.05; done
"$PROFCTL" attach "$srv" --children -v --buffer-size 4M --funcs fibf -o "$WORK/att.pftrace" \
	2>"$WORK/att.err" &
att=$!
if wait_for "$WORK/att.err" 'attached to PID'; then
	printf '20\n21\n' >"$WORK/fifo"
	for _ in $(seq 600); do
		[ "$(grep -vc "^pid ${old:-none} " "$WORK/srv.out")" -ge 3 ] && break
		sleep 0.05
	done
fi
kill -INT "$att"
wait "$att"
check_eq "attach --children: detaches and exits 0" "$?" 0
touch "$WORK/old.release"
for _ in $(seq 200); do grep -q "^pid ${old:-none} " "$WORK/srv.out" && break; sleep 0.05; done
echo quit >"$WORK/fifo"
wait "$srv"
grep '^pid ' "$WORK/srv.out" | grep -v "^pid ${old:-none} " >"$WORK/att.out"
check_eq "attach --children: two workers forked after the attach" "$(wc -l <"$WORK/att.out")" 2
"$PROFCTL" report --dump "$WORK/att.pftrace" >"$WORK/att.dump"
check_eq "attach --children: the trace breaks no rule" "$(grep -c '^problem' "$WORK/att.dump")" 0
per_process att 4
check "attach --children: the worker running at the attach has its calls" awk -v p="${old:-none}" \
	'$1 == "slice" && $2 == p && $4 == "fibf" {n++} END {exit !(n > 0)}' "$WORK/att.dump"
check "attach --children: and its samples" grep -q "^sample ${old:-none} " "$WORK/att.dump"

# a child that execs a static binary: one line says why, its samples are there
cat >"$WORK/spin.c" <<'EOF'
#include <time.h>
int main(void)
{
	struct timespec t;
	volatile unsigned long x = 0;
	do {
		for (int i = 0; i < 100000; i++)
			x += i;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	} while (t.tv_sec * 1000 + t.tv_nsec / 1000000 < 150);
	return 0;
}
EOF
if ${CC:-cc} -O1 -static -o "$WORK/spin" "$WORK/spin.c" 2>"$WORK/cc.err"; then
	timeout 300 "$PROFCTL" run --funcs 'fibf' -o "$WORK/static.pftrace" -- \
		"$TREE" forkexec "$WORK/spin" >"$WORK/static.out" 2>"$WORK/static.err"
	check_eq "static child: exits 0" "$?" 0
	"$PROFCTL" report --dump "$WORK/static.pftrace" >"$WORK/static.dump"
	spid=$(awk '/not instrumented: statically linked/ {print $2}' "$WORK/static.err")
	check_eq "static child: one summary line says so" \
		"$(grep -c 'not instrumented: statically linked' "$WORK/static.err")" 1
	check "static child: its samples are there" grep -q "^sample ${spid:-none} " "$WORK/static.dump"
else
	skip "cannot link statically (no libc.a?): $(head -n 1 "$WORK/cc.err")"
fi

# a process of a few calls (fibf(10): 177, 531 ring units): its ring's pages are
# populated as far as it writes (8 KiB, then twice that), not its segments whole
if command -v strace >/dev/null; then
	timeout 300 "$PROFCTL" run --funcs 'fibf' -o "$WORK/few.pftrace" -- \
		strace -f -e trace=mmap,madvise,openat -o "$WORK/few.strace" "$TREE" work 10 \
		>"$WORK/few.out" 2>"$WORK/few.err"
	check_eq "few calls: exits 0" "$?" 0
	"$PROFCTL" report --dump "$WORK/few.pftrace" >"$WORK/few.dump"
	check_eq "few calls: every call recorded" \
		"$(awk '$1 == "slice" && $4 == "fibf"' "$WORK/few.dump" | wc -l)" \
		"$(awk '/fibf/ {print $4}' "$WORK/few.out")"
	check_eq "few calls: no mapping populated whole" \
		"$(grep -c 'MAP_POPULATE' "$WORK/few.strace")" 0
	populated=$(sed -nE 's/.*madvise\(0x[0-9a-f]+, ([0-9]+), MADV_POPULATE_WRITE\) = 0.*/\1/p' \
		"$WORK/few.strace" | awk '{n += $1} END {print n + 0}')
	check "few calls: 8-16 KiB of the ring populated ($populated bytes)" \
		test "$populated" -ge 8192 -a "$populated" -le 16384
	# libc's symbols come with the config (profctl's presets of the modules
	# it shares with the tree): the loader opens libc, the agent never does
	check_eq "few calls: libc opened once, by the loader (its preset taken)" \
		"$(grep -c 'openat(.*/libc\.so\.6"' "$WORK/few.strace")" 1
	# children that make no call connect at their exit (one by exit, one by
	# _exit, which a signal handler may call): no thread is started for them
	timeout 300 "$PROFCTL" run --funcs 'fibf' -o "$WORK/idle.pftrace" -- \
		strace -f -e trace=clone,clone3 -o "$WORK/idle.strace" "$TREE" idle \
		>"$WORK/idle.out" 2>"$WORK/idle.err"
	check_eq "idle children: exits 0" "$?" 0
	idle=$(awk '/^[0-9]+ +clone\(/ && !/CLONE_THREAD/ {
		sub(/.*= /, ""); print}' "$WORK/idle.strace" | tr '\n' ' ')
	# the parent's flusher starts once it lived 20 ms (test_flusher_start.sh)
	check_eq "idle children: none of them started a thread" \
		"$(awk -v l=" $idle " '/CLONE_THREAD/ && index(l, " " $1 " ")' "$WORK/idle.strace" |
			wc -l)" 0
	check "idle children: a thread at most for the parent's flusher" \
		test "$(grep -c 'CLONE_THREAD' "$WORK/idle.strace")" -le 1
	for pid in $idle; do
		check "idle children: $pid followed, its agent connected at its exit" \
			awk -v p="$pid" '$1 == "profctl:" && $2 == p && !/not instrumented/ {f = 1}
				END {exit !f}' "$WORK/idle.err"
	done
	check_eq "idle children: two" "$(echo $idle | wc -w)" 2
else
	skip "strace not on PATH: the ring's populated pages and idle children's threads are not checked"
fi

finish
