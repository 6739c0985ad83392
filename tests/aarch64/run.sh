#!/usr/bin/env bash
# Runs the arm64 builds of the portable test targets under qemu-user and checks
# that each prints what the host's (x86-64) build prints for the same
# arguments. Ends with "N passed, N failed"; without the cross compiler or
# qemu it prints "skip: ..." and "0 passed, 0 failed".
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
if ! make --no-print-directory -s ARCH=aarch64 all; then
	echo "FAIL: make ARCH=aarch64"
	fail=$((fail + 1))
	finish
fi

# Counts of functions only x86-64 cases call (assembly thunks, memops) differ.
X86_ONLY_COUNTS='^count torture_(asm_[a-z_]*|thunk_target|memops) '

# check NAME TARGET ARGS...: same stdout and exit status on both builds
check() {
	local name=$1 target=$2
	shift 2
	local want got want_rc got_rc
	want=$("$HOST_BUILD/tests/targets/$target" "$@" 2>/dev/null | grep -Ev "$X86_ONLY_COUNTS")
	want_rc=${PIPESTATUS[0]}
	got=$("${run[@]}" "$ARCH_BUILD/tests/targets/$target" "$@" 2>/dev/null |
		grep -Ev "$X86_ONLY_COUNTS")
	got_rc=${PIPESTATUS[0]}
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
finish
