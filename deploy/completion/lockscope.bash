# bash completion for lockscope. The commands and each command's options come from
# `lockscope __complete [COMMAND]`: the table the CLI checks its options against.
_lockscope()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd="" w i
	local cmds
	cmds=$(lockscope __complete 2>/dev/null) || return

	case $prev in
	-p|--pid)
		COMPREPLY=($(compgen -W "$(ps -e -o pid= 2>/dev/null)" -- "$cur"))
		return ;;
	-w|--window)
		COMPREPLY=($(compgen -W "10s 1m 5m all" -- "$cur"))
		return ;;
	-F|--format)
		COMPREPLY=($(compgen -W "json prometheus pprof folded" -- "$cur"))
		return ;;
	--kind)
		COMPREPLY=($(compgen -W "user kernel all" -- "$cur"))
		return ;;
	--profile)
		COMPREPLY=($(compgen -W "block mutex" -- "$cur"))
		return ;;
	-k|--key)
		COMPREPLY=($(compgen -W "wait_total contended wait_max avg_wait wait_min" -- "$cur"))
		return ;;
	-S|--socket|--output)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	esac
	# the command: the first word that names one
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if [[ " ${cmds//$'\n'/ } " == *" $w "* ]]; then
			cmd=$w
			break
		fi
	done
	if [[ -z $cmd ]]; then
		COMPREPLY=($(compgen -W "$cmds" -- "$cur"))
	else
		COMPREPLY=($(compgen -W "$(lockscope __complete "$cmd" 2>/dev/null)" -- "$cur"))
	fi
}
complete -F _lockscope lockscope
