// Internal: one regular file of the reverse view, its cipher bytes computed from the plain file on
// read (header, then units sealed under synthetic nonces).
#pragma once

#include <memory>

#include "sigilfs/core/backing_file.h"
#include "sigilfs/core/format.h"
#include "sigilfs/core/reverse_keys.h"
#include "sigilfs/crypt/secure_bytes.h"

namespace sigilfs::core {

// `plain`: the plain file, open for reading; `plain_size`: its size when opened (the view's
// length for as long as this is open); `nonce`: its header nonce; `content_key`: the vault's.
// The file keeps `keys` (it may outlive the view it was opened from).
Result<std::unique_ptr<BackingFile>> NewReverseFile(std::unique_ptr<BackingFile> plain,
                                                    uint64_t plain_size, const FileNonce& nonce,
                                                    crypt::AeadAlgorithm cipher,
                                                    ByteSpan content_key,
                                                    std::shared_ptr<const ReverseKeys> keys);

}  // namespace sigilfs::core
