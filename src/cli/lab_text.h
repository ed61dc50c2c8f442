// What `up` and `down` print on stdout once done; `run` prints the same when it brings a lab
// up or (--down) takes it down. Not thread-safe (stdio).
#pragma once

#include "lab/down.h"
#include "lab/up.h"

namespace tb::cli {

void print_up(const lab::UpReport& r);
void print_down(const lab::DownReport& r);

}  // namespace tb::cli
