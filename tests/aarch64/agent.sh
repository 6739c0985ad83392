#!/usr/bin/env bash
# The arm64 agent under qemu-user against this host's profd and profctl
# (`--freq 0`: perf cannot sample an emulated process): the integration tests
# that take TARGET_ARCH (tests/integration/test_abi.sh, test_shadow_stack.sh,
# test_args.sh)
# on the arm64 builds, plain and with pointer authentication and BTI pads
# (TARGET_VARIANT=pac), and how profctl runs a command of another
# architecture. Needs `make ARCH=aarch64` done. Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/../integration/common.bash"
ARM="$ROOT/$BUILD/aarch64/tests/targets"

# Each integration test's own count goes into ours; its failures are shown.
run_suite() { # label, env..., script
	local label=$1 out="$WORK/suite.out" line p f
	shift
	env "$@" >"$out" 2>&1
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
	p=${line%% passed*}
	f=${line#*passed, }
	f=${f%% failed*}
	if [ -z "$line" ]; then p=0 f=1; fi
	passed=$((passed + p))
	failed=$((failed + f))
	echo "$label: ${line:-no summary line}"
	[ "$f" -eq 0 ] || grep -E '^FAIL' "$out" | head -20
}

for variant in "" pac; do
	for t in test_abi test_shadow_stack test_args; do
		run_suite "$t ${variant:-plain}" TARGET_ARCH=aarch64 TARGET_VARIANT="$variant" \
			bash "$ROOT/tests/integration/$t.sh"
	done
done

# A host program the arm64 target spawns (/bin/true) must not inherit the
# arm64 agent in LD_PRELOAD: its loader would complain on its stderr.
"$PROFCTL" run --freq 0 --funcs 'torture_*' -o "$WORK/spawn.pftrace" -- \
	qemu-aarch64 "$ARM/abi_torture" spawn >"$WORK/spawn.out" 2>"$WORK/spawn.err"
check_eq "spawn under the arm64 agent: exit status" "$?" 0
check_eq "spawn: its case ok" "$(grep -c '^case spawn ok' "$WORK/spawn.out")" 1
check_eq "spawn: no loader complaint about the agent" "$(grep -c 'ld.so' "$WORK/spawn.err")" 0
check "spawn: the arm64 agent patched the target" \
	grep -q '^profctl: functions: [1-9][0-9]* matched, [1-9][0-9]* instrumented' "$WORK/spawn.err"

# No agent for the command's architecture next to profctl: one line, nothing run.
mkdir -p "$WORK/bin"
cp "$PROFCTL" "$ROOT/$BUILD/libprofagent.so" "$WORK/bin/"
"$WORK/bin/profctl" run --freq 0 --funcs 'torture_*' -o "$WORK/none.pftrace" -- \
	qemu-aarch64 "$ARM/abi_torture" int_args >"$WORK/none.out" 2>"$WORK/none.err"
check_eq "no arm64 agent: exit status 2" "$?" 2
check_eq "no arm64 agent: one line" "$(wc -l <"$WORK/none.err")" 1
check "no arm64 agent: names the agent it looked for" \
	grep -q "agent $WORK/bin/aarch64/libprofagent.so: No such file" "$WORK/none.err"
check "no arm64 agent: the program never ran, no trace" \
	test ! -s "$WORK/none.out" -a ! -e "$WORK/none.pftrace"
finish
