# Shared helpers for integration tests (sourced). Each test file counts its
# checks and ends with "N passed, N failed" through finish.
BUILD=${BUILD:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROFCTL="$ROOT/$BUILD/profctl"
passed=0
failed=0
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

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

skip() {
	echo "skip: $*"
}

finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}
