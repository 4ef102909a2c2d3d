#!/usr/bin/env bash
# Writes the command reference in docs/reference/ from the same sources as the manual pages:
# sigilfs.md from the program's own help (make-manpage.sh --markdown), pam_sigilfs.md from
# fuse/man/pam_sigilfs.8. The files are committed so that they read on the forge; the test
# reference_docs_current fails when they differ from what this writes.
#   make-reference.sh SIGILFS_BINARY            rewrite docs/reference/
#   make-reference.sh --check SIGILFS_BINARY    compare only: exit 1 with a diff if out of date
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [[ ${1:-} == --check ]]; then
  check=1
  shift
fi
if [[ $# -ne 1 ]]; then
  echo "usage: $0 [--check] SIGILFS_BINARY" >&2
  exit 2
fi
given=$1
bin=$(realpath "$1")
dest=$top/docs/reference

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The first line of each file: where it comes from and how to refresh it.
# (No double hyphen: a comment may not hold one.)
note() {
  echo "<!-- Written by scripts/make-reference.sh from $1. Do not edit it:"
  echo "     change the source, then run the script (docs/hacking.md, \"The command reference\"). -->"
  echo
}

{
  note "the program's help (make-manpage.sh)"
  "$top/scripts/make-manpage.sh" --markdown "$bin" "$work/page.md"
  cat "$work/page.md"
} > "$work/sigilfs.md"
rm "$work/page.md"
{
  note "fuse/man/pam_sigilfs.8"
  awk -v linked="sigilfs(1)=sigilfs.md" -f "$top/scripts/roff-to-markdown.awk" \
    "$top/fuse/man/pam_sigilfs.8"
} > "$work/pam_sigilfs.md"

if ((check)); then
  stale=0
  for f in sigilfs.md pam_sigilfs.md; do
    if [[ ! -f $dest/$f ]]; then
      echo "docs/reference/$f is missing"
      stale=1
    elif ! diff -u --label "docs/reference/$f (committed)" --label "docs/reference/$f (current)" \
      "$dest/$f" "$work/$f"; then
      stale=1
    fi
  done
  if ((stale)); then
    echo
    echo "docs/reference/ is out of date with the program's help or the manual pages."
    echo "Refresh it and commit the result:"
    echo "  scripts/make-reference.sh $given"
    exit 1
  fi
  echo "docs/reference/ is current"
  exit 0
fi
mkdir -p "$dest"
cp "$work"/*.md "$dest"/
