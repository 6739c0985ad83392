#!/usr/bin/env bash
# Man pages and bash completion (issue 14): both pages render without groff
# warnings, `make install` puts them and the completion script in place, the
# script loads in bash and completes subcommands and option values.
source "$(dirname "$0")/common.bash"

for page in man/profctl.1 man/profd.8; do
	groff -man -ww -Tutf8 -P-cbou "$ROOT/$page" >"$WORK/page.txt" 2>"$WORK/page.err"
	check_eq "$page renders" "$?" 0
	check_eq "$page: no groff warnings" "$(cat "$WORK/page.err")" ""
	check "$page: has a NAME section" grep -q '^NAME' "$WORK/page.txt"
done
groff -man -Tascii -P-cbou "$ROOT/man/profctl.1" 2>/dev/null | tr -s " \n" " " >"$WORK/profctl.txt"
for cmd in run attach report funcs status stop open snapshot; do
	check "profctl.1 documents $cmd" grep -q "profctl $cmd" "$WORK/profctl.txt"
done
for opt in --sort --top --threads --percentiles --callers --pid --args --retval --args-string-max --auto-args; do
	check "profctl.1 documents $opt" grep -q -- "$opt" "$WORK/profctl.txt"
done

# Every subcommand profctl's usage lists is in the man page, the completion and
# the README, and prints its own usage with --help (exit 0).
cmds=$("$PROFCTL" --help | sed -nE 's/^(usage:)? +profctl ([a-z]+).*/\2/p' | sort -u)
check "profctl --help lists the subcommands (top among them)" grep -qx top <<<"$cmds"
comp_cmds=$(sed -nE 's/^\s*local cmds="(.*)"/\1/p' "$ROOT/completion/profctl.bash" | tr ' ' '\n' | sort -u)
check_eq "completion: the subcommands profctl --help lists" "$comp_cmds" "$cmds"
for cmd in $cmds; do
	check "profctl.1 documents $cmd" grep -q "profctl $cmd" "$WORK/profctl.txt"
	check "README.md shows profctl $cmd" grep -q "profctl $cmd" "$ROOT/README.md"
	"$PROFCTL" "$cmd" --help >"$WORK/help.out" 2>&1
	check_eq "profctl $cmd --help: exit 0" "$?" 0
	check "profctl $cmd --help: its usage" grep -q "^usage: profctl $cmd" "$WORK/help.out"
done
# top's options: in its usage, the man page and the completion alike
for opt in $("$PROFCTL" top --help | grep -oE -- '--[a-z-]+' | sort -u); do
	check "profctl.1 documents top $opt" grep -q -- "$opt" "$WORK/profctl.txt"
	check "completion offers top $opt" bash -c "grep -A4 '^	top)' '$ROOT/completion/profctl.bash' | grep -q -- '$opt'"
done

complete_words() { # words of the command line; the last is completed
	bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _profctl
		printf "%s\n" "${COMPREPLY[@]}"' _ "$ROOT/completion/profctl.bash" "$@"
}
check_eq "completion: profctl re -> report" "$(complete_words profctl re)" report
check_eq "completion: profctl f -> funcs" "$(complete_words profctl f)" funcs
check_eq "completion: report --sort p -> p99" "$(complete_words profctl report --sort p)" p99
check_eq "completion: report --th -> --threads" "$(complete_words profctl report --th)" --threads
check_eq "completion: run --trace-compression z -> zstd" \
	"$(complete_words profctl run --trace-compression z)" zstd
check_eq "completion: profctl to -> top" "$(complete_words profctl to)" top
check_eq "completion: top --sort off -> off-cpu" "$(complete_words profctl top --sort off)" off-cpu
check_eq "completion: top --ba -> --batch" "$(complete_words profctl top --ba)" --batch
check "completion: registers for profctl" \
	bash -c "source '$ROOT/completion/profctl.bash'; complete -p profctl | grep -q _profctl"

make -C "$ROOT" --no-print-directory BUILD="$BUILD" install DESTDIR="$WORK/root" PREFIX=/usr \
	>"$WORK/install.out" 2>&1
check_eq "make install DESTDIR=...: exits 0" "$?" 0
check "install: profctl.1" test -s "$WORK/root/usr/share/man/man1/profctl.1"
check "install: profd.8" test -s "$WORK/root/usr/share/man/man8/profd.8"
check "install: bash completion" test -s "$WORK/root/usr/share/bash-completion/completions/profctl"
if command -v man >/dev/null; then
	MANWIDTH=80 man -l "$WORK/root/usr/share/man/man1/profctl.1" >/dev/null 2>"$WORK/man.err"
	check_eq "man -l renders the installed page" "$?" 0
else
	skip "man -l: no man(1) here"
fi
finish
