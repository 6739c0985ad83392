#!/usr/bin/env bash
# Instrumentation coverage of shared libraries' exported functions.
#
#   tools/coverage.sh [LIB...]    (default: this system's libzstd and libsqlite3)
#
# Denominator: the library's exported functions (.dynsym, defined, FUNC or
# IFUNC, not LOCAL) of 5 bytes or more. profctl patches one entry per address
# (aliases are folded into one function, the global shortest name), so the
# coverage is counted per distinct address; the symbol count is printed too.
#
# Numerator: a loader compiled here against LIB reads the first bytes of each
# of those addresses in main(), once plainly and once under
# `profctl run -v --freq 0 --funcs 'SONAME:*'` (the agent patches in its
# constructor, before main). An address is instrumented when its bytes became
# a jump and profctl did not list it as skipped; a skipped one is counted under
# profctl's reason, its name mapped to addresses through the same symbol
# tables profctl reads. An address neither patched nor listed is reported as
# unaccounted for (a profctl bug). Needs cc, readelf, nm and a built profctl.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
PROFCTL=${PROFCTL:-$ROOT/$BUILD/profctl}
CC=${CC:-cc}

die() {
	echo "coverage: $*" >&2
	exit 1
}

[ -x "$PROFCTL" ] || die "no $PROFCTL (run make first)"
for tool in readelf nm "$CC"; do
	command -v "$tool" >/dev/null || die "$tool not found"
done

default_libs() {
	local soname path
	for soname in libzstd.so.1 libsqlite3.so.0; do
		path=$(ldconfig -p | awk -v s="$soname" '$1 == s && /x86-64/ {print $NF; exit}')
		[ -n "$path" ] && echo "$path"
	done
}

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Prints "offset hex-bytes" for each hex offset read from argv[1], relative to
# the load base of the loaded object whose file name is argv[2].
cat >"$TMP/loader.c" <<'EOF'
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *wanted;
static uintptr_t base;
static int found;

static int find_base(struct dl_phdr_info *info, size_t size, void *ctx)
{
	const char *slash = strrchr(info->dlpi_name, '/');
	const char *name = slash ? slash + 1 : info->dlpi_name;

	(void)size;
	(void)ctx;
	if (strcmp(name, wanted) != 0)
		return 0;
	base = info->dlpi_addr;
	found = 1;
	return 1;
}

int main(int argc, char **argv)
{
	char line[64];
	FILE *f;

	if (argc != 3 || !(f = fopen(argv[1], "r")))
		return 2;
	wanted = argv[2];
	dl_iterate_phdr(find_base, NULL);
	if (!found) {
		fprintf(stderr, "loader: %s is not loaded\n", wanted);
		return 3;
	}
	while (fgets(line, sizeof(line), f)) {
		uintptr_t off = (uintptr_t)strtoull(line, NULL, 16);
		const unsigned char *p = (const unsigned char *)(base + off);

		printf("%lx ", (unsigned long)off);
		for (int i = 0; i < 14; i++)
			printf("%02x", p[i]);
		printf("\n");
	}
	fclose(f);
	return 0;
}
EOF

# Normalized lowercase hex without leading zeros ("0" for zero).
norm_hex_awk='function nh(s) { s = tolower(s); sub(/^0x/, "", s); sub(/^0+/, "", s); return s == "" ? "0" : s }'

coverage_one() {
	local lib=$1 real soname dir work table glob rc
	real=$(readlink -f "$lib") || return 1
	[ -f "$real" ] || { echo "$lib: no such file" >&2; return 1; }
	soname=$(readelf -d -W "$real" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	[ -n "$soname" ] || soname=$(basename "$real")
	dir=$(dirname "$real")
	work=$TMP/$(basename "$real")
	mkdir -p "$work"

	# Exported functions: "address size type name", names without @VERSION.
	readelf --dyn-syms -W "$real" | awk "$norm_hex_awk"'
		function num(s,   v, i, c) {
			if (s !~ /^0x/) return s + 0
			s = tolower(substr(s, 3)); v = 0
			for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
			return v
		}
		$1 ~ /^[0-9]+:$/ && ($4 == "FUNC" || $4 == "IFUNC") && $5 != "LOCAL" && $7 != "UND" && NF >= 8 {
			name = $8; sub(/@.*/, "", name)
			print nh($2), num($3), $4, name
		}' >"$work/exported"
	awk '$2 >= 5' "$work/exported" >"$work/exported5"
	awk '{print $1}' "$work/exported5" | sort -u >"$work/addrs"

	# Name -> address through .symtab and .dynsym (profctl reads .symtab when present).
	table=.dynsym
	readelf -S -W "$real" | grep -q ' \.symtab ' && table=.symtab
	{
		nm --defined-only "$real" 2>/dev/null
		nm -D --defined-only "$real" 2>/dev/null
	} | awk "$norm_hex_awk"'NF >= 3 { name = $3; sub(/@.*/, "", name); print name, nh($1) }' |
		sort -u >"$work/names"

	if ! "$CC" -O1 -o "$work/loader" "$TMP/loader.c" -Wl,--no-as-needed "$real" \
		-Wl,-rpath,"$dir" 2>"$work/cc.err"; then
		echo "$lib: cannot link a loader against it:" >&2
		cat "$work/cc.err" >&2
		return 1
	fi
	"$work/loader" "$work/addrs" "$soname" >"$work/plain" 2>"$work/plain.err" ||
		{ echo "$lib: loader failed: $(cat "$work/plain.err")" >&2; return 1; }

	glob="$soname:*"
	(cd "$work" && "$PROFCTL" run -v --freq 0 --funcs "$glob" -o "$work/trace.pftrace" -- \
		"$work/loader" "$work/addrs" "$soname" >"$work/prof" 2>"$work/prof.err")
	rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "$lib: the loader exited with $rc under profctl:" >&2
		grep -v '^  skipped ' "$work/prof.err" >&2
		return 1
	fi

	# "name<TAB>reason" of this module's skipped functions.
	awk -v m="$soname" '
		/^  skipped / {
			line = substr($0, 11)
			p = index(line, " (" m "): ")
			if (p) print substr(line, 1, p - 1) "\t" substr(line, p + length(m) + 5)
		}' "$work/prof.err" >"$work/skipped"

	echo "$real ($soname; profctl reads its $table)"
	grep '^profctl: functions:' "$work/prof.err" | sed 's/^profctl: functions:/  profctl, whole module:/'
	awk -v exported="$work/exported" -v exported5="$work/exported5" \
		-v names="$work/names" -v skipped="$work/skipped" -v plain="$work/plain" \
		-v prof="$work/prof" '
	BEGIN {
		FS = " "
		while ((getline l < exported) > 0) n_exp++
		while ((getline l < exported5) > 0) {
			split(l, f, " ")
			n_sym5++; nsyms[f[1]]++
			if (!(f[1] in is5)) { is5[f[1]] = 1; n_addr5++ }
		}
		while ((getline l < names) > 0) {
			split(l, f, " ")
			addr_of[f[1]] = addr_of[f[1]] " " f[2]
		}
		while ((getline l < plain) > 0) { split(l, f, " "); before[f[1]] = f[2] }
		while ((getline l < prof) > 0) { split(l, f, " "); after[f[1]] = f[2] }
		for (a in is5)
			jump[a] = after[a] != before[a] && (after[a] ~ /^e9/ || after[a] ~ /^ff2500000000/)
		# A skipped name may have several addresses (symbol versions, local
		# duplicates): the reason goes to those left unpatched, or to all of
		# them when all are patched (unwinders: patched but not timed).
		FS = "\t"
		while ((getline l < skipped) > 0) {
			split(l, f, "\t")
			n = split(addr_of[f[1]], at, " ")
			unpatched = 0
			for (i = 1; i <= n; i++)
				if (at[i] in is5 && !jump[at[i]]) unpatched++
			for (i = 1; i <= n; i++)
				if (at[i] in is5 && !(at[i] in reason) && (!unpatched || !jump[at[i]]))
					reason[at[i]] = f[2]
		}
		FS = " "
		for (a in is5) {
			if (a in reason) {
				by_reason[reason[a]]++; n_skip++
			} else if (jump[a]) {
				n_inst++; s_inst += nsyms[a]
			} else {
				n_lost++; lost = lost " " a
			}
		}
		printf "  exported functions (.dynsym FUNC/IFUNC, defined): %d symbols\n", n_exp
		printf "  of them >= 5 bytes: %d symbols at %d addresses (%d aliases folded)\n",
			n_sym5, n_addr5, n_sym5 - n_addr5
		printf "  instrumented: %d addresses (%d symbols), verified as a jump in memory\n",
			n_inst, s_inst
		printf "  skipped: %d addresses\n", n_skip
		for (r in by_reason) printf "    %5d  %s\n", by_reason[r], r
		if (n_lost) printf "  UNACCOUNTED (neither patched nor listed as skipped): %d:%s\n", n_lost, lost
		if (n_addr5)
			printf "  coverage: %.1f%% of addresses, %.1f%% of symbols\n",
				100 * n_inst / n_addr5, 100 * s_inst / n_sym5
	}'
}

libs=("$@")
[ ${#libs[@]} -gt 0 ] || mapfile -t libs < <(default_libs)
[ ${#libs[@]} -gt 0 ] || die "no library given and none of the defaults found"
status=0
for lib in "${libs[@]}"; do
	coverage_one "$lib" || status=1
done
exit $status
