// The FUSE-over-io_uring ABI (FUSE protocol 7.42, Linux 6.14), which Debian 12's kernel headers
// (Linux 6.1, protocol 7.38) lack. Copied in meaning from the kernel's include/uapi/linux/fuse.h;
// every definition is guarded so newer headers win.
#pragma once

#include <linux/fuse.h>

#include <cstdint>

#ifndef FUSE_OVER_IO_URING
// INIT flag (bit 41: the ninth bit of flags2): the kernel offers requests over io_uring, and the
// server's reply accepts them.
#define FUSE_OVER_IO_URING (1ULL << 41)

#define FUSE_URING_IN_OUT_HEADER_SZ 128
#define FUSE_URING_OP_IN_OUT_SZ 128

// Part of fuse_uring_req_header: what the kernel says of a request, and the server of its reply.
struct fuse_uring_ent_in_out {  // NOLINT(readability-identifier-naming): the kernel's name
  uint64_t flags;
  uint64_t commit_id;   // given with a request; named by the command that commits its reply
  uint32_t payload_sz;  // bytes in the entry's payload buffer (the request's, then the reply's)
  uint32_t padding;
  uint64_t reserved;
};

// An entry's header buffer.
struct fuse_uring_req_header {  // NOLINT(readability-identifier-naming): the kernel's name
  char in_out[FUSE_URING_IN_OUT_HEADER_SZ];  // fuse_in_header in, fuse_out_header back
  char op_in[FUSE_URING_OP_IN_OUT_SZ];       // the request's first argument: its op's header
  struct fuse_uring_ent_in_out ring_ent_in_out;
};

// IORING_OP_URING_CMD commands on /dev/fuse (sqe->cmd_op).
enum fuse_uring_cmd {
  FUSE_IO_URING_CMD_INVALID = 0,
  FUSE_IO_URING_CMD_REGISTER = 1,          // give an entry's buffers, wait for a request
  FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,  // send a reply, wait for the next request
};

// The command's own data, in the SQE's 80-byte command area (128-byte SQEs).
struct fuse_uring_cmd_req {  // NOLINT(readability-identifier-naming): the kernel's name
  uint64_t flags;
  uint64_t commit_id;  // the reply's request (COMMIT_AND_FETCH)
  uint16_t qid;        // the queue: one per possible CPU
  uint8_t padding[6];
};
#endif
