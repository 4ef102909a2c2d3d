// The daemon's log (daemon/log.h), by the name the mount's older files include it.
#pragma once

#include "../daemon/log.h"
