# A home login through PAM with the installed pam_sigilfs.so, shared by install_test.sh and
# from_source_test.sh (sourced after keep.sh): a throw-away account whose home is set up in a
# vault by the installed `sigilfs home setup`, logged in with pamtester through a throw-away
# service made only of Debian's common-* stacks, as login does; its home must then be a
# fuse.sigilfs mount whose files are ciphertext in the vault, and closing the session must
# unmount it. After the module is gone (package removed, install.sh --uninstall), the same login
# must still work and mount nothing. put_back_login takes everything out again, also after a run
# that was killed (what it made is noted in $saved first).
# shellcheck shell=bash
: "${saved:?pam_login.sh: source keep.sh first}"

login_user=sgtpkglogin
login_home=/home/$login_user
login_vaults=/home/.sigilfs
login_vault=$login_vaults/$login_user
login_service=/etc/pam.d/sigilfs-login-test
login_password="package login $$"
# Serializes changes to /dev/fuse's ACL with the C++ tests (test_support/fuse_access.h).
login_fuse_lock=/tmp/sigilfs-test-dev-fuse.lock

# Lets the account open /dev/fuse where it is not open to everyone (a container's 0600), by an
# ACL entry for its uid alone, noted in $saved so that put_back_login removes it.
grant_fuse() {
  [[ $(($(stat -c '0%a' /dev/fuse) & 6)) == 6 ]] && return 0
  command -v setfacl >/dev/null || fail "/dev/fuse is not open to users and there is no setfacl"
  echo "$1" >"$saved/login-fuse-acl"  # the uid: a killed run may have deleted the account
  (flock 8 && setfacl -m "u:$1:rw" /dev/fuse) 8>"$login_fuse_lock" || fail "granting /dev/fuse"
}
ungrant_fuse() {
  [[ -e $saved/login-fuse-acl ]] || return 0
  local uid
  uid=$(cat "$saved/login-fuse-acl")
  (
    flock 8
    [[ -z $uid ]] || setfacl -x "u:$uid" /dev/fuse 2>/dev/null || true
    # The last named entry gone, the ACL goes too (setfacl -x leaves an empty mask behind).
    getfacl -cn /dev/fuse 2>/dev/null | grep -qE '^(user|group):[^:]' || setfacl -b /dev/fuse
  ) 8>"$login_fuse_lock"
  rm -f "$saved/login-fuse-acl"
}

# Takes out what pam_login_check made: the service, the mount on the home, the account's
# processes, the vault, the account with its home, the session count and the /dev/fuse entry.
put_back_login() {
  [[ -e $saved/login ]] || return 0
  rm -f "$login_service"
  local uid
  uid=$(id -u "$login_user" 2>/dev/null) || uid=
  if [[ -n $uid ]]; then
    { findmnt -rn -o TARGET | grep -E "^$login_home(/|$)" || true; } | sort -r |
      while IFS= read -r point; do umount -l "$point" || true; done
    pkill -KILL -U "$uid" 2>/dev/null || true
    userdel -r -f "$login_user" >/dev/null 2>&1 || echo "warning: userdel $login_user failed" >&2
    rm -f "/run/sigilfs/$uid"
  fi
  ungrant_fuse
  rm -rf "$login_vault" "$login_home"
  find "$login_vaults" -maxdepth 1 -name ".$login_user.*" -exec rm -rf {} + 2>/dev/null || true
  if [[ -e $saved/login-made-vaults ]]; then rmdir "$login_vaults" 2>/dev/null || true; fi
  rm -f "$saved/login" "$saved/login-made-vaults"
}

# pam-auth-update --enable sigilfs: the profile found, pam_sigilfs.so in Debian's stacks.
enable_pam_profile() {
  local stack
  DEBIAN_FRONTEND=noninteractive quietly pam-auth-update --package --enable sigilfs
  for stack in auth session password; do
    grep -qE '^[^#]*pam_sigilfs\.so' "/etc/pam.d/common-$stack" ||
      fail "pam-auth-update --enable sigilfs did not put pam_sigilfs.so into /etc/pam.d/common-$stack"
  done
}

home_is_mounted() {
  findmnt -n -o FSTYPE --mountpoint "$login_home" >/dev/null 2>&1
}

# pam_login_check SIGILFS: with pam_sigilfs enabled in Debian's stacks (pam-auth-update), a login
# mounts the account's home, written to as ciphertext in its vault, and the last close unmounts.
pam_login_check() {
  local sigilfs=$1
  command -v pamtester >/dev/null || fail "no pamtester (scripts/install-deps.sh installs it)"
  getent passwd "$login_user" >/dev/null && fail "an account $login_user is there already"
  [[ -e $login_home || -e $login_vault ]] && fail "$login_home or $login_vault is there already"
  touch "$saved/login"
  [[ -e $login_vaults ]] || touch "$saved/login-made-vaults"
  printf '@include common-auth\n@include common-account\n@include common-session\n' >"$login_service"
  quietly useradd -m -d "$login_home" -s /bin/sh "$login_user"
  local uid gid
  uid=$(id -u "$login_user")
  gid=$(id -g "$login_user")
  echo "$login_user:$login_password" | quietly chpasswd
  grant_fuse "$uid"
  # The home moves into the vault PAM looks for (/home/.sigilfs/USER), wrapped with the login
  # password, by the installed program.
  echo "$login_password" | quietly env SIGILFS_TEST_KDF=1 "$sigilfs" home setup "$login_user" \
    --migrate --kdf test
  [[ -f $login_vault/sigilfs.conf ]] || fail "sigilfs home setup made no vault in $login_vault"

  echo "$login_password" | quietly pamtester -v "${login_service##*/}" "$login_user" \
    authenticate open_session
  [[ $(findmnt -n -o FSTYPE --mountpoint "$login_home") == fuse.sigilfs ]] ||
    fail "the login did not mount $login_home as fuse.sigilfs: $(findmnt --mountpoint "$login_home" || true)"
  local marker="plain text of a package login" before added
  before=$(find "$login_vault" -type f | sort)
  setpriv --reuid="$uid" --regid="$gid" --init-groups -- sh -c \
    "[ -r $login_home/.profile ] && echo '$marker' >$login_home/hello && cat $login_home/hello" |
    grep -qxF "$marker" || fail "the account could not read its home and write to it"
  added=$(comm -13 <(echo "$before") <(find "$login_vault" -type f | sort))
  [[ -n $added ]] || fail "writing to the home added no file to the vault"
  if grep -lF "$marker" "$login_vault" -r; then fail "plain text in the vault"; fi
  local f
  while IFS= read -r f; do
    [[ $(stat -c %U "$f") == "$login_user" ]] || fail "the vault's new file $f is not the account's"
  done <<<"$added"

  quietly pamtester -v "${login_service##*/}" "$login_user" close_session
  if home_is_mounted; then fail "$login_home is still mounted after the session closed"; fi
  [[ -z $(ls -A "$login_home") ]] || fail "$login_home is not the empty directory after the session"
}

# After the module is gone: the stacks do not name it, and the login still works, mounting nothing.
pam_login_without_module() {
  if grep -HE '^[^#]*pam_sigilfs\.so' /etc/pam.d/*; then fail "PAM still names pam_sigilfs.so"; fi
  echo "$login_password" | quietly pamtester -v "${login_service##*/}" "$login_user" \
    authenticate open_session close_session
  if home_is_mounted; then fail "$login_home was mounted without the module"; fi
}
