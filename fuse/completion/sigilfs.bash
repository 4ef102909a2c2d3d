# bash completion for sigilfs: commands, subcommands and options read from the program's own
# --help (so they never drift from it), paths everywhere else.
_sigilfs_help() {
  "${_sigilfs_bin:-sigilfs}" "$@" --help 2>/dev/null
}

# The subcommand names listed in the help of `sigilfs WORDS...`.
_sigilfs_subcommands() {
  _sigilfs_help "$@" | awk '/^Subcommands:/ {s = 1; next} s && /^  [a-z]/ {print $1} s && /^$/ {s = 0}'
}

# The options (-x, --long) that the help of `sigilfs WORDS...` lists.
_sigilfs_options() {
  _sigilfs_help "$@" | awk '/^Options:/ {s = 1; next} /^[A-Z][a-z]*:/ {s = 0}
    s && /^  -/ {n = split($1, names, ","); for (i = 1; i <= n; i++) print names[i]}'
}

_sigilfs() {
  local cur=${COMP_WORDS[COMP_CWORD]} _sigilfs_bin=${COMP_WORDS[0]}
  # The command words typed so far: each must be a subcommand of the ones before it.
  local path=() word i
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    [[ $word == -* ]] && continue
    if _sigilfs_subcommands "${path[@]}" | grep -qx -- "$word"; then
      path+=("$word")
    else
      break
    fi
  done
  local subs
  subs=$(_sigilfs_subcommands "${path[@]}")
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_sigilfs_options "${path[@]}")" -- "$cur")
  elif [[ -n $subs && $i -eq $COMP_CWORD ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$subs" -- "$cur")
  elif declare -F _filedir >/dev/null; then
    _filedir
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -F _sigilfs sigilfs
