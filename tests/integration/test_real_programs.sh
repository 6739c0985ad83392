#!/usr/bin/env bash
# profctl run on real programs nobody here wrote: the zstd CLI, binutils'
# objcopy compressing debug sections through libzstd.so, libzstd.so's
# streaming API with its own worker threads (tests/data/zstd_stream.c is the
# glue), and the sqlite3 shell on libsqlite3.so; whole libraries, and with
# --funcs '*' libc too, are instrumented. Each profiled run must exit, print
# and write exactly what its unprofiled twin does, and leave a trace that
# breaks no importer rule. The matched / instrumented / skipped counts of
# every run are printed. Real code brings what small targets lack: tail calls
# between instrumented functions (sqlite3_mutex_free tail-jumps through
# sqlite3_free into sqlite3_mutex_leave; ZSTD_compress_usingDict into
# ZSTD_compressEnd) and, with '*', the setjmp family that libc's startup calls.
set -u
. "$(dirname "$0")/common.bash"
SQL="$ROOT/tests/data/real_programs.sql"

for tool in zstd sqlite3 objcopy; do
	command -v "$tool" >/dev/null || skip "$tool not installed (tools/install-deps.sh)"
done

# plain DIR STDIN CMD...: runs CMD in DIR; DIR/{stdout,stderr,rc}.
plain() {
	local dir=$1 in=$2
	shift 2
	mkdir -p "$dir"
	(cd "$dir" && timeout 600 "$@" <"$in" >stdout 2>stderr)
	echo $? >"$dir/rc"
}

# profiled DIR FUNCS STDIN CMD...: the same under profctl. CMD's own stderr is
# what remains once profctl's summary lines are taken out.
profiled() {
	local dir=$1 funcs=$2 in=$3
	shift 3
	mkdir -p "$dir"
	(cd "$dir" && timeout 600 "$PROFCTL" run --funcs "$funcs" -o trace.pftrace -- "$@" \
		<"$in" >stdout 2>profctl.err)
	echo $? >"$dir/rc"
	grep -vE '^profctl: |^  skipped |^  \.\.\. and [0-9]+ more skipped' "$dir/profctl.err" \
		>"$dir/stderr"
}

# recorded DIR: the calls the run recorded (0 when the summary is missing).
recorded() {
	local n
	n=$(sed -n 's/^profctl: calls: [0-9]* made, \([0-9]*\) recorded.*/\1/p' "$1/profctl.err")
	echo "${n:-0}"
}

# compare LABEL FUNCS REFDIR DIR: exit status, stdout, stderr, the trace; prints the counts.
compare() {
	local what=$1 funcs=$2 ref=$3 dir=$4 counts
	check_eq "$what: exit status as unprofiled" "$(cat "$dir/rc")" "$(cat "$ref/rc")"
	check "$what: stdout identical to the unprofiled run" cmp -s "$ref/stdout" "$dir/stdout"
	check "$what: stderr identical to the unprofiled run" cmp -s "$ref/stderr" "$dir/stderr"
	if [ "$(cat "$dir/rc")" != "$(cat "$ref/rc")" ]; then
		echo "  $what: CMD's stderr under profctl:"
		head -n 5 "$dir/stderr" | sed 's/^/    /'
	fi
	timeout 600 "$PROFCTL" report --dump "$dir/trace.pftrace" >"$dir/dump" 2>"$dir/dump.err"
	check "$what: report reads the trace" test $? -eq 0
	check_eq "$what: trace breaks no importer rule" "$(grep -c '^problem' "$dir/dump")" 0
	counts=$(sed -n 's/^profctl: functions: //p' "$dir/profctl.err")
	echo "counts: $what [--funcs '$funcs']: ${counts:-no summary}; $(recorded "$dir") calls recorded"
}

needs_lib() { # program, library soname prefix: does the program load it at start?
	ldd "$(command -v "$1")" 2>/dev/null | grep -q "^[[:space:]]*$2"
}

# ---- zstd CLI ----------------------------------------------------------------
# 2 MiB of mixed text: licenses and numbers, deterministic.
mkdir -p "$WORK/input"
DATA="$WORK/input/data.txt"
for i in $(seq 0 39); do
	cat /usr/share/common-licenses/* 2>/dev/null
	seq $((i * 20000)) $((i * 20000 + 19999))
done | head -c 2097152 >"$DATA"
check_eq "2 MiB of input generated" "$(stat -c %s "$DATA")" 2097152

if command -v zstd >/dev/null; then
	if ! needs_lib zstd libzstd.so; then
		echo "note: this zstd CLI has libzstd linked in statically (no NEEDED libzstd.so)" \
			"and no .symtab: 'libzstd.so*:*' and 'ZSTD_*' only match the libzstd.so.1" \
			"that libprofagent.so loads, which the CLI never calls; objcopy below" \
			"exercises libzstd.so"
	fi
	mkdir -p "$WORK/zstd-ref" "$WORK/zstd-ref-d"
	cp "$DATA" "$WORK/zstd-ref/data.txt"
	plain "$WORK/zstd-ref" /dev/null zstd -f -o data.zst data.txt
	cp "$WORK/zstd-ref/data.zst" "$WORK/zstd-ref-d/data.zst"
	plain "$WORK/zstd-ref-d" /dev/null zstd -d -f -o data.out data.zst
	check "zstd unprofiled: the original comes back" cmp -s "$DATA" "$WORK/zstd-ref-d/data.out"
	i=0
	for funcs in 'libzstd.so*:*' 'ZSTD_*' '*'; do
		i=$((i + 1))
		c="$WORK/zstd-c$i" d="$WORK/zstd-d$i"
		mkdir -p "$c" "$d"
		cp "$DATA" "$c/data.txt"
		profiled "$c" "$funcs" /dev/null zstd -f -o data.zst data.txt
		compare "zstd compress" "$funcs" "$WORK/zstd-ref" "$c"
		check "zstd compress [$funcs]: same compressed bytes" \
			cmp -s "$WORK/zstd-ref/data.zst" "$c/data.zst"
		cp "$WORK/zstd-ref/data.zst" "$d/data.zst"
		profiled "$d" "$funcs" /dev/null zstd -d -f -o data.out data.zst
		compare "zstd decompress" "$funcs" "$WORK/zstd-ref-d" "$d"
		check "zstd decompress [$funcs]: the original comes back" cmp -s "$DATA" "$d/data.out"
		[ "$funcs" = '*' ] && check "zstd [*]: calls recorded" test "$(recorded "$c")" -gt 0
	done
fi

# ---- objcopy: libzstd.so through binutils' BFD ------------------------------------
# Compresses then decompresses the DWARF sections of a -g build of profd.
if command -v objcopy >/dev/null && needs_lib objcopy libzstd.so; then
	cp "$ROOT/$BUILD/profd" "$WORK/input/debug.elf"
	ELF="$WORK/input/debug.elf"
	plain "$WORK/objcopy-ref" /dev/null objcopy --compress-debug-sections=zstd "$ELF" z.elf
	plain "$WORK/objcopy-ref-d" /dev/null objcopy --decompress-debug-sections \
		"$WORK/objcopy-ref/z.elf" d.elf
	objcopy "$ELF" "$WORK/input/copy.elf"
	check "objcopy unprofiled: zstd round trip restores the file" \
		cmp -s "$WORK/input/copy.elf" "$WORK/objcopy-ref-d/d.elf"
	i=0
	for funcs in 'libzstd.so*:*' 'ZSTD_*'; do
		i=$((i + 1))
		c="$WORK/objcopy-c$i" d="$WORK/objcopy-d$i"
		profiled "$c" "$funcs" /dev/null objcopy --compress-debug-sections=zstd "$ELF" z.elf
		compare "objcopy compress" "$funcs" "$WORK/objcopy-ref" "$c"
		check "objcopy compress [$funcs]: same output file" \
			cmp -s "$WORK/objcopy-ref/z.elf" "$c/z.elf"
		check "objcopy compress [$funcs]: libzstd calls recorded" test "$(recorded "$c")" -gt 0
		profiled "$d" "$funcs" /dev/null objcopy --decompress-debug-sections \
			"$WORK/objcopy-ref/z.elf" d.elf
		compare "objcopy decompress" "$funcs" "$WORK/objcopy-ref-d" "$d"
		check "objcopy decompress [$funcs]: the original comes back" \
			cmp -s "$WORK/input/copy.elf" "$d/d.elf"
	done
else
	skip "objcopy missing or not linked against libzstd.so"
fi

# ---- libzstd.so's streaming API, with libzstd's own worker threads ----------------
# tests/data/zstd_stream.c is glue only: the code under test is libzstd.so.
if ${CC:-cc} -std=gnu11 -O2 -o "$WORK/zstd_stream" "$ROOT/tests/data/zstd_stream.c" -lzstd \
	2>"$WORK/zstd_stream.cc"; then
	plain "$WORK/stream-ref" "$DATA" "$WORK/zstd_stream" c
	plain "$WORK/stream-ref-d" "$WORK/stream-ref/stdout" "$WORK/zstd_stream" d
	check "zstd_stream unprofiled: the original comes back" \
		cmp -s "$DATA" "$WORK/stream-ref-d/stdout"
	i=0
	for funcs in 'libzstd.so*:*' 'ZSTD_*'; do
		i=$((i + 1))
		c="$WORK/stream-c$i" d="$WORK/stream-d$i"
		profiled "$c" "$funcs" "$DATA" "$WORK/zstd_stream" c
		compare "zstd_stream compress" "$funcs" "$WORK/stream-ref" "$c"
		check "zstd_stream compress [$funcs]: libzstd calls recorded" \
			test "$(recorded "$c")" -gt 0
		check "zstd_stream compress [$funcs]: slices on a libzstd worker thread too" \
			test "$(awk '$1 == "slice" {print $2}' "$c/dump" | sort -u | wc -l)" -ge 2
		profiled "$d" "$funcs" "$WORK/stream-ref/stdout" "$WORK/zstd_stream" d
		compare "zstd_stream decompress" "$funcs" "$WORK/stream-ref-d" "$d"
		check "zstd_stream decompress [$funcs]: the original comes back" \
			cmp -s "$DATA" "$d/stdout"
	done
else
	skip "cannot build tests/data/zstd_stream.c against libzstd: $(head -n 1 "$WORK/zstd_stream.cc")"
fi

# ---- sqlite3 shell -------------------------------------------------------------
# A fresh file database per run: the pager, journal and unix VFS run too.
# The script ends with an error on purpose: stderr and exit status 1 compared.
if command -v sqlite3 >/dev/null; then
	needs_lib sqlite3 libsqlite3.so ||
		echo "note: sqlite3 does not load libsqlite3.so: the library runs below are vacuous"
	plain "$WORK/sqlite-ref" "$SQL" sqlite3 test.db
	check_eq "sqlite3 unprofiled: the script's deliberate error exits 1" \
		"$(cat "$WORK/sqlite-ref/rc")" 1
	i=0
	for funcs in 'libsqlite3.so*:*' 'sqlite3_*' '*'; do
		i=$((i + 1))
		profiled "$WORK/sqlite$i" "$funcs" "$SQL" sqlite3 test.db
		compare "sqlite3" "$funcs" "$WORK/sqlite-ref" "$WORK/sqlite$i"
		check "sqlite3 [$funcs]: calls recorded" test "$(recorded "$WORK/sqlite$i")" -gt 0
	done
fi

finish
