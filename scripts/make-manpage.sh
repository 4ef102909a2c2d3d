#!/usr/bin/env bash
# Writes sigilfs(1) from the program's own help: every command and subcommand with all its
# options, so the manual cannot drift from the CLI.   make-manpage.sh SIGILFS_BINARY OUT.1
# With --markdown, the same page in Markdown (docs/reference/sigilfs.md, which
# make-reference.sh writes): the prose below through roff-to-markdown.awk, each command's help
# through help-to-markdown.awk.   make-manpage.sh --markdown SIGILFS_BINARY OUT.md
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
markdown=0
if [[ ${1:-} == --markdown ]]; then
  markdown=1
  shift
fi
bin=$1
out=$2
version=$("$bin" --version | awk '{print $2}')

# roff-safe text: backslashes escaped, a leading dot or quote neutralized.
escape() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

# The subcommand names listed in the help of `sigilfs WORDS...`.
subcommands() {
  "$bin" "$@" --help | awk '/^Subcommands:/ {s = 1; next} s && /^  [a-z]/ {print $1} s && /^$/ {s = 0}'
}

# One section per command, depth first: its help verbatim (in Markdown: as lists, a command's
# subcommands a level below it).
section() {
  local name="sigilfs${*:+ $*}"
  if ((markdown)); then
    echo
    "$bin" "$@" --help | awk -v name="$name" -v level=$(($# < 2 ? 3 : $# + 2)) \
      -f "$here/help-to-markdown.awk"
  else
    echo ".SS \"$name\""
    echo ".nf"
    "$bin" "$@" --help | escape
    echo ".fi"
  fi
  local sub
  for sub in $(subcommands "$@"); do section "$@" "$sub"; done
}

# The page before the commands.
page_head() {
  echo ".TH SIGILFS 1 \"$(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y-%m-%d)\" \"sigilfs $version\" \"User Commands\""
  echo ".SH NAME"
  echo "sigilfs \\- an encrypted stacked filesystem with encrypted verity"
  echo ".SH SYNOPSIS"
  echo ".B sigilfs"
  echo ".I COMMAND"
  echo "[\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR]"
  echo ".br"
  echo ".B sigilfs"
  echo ".I CIPHERDIR MOUNTPOINT"
  echo "\\fB-o\\fR \\fIOPTIONS\\fR (as mount.fuse3(8) runs it for an /etc/fstab line of type fuse.sigilfs)"
  echo ".SH DESCRIPTION"
  echo "sigilfs keeps a directory tree encrypted in another directory (the cipher directory, or"
  echo "vault) on any POSIX filesystem and shows its plaintext through a FUSE mount, or copies it"
  echo "in and out without one. Names, contents, symlink targets and extended attributes are"
  echo "encrypted and authenticated; a sealed file is verified on every read against an"
  echo "fs-verity Merkle tree, and its digest is the one fsverity(1) computes."
  echo ".PP"
  echo "Every command and its options follow, as \\fBsigilfs\\fR \\fICOMMAND\\fR \\fB--help\\fR prints them."
  echo ".SH COMMANDS"
}

# The page after the commands.
page_foot() {
  echo ".SH EXIT STATUS"
  echo "0 on success; 1 on a failure or, for fsck and export, damage found; 2 on a usage error"
  echo "(and for fsck, a vault that does not unlock)."
  echo ".SH FILES"
  echo ".TP"
  echo ".I CIPHERDIR/sigilfs.conf"
  echo "the vault's parameters and its master key, wrapped by the passphrase"
  echo ".TP"
  echo ".I /etc/fstab"
  echo "\\fICIPHERDIR MOUNTPOINT\\fR fuse.sigilfs passfile=\\fIFILE\\fR[,\\fIOPTIONS\\fR] 0 0"
  echo ".SH SEE ALSO"
  echo "pam_sigilfs(8), fusermount3(1), mount.fuse3(8), fsverity(1)"
}

if ((markdown)); then
  to_markdown() { awk -v linked="pam_sigilfs(8)=pam_sigilfs.md" -f "$here/roff-to-markdown.awk"; }
  {
    page_head | to_markdown
    section
    echo
    page_foot | to_markdown
  } > "$out"
else
  {
    page_head
    section
    page_foot
  } > "$out"
fi
