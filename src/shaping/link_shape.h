// LinkShape: what one direction of a link should look like on the wire (rate, one-way delay,
// jitter, loss, MTU), as the plan carries it in SetShape. The shaping backends (backend.h) turn
// it into a qdisc tree.
//
// Plain values; thread-safe to copy and read.
#pragma once

#include "core/units.h"

namespace tb::shaping {

// What a veth carries on this kind of host (research/limits.md): links emulated faster run at host
// speed, unshaped, and buffers are sized for this rate when a link has none.
inline constexpr Rate kHostVethRate{20e9};

struct LinkShape {
  Rate rate;            // 0 = not rate-limited
  Duration delay;       // one-way, added to every packet
  Duration jitter;      // standard deviation of that delay (scenario/model.h LinkProfile)
  double loss_pct = 0;  // 0..100, independent per packet
  int mtu = 1500;       // the interface's MTU; sizes bursts and queues
  // Jitter may reorder: each packet leaves at its own drawn delay. Default false: a packet never
  // leaves before the one sent ahead of it (docs/scenario.md "jitter").
  bool reorder = false;

  friend bool operator==(const LinkShape&, const LinkShape&) = default;
};

}  // namespace tb::shaping
