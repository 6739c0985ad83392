# bash completion for profctl: subcommands, their options and option values.
_profctl()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	local cmds="run attach detach report funcs status stop open snapshot export top"
	local profile="--funcs --freq -o --duration --call-graph --mmap-pages --buffer-size
		--min-duration --max-depth --trace-compression --ring --sched --no-inherit
		--args --retval --args-string-max --auto-args -v"
	local i cmd=

	for ((i = 1; i < COMP_CWORD; i++)); do
		[ "${COMP_WORDS[i]}" = -- ] && { COMPREPLY=($(compgen -c -- "$cur")); return; }
		[ -z "$cmd" ] && [ "${COMP_WORDS[i]#-}" = "${COMP_WORDS[i]}" ] && cmd=${COMP_WORDS[i]}
	done
	if [ -z "$cmd" ]; then
		COMPREPLY=($(compgen -W "$cmds -h --help" -- "$cur"))
		return
	fi
	case $prev in
	--sort)
		if [ "$cmd" = top ]; then
			COMPREPLY=($(compgen -W "total calls self avg p99 off-cpu" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "calls total self avg p99" -- "$cur"))
		fi
		return ;;
	--call-graph) COMPREPLY=($(compgen -W "fp dwarf auto" -- "$cur")); return ;;
	--trace-compression) COMPREPLY=($(compgen -W "deflate zstd none" -- "$cur")); return ;;
	--sched) COMPREPLY=($(compgen -W "on off" -- "$cur")); return ;;
	--format) COMPREPLY=($(compgen -W "pprof chrome folded" -- "$cur")); return ;;
	--pid) COMPREPLY=($(compgen -W "$(ls /proc | grep -E '^[0-9]+$')" -- "$cur")); return ;;
	-o) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--funcs | --freq | --duration | --mmap-pages | --buffer-size | --min-duration | \
		--max-depth | --args | --retval | --args-string-max | --ring | --top | --callers | --port | --timeout | --origin | \
		--interval | -n | --iterations | --session) return ;;
	esac
	case $cmd in
	run) COMPREPLY=($(compgen -W "$profile --" -- "$cur")) ;;
	attach) COMPREPLY=($(compgen -W "$profile --children" -- "$cur")) ;;
	report)
		if [ "${cur#-}" != "$cur" ]; then
			COMPREPLY=($(compgen -W "--dump --sort --top --threads --percentiles --funcs --callers" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi ;;
	funcs) COMPREPLY=($(compgen -W "--pid --" -- "$cur")) ;;
	open)
		if [ "${cur#-}" != "$cur" ]; then
			COMPREPLY=($(compgen -W "--port --no-browser --timeout --origin -v" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi ;;
	snapshot) COMPREPLY=($(compgen -W "-o" -- "$cur")) ;;
	top)
		if [ "${cur#-}" != "$cur" ]; then
			COMPREPLY=($(compgen -W "--funcs --interval --batch -n --iterations --sort --totals -o --freq --sched --session -v --help" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$(ls /proc | grep -E '^[0-9]+$')" -- "$cur"))
		fi ;;
	export)
		if [ "${cur#-}" != "$cur" ]; then
			COMPREPLY=($(compgen -W "--format -o --with-calls" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi ;;
	esac
}
complete -o filenames -F _profctl profctl
