// Where a passphrase comes from: a terminal prompt, a file, or an external program.
#pragma once

#include <string>

#include "sigilfs/crypt/secure_bytes.h"
#include "sigilfs/status.h"

namespace sigilfs::fuse {

struct PassphraseSource {
  std::string passfile;  // read the first line of this file
  std::string extpass;   // run this command (via /bin/sh -c) and read the first line it prints
};

enum class PromptMode {
  kExisting,  // ask once
  kNew,       // ask twice and require both to match (when asking on a terminal)
};

inline constexpr size_t kMaxPassphraseSize = 4096;

// Reads a passphrase into locked memory. With neither passfile nor extpass it prompts on the
// terminal without echo (`prompt` is the question), or reads one line from standard input when
// that is not a terminal. Trailing "\n" / "\r\n" are removed; an empty passphrase is refused.
Result<crypt::SecureBytes> ReadPassphrase(const PassphraseSource& source, const std::string& prompt,
                                          PromptMode mode);

}  // namespace sigilfs::fuse
