// Internal: one regular file of the reverse view, its cipher bytes computed from the plain file on
// read (header, then units sealed under synthetic nonces).
#pragma once

#include <memory>

#include "sigilfs/core/backing_file.h"
#include "sigilfs/core/format.h"
#include "sigilfs/core/reverse_keys.h"
#include "sigilfs/crypt/secure_bytes.h"

namespace sigilfs::core {

// The units of a view's files that reads took only a part of, kept per version of a file (its
// header nonce and size, which fix every unit's key, place and length) and shared by all opens
// of that version, so that reads of the other parts, by any open, get the same seal. A
// version's units go with its last open. Thread-safety: safe for concurrent access.
class ReverseKeptUnits;
std::shared_ptr<ReverseKeptUnits> NewReverseKeptUnits();

// `plain`: the plain file, open for reading; `plain_size`: its size when opened (the view's
// length for as long as this is open); `nonce`: its header nonce; `content_key`: the vault's;
// `kept`: the view's kept units. The file keeps `keys` and `kept` (it may outlive the view it
// was opened from).
Result<std::unique_ptr<BackingFile>> NewReverseFile(std::unique_ptr<BackingFile> plain,
                                                    uint64_t plain_size, const FileNonce& nonce,
                                                    crypt::AeadAlgorithm cipher,
                                                    ByteSpan content_key,
                                                    std::shared_ptr<const ReverseKeys> keys,
                                                    const std::shared_ptr<ReverseKeptUnits>& kept);

}  // namespace sigilfs::core
