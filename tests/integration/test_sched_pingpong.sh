#!/usr/bin/env bash
# What bench/sched.sh's figures rest on, with bench/pingpong (two threads on
# one CPU passing a byte over two pipes): the probe sees every switch of the
# program it follows (each round trip switches away from both threads), none
# under --sched off, and a program it does not follow stays out of the
# counts of another session, whose idle target keeps the probe loaded (the
# kernel's tgid filter or profd's routing; which of the two drops them shows
# only in the cost, bench/sched.sh's row (d)). Counts only, no times.
set -u
. "$(dirname "$0")/common.bash"
PINGPONG="$ROOT/$BUILD/bench/pingpong"
N=20000

# "SWITCHES WAKEUPS LOST" from the summary
sched_counts() { sed -nE 's/^profctl: scheduler: ([0-9]+) switches, ([0-9]+) wakeups \(([0-9]+) lost.*/\1 \2 \3/p' "$1"; }

"$PROFCTL" run --freq 0 -o "$WORK/on.pftrace" -- "$PINGPONG" --cpu 0 "$N" >"$WORK/on.out" 2>"$WORK/on.err"
if grep -q '^profctl: no scheduler states' "$WORK/on.err"; then
	# as root on a kernel with BTF the probe must load: anything else is a failure
	if [ "$(id -u)" -eq 0 ] && [ -r /sys/kernel/btf/vmlinux ]; then
		check "root loads the scheduler probe" false
	else
		skip "$(sed -nE 's/^profctl: no scheduler states: //p' "$WORK/on.err")"
	fi
	finish
	exit
fi
check "sched on: pingpong ran its $N round trips" grep -q "round_trips=$N " "$WORK/on.out"
read -r sw wk lost < <(sched_counts "$WORK/on.err")
check "sched on: the summary counts switches (${sw:-none})" test -n "${sw:-}"
sw=${sw:-0} wk=${wk:-0} lost=${lost:-0}
# On one CPU the reply can only come once the sender is switched away, and the
# next byte only once the replier is: at least 2 switches per round trip, the
# untimed warm-up's included.
all=$((N + $(sed -nE 's/.* warmup_round_trips=([0-9]+).*/\1/p' "$WORK/on.out")))
if [ "$lost" -eq 0 ]; then
	check "sched on: at least 2 switches per round trip ($sw for $all)" test "$sw" -ge $((2 * all))
else
	skip "the probe lost $lost records: the lower bound does not hold"
fi
check "sched on: wakeups counted ($wk)" test "$wk" -gt 0

"$PROFCTL" run --sched off --freq 0 -o "$WORK/off.pftrace" -- "$PINGPONG" --cpu 0 "$N" \
	>"$WORK/off.out" 2>"$WORK/off.err"
check "sched off: pingpong ran" grep -q "round_trips=$N " "$WORK/off.out"
check_eq "sched off: no scheduler line" "$(grep -c '^profctl: scheduler' "$WORK/off.err")" 0

# Another session follows an idle process (blocked opening a FIFO) while pingpong runs bare.
mkfifo "$WORK/idle.fifo"
# shellcheck disable=SC2016 # $1 is the inner shell's
"$PROFCTL" run --freq 0 -o "$WORK/idle.pftrace" -- sh -c 'echo ready; exec head -c1 "$1"' sh \
	"$WORK/idle.fifo" >"$WORK/idle.out" 2>"$WORK/idle.err" &
idle_pid=$!
for _ in $(seq 200); do
	grep -q ready "$WORK/idle.out" 2>/dev/null && break
	kill -0 "$idle_pid" 2>/dev/null || break
	sleep 0.05
done
check "idle session: its target runs" grep -q ready "$WORK/idle.out"
"$PINGPONG" --cpu 0 "$N" >"$WORK/bare.out" 2>&1
check "bare pingpong ran beside it" grep -q "round_trips=$N " "$WORK/bare.out"
# shellcheck disable=SC2016
timeout 5 sh -c ': >"$1"' sh "$WORK/idle.fifo" || kill "$idle_pid" 2>/dev/null
wait "$idle_pid"
check_eq "idle session: profctl exit status" "$?" 0
read -r isw iwk _ < <(sched_counts "$WORK/idle.err")
check "idle session: the summary counts switches (${isw:-none})" test -n "${isw:-}"
# The idle target switches a handful of times (exec, open); pingpong's 2 x $N are not its.
check "idle session: none of the bare program's switches ($isw switches, $iwk wakeups)" \
	test "${isw:-0}" -lt $((N / 10)) -a "${iwk:-0}" -lt $((N / 10))
finish
