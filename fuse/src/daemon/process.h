// What a daemon does to its own process: keeps secrets out of core dumps, and sets up signals.
#pragma once

// Included by the command line too, which builds without libfuse's headers.
struct fuse_session;

namespace sigilfs::fuse {

// No core dump of this process, and no reading of its memory by other processes of the same
// user (PR_SET_DUMPABLE). Called before the passphrase is read: the keys themselves are in
// locked, undumpable memory, but OpenSSL keeps each file's AES key schedule (which begins with
// the key) in its own heap, and the plaintext passes through ordinary buffers.
void KeepSecretsOutOfDumps();

// The session's signals: SIGINT, SIGTERM and SIGHUP end its loop (a clean unmount), and the
// signals whose default action would end the daemon on the spot, with the dirty pages of open
// files never written back, are ignored. False if libfuse could not install its handlers.
bool SetUpSignals(fuse_session* se);

}  // namespace sigilfs::fuse
