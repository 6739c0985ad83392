#!/usr/bin/env bash
# Runs the arm64 builds of the portable test targets under qemu-user and checks
# that each prints what the host's (x86-64) build prints for the same
# arguments, then the arm64 agent in them (tests/aarch64/agent.sh). Ends with
# "N passed, N failed"; without the cross compiler or qemu it prints
# "skip: ..." and "0 passed, 0 failed".
#
# The runner: binfmt_misc if it has an aarch64 entry, else
# qemu-aarch64 -L /usr/aarch64-linux-gnu with LD_LIBRARY_PATH set to the same
# sysroot's lib. That is needed once multiarch libc6:arm64 is installed:
# ld.so.cache then names /lib/aarch64-linux-gnu/libc.so.6, and the cross
# sysroot's ld.so (libc6-arm64-cross) with multiarch libc (another Debian
# revision) hangs in pthread_create (their private ld.so/libc ABI differs).
set -u
cd "$(dirname "$0")/../.."
HOST_BUILD=${HOST_BUILD:-build}
ARCH_BUILD=build/aarch64
SYSROOT=/usr/aarch64-linux-gnu
pass=0 fail=0

finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }

if ! command -v aarch64-linux-gnu-gcc >/dev/null; then
	echo "skip: no aarch64-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu, tools/install-deps.sh)"
	finish
fi
if [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] &&
	grep -qx enabled /proc/sys/fs/binfmt_misc/qemu-aarch64; then
	run=()
elif command -v qemu-aarch64 >/dev/null && [ -d "$SYSROOT/lib" ]; then
	run=(qemu-aarch64 -L "$SYSROOT" -E "LD_LIBRARY_PATH=$SYSROOT/lib")
else
	echo "skip: no qemu-aarch64 nor binfmt_misc entry (Debian: qemu-user, libc6-dev-arm64-cross)"
	finish
fi
if ! make --no-print-directory -s -j"$(nproc)" ARCH=aarch64 all; then
	echo "FAIL: make ARCH=aarch64"
	fail=$((fail + 1))
	finish
fi

# Counts of functions only one architecture's cases call (its assembly, the
# thunk's target, memops) differ, and the aarch64 build prints more of them
# (and shadow_torture's pointer-authentication case).
ARCH_ONLY_COUNTS='^count torture_(asm_[a-z_]*|thunk_target|memops) |^backtrace from a zero-PAC'

# check NAME TARGET ARGS...: same stdout and exit status on both builds
check() {
	local name=$1 target=$2
	shift 2
	local want got want_rc got_rc
	# the status first: after var=$(a | b), PIPESTATUS holds b's, not a's
	want=$("$HOST_BUILD/tests/targets/$target" "$@" 2>/dev/null)
	want_rc=$?
	want=$(echo "$want" | grep -Ev "$ARCH_ONLY_COUNTS")
	got=$("${run[@]}" "$ARCH_BUILD/tests/targets/$target" "$@" 2>/dev/null)
	got_rc=$?
	got=$(echo "$got" | grep -Ev "$ARCH_ONLY_COUNTS")
	if [ -n "$got" ] && [ "$got" = "$want" ] && [ "$got_rc" = "$want_rc" ]; then
		echo "ok   $name"
		pass=$((pass + 1))
	else
		echo "FAIL $name: exit $got_rc (want $want_rc), output differs:"
		diff <(echo "$want") <(echo "$got") | head -20
		fail=$((fail + 1))
	fi
}

# abi_torture's cases that exist on every architecture (fpenv's flush-to-zero
# half is MXCSR, so its call count differs): one run each, then all at once.
PORTABLE_CASES="int_args int128 varargs mixed_fp x87 complex structs static_chain ipa_ra
	recursion errno signal threads fork setjmp spawn vfork ucontext"
for c in $PORTABLE_CASES; do
	check "abi_torture $c" abi_torture "$c"
done
# shellcheck disable=SC2086
check "abi_torture (all portable cases)" abi_torture $PORTABLE_CASES
check "shadow_torture" shadow_torture
check "exceptions (C++)" exceptions

# check_arm64 NAME BUILD_DIR ARGS...: that arm64 abi_torture alone exits 0,
# prints `case X ok` for every case it runs and at least one, and no FAIL.
check_arm64() {
	local name=$1 dir=$2 out rc bad
	shift 2
	out=$("${run[@]}" "$dir/abi_torture" "$@" 2>&1)
	rc=$?
	bad=$(echo "$out" | grep -E '^case ' | grep -Ev '^case [a-z0-9_]+ ok$')
	if [ "$rc" = 0 ] && [ -z "$bad" ] && echo "$out" | grep -q '^case .* ok$'; then
		echo "ok   $name"
		pass=$((pass + 1))
	else
		echo "FAIL $name: exit $rc"
		echo "${bad:-$(echo "$out" | grep -v '^count ' | tail -5)}" | head -20
		fail=$((fail + 1))
	fi
}

# abi_torture's arm64-only cases: register probes, prologue shapes, bl first.
A64_CASES="regs_gpr_a64 regs_simd_a64 asm_prologues_a64 asm_bl_first_a64"
for c in $A64_CASES; do
	check_arm64 "abi_torture $c (arm64 only)" "$ARCH_BUILD/tests/targets" "$c"
done
check_arm64 "abi_torture (every case, arm64 only)" "$ARCH_BUILD/tests/targets"
# the -mbranch-protection=standard build: paciasp/bti c in every C prologue
check_arm64 "abi_torture (every case, arm64 pac-ret/BTI build)" "$ARCH_BUILD/tests/targets/pac"

# The arm64 agent in those targets, against this host's profd and profctl;
# its checks count in this summary.
agent_out=$(bash tests/aarch64/agent.sh 2>&1)
agent_summary=$(echo "$agent_out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
echo "$agent_out" | grep -Ev '^[0-9]+ passed, [0-9]+ failed$'
if [ -n "$agent_summary" ]; then
	agent_failed=${agent_summary#*passed, }
	pass=$((pass + ${agent_summary%% passed*}))
	fail=$((fail + ${agent_failed%% failed*}))
else
	echo "FAIL tests/aarch64/agent.sh: no summary line"
	fail=$((fail + 1))
fi
finish
