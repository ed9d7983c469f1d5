# bash completion for leakref (zsh: autoload -U bashcompinit && bashcompinit,
# then source this file). Subcommands and options are read from leakref's
# own help, so they never fall out of date.
_leakref_words() {  # _leakref_words HELP-ARGS...: the long options and subcommands
  "${LEAKREF:-leakref}" help "$@" 2>/dev/null | awk '
    /^Subcommands:/ { subs = 1; next }
    subs && /^  [a-z]/ { print $1; next }
    /^[^ ]/ { subs = 0 }
    /^ +-/ {  # an option line: its names, not the words of its description
        o = $1; sub(/^-[A-Za-z],/, "", o)  # "-I,--include-dir"
        if (o ~ /^--[a-z]/) { sub(/[,{].*/, "", o); print o }
      }' |
    sort -u | tr '\n' ' '
}

_leakref() {
  local cur=${COMP_WORDS[COMP_CWORD]} path=() i w
  # The subcommand path typed so far (kernel's, types' and batch's second
  # level too);
  # option values are skipped by leakref's own help, not guessed here.
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    case "$w" in
      -*) ;;
      *)
        if [ ${#path[@]} -eq 0 ] && [[ " $(_leakref_words) " == *" $w "* ]]; then
          path=("$w")
        elif [ ${#path[@]} -eq 1 ] && [[ " kernel types batch " == *" ${path[0]} "* ]] &&
          [[ " $(_leakref_words "${path[0]}") " == *" $w "* ]]; then
          path+=("$w")
        fi ;;
    esac
  done
  if [ ${#path[@]} -eq 0 ]; then
    # leakref's help lists --help and --version already: only "help" is added.
    COMPREPLY=($(compgen -W "$(_leakref_words) help" -- "$cur"))
  elif [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$(_leakref_words "${path[@]}")" -- "$cur"))
  elif [ ${#path[@]} -eq 1 ] && [[ " kernel types batch " == *" ${path[0]} "* ]]; then
    COMPREPLY=($(compgen -W "$(_leakref_words "${path[0]}" | tr ' ' '\n' | grep -v '^--')" -- "$cur"))
    [ ${#COMPREPLY[@]} -gt 0 ] || COMPREPLY=($(compgen -f -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))  # cores, traces, profiles
  fi
}
complete -o filenames -F _leakref leakref
