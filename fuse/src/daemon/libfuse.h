// The libfuse low-level API, at the one version every part of the daemons is written against.
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
