// Replies refused on purpose (SIGILFS_FAULT_REPLIES), counted per kind of request.
#include "reply_faults.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "log.h"

namespace sigilfs::fuse {
namespace {

unsigned g_every = 0;  // set before the session's threads start, then only read
constexpr size_t kOpcodes = 64;
std::atomic<uint64_t> g_replies[kOpcodes];

// The request this thread serves (libfuse reads a request and replies to it on one thread; a
// ring thread serves the request its entry holds).
thread_local uint64_t t_unique = 0;
thread_local uint32_t t_opcode = 0;

}  // namespace

bool ReplyFaultsFromEnvironment() {
  const char* every = std::getenv("SIGILFS_FAULT_REPLIES");  // NOLINT(concurrency-mt-unsafe)
  g_every = 0;
  if (every == nullptr) return false;
  char* end = nullptr;
  const unsigned long n = std::strtoul(every, &end, 10);
  if (end != every && *end == '\0' && n > 0 && n < 1000000) g_every = static_cast<unsigned>(n);
  return g_every != 0;
}

void NoteRequestForReplyFaults(const void* request, size_t n) {
  t_unique = 0;
  t_opcode = 0;
  if (g_every == 0 || n < sizeof(fuse_in_header)) return;
  fuse_in_header in;
  std::memcpy(&in, request, sizeof in);
  t_unique = in.unique;
  t_opcode = in.opcode;
}

bool RefuseReply(const iovec* iov, int count, fuse_out_header* failed) {
  if (g_every == 0 || count < 1 || iov[0].iov_len < sizeof(fuse_out_header)) return false;
  fuse_out_header out;
  std::memcpy(&out, iov[0].iov_base, sizeof out);
  // INIT's reply sets the connection up: never refused.
  if (out.unique != t_unique || t_opcode == FUSE_INIT || t_opcode >= kOpcodes) return false;
  const uint64_t n = g_replies[t_opcode].fetch_add(1, std::memory_order_relaxed) + 1;
  if (n % g_every != 0) return false;
  if (n == g_every) Log("fault injection: refusing replies to opcode %u", t_opcode);
  *failed = {sizeof(fuse_out_header), -EIO, out.unique};
  return true;
}

}  // namespace sigilfs::fuse
