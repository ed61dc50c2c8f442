// The congestion agent's kick (docs/design-congestion.md §3.3): one 802.1Qbb priority flow
// control frame sent out of an interface through an AF_PACKET socket bound to it inside its
// namespace. A TBF whose rate was restored after a pause does not dequeue until something
// enqueues behind its backlog (its watchdog was armed for the paused rate); the XON frame is that
// something, and it says on the wire what it stands for (tcpdump shows a PFC XON). The peer has
// no handler for EtherType 0x8808 and drops it (a bridge drops 01:80:C2:00:00:01 outright).
// P0 (tests/netns/congestion_levers_test.cc) measured restore + kick resuming every time, a
// restore alone not until a TCP RTO ~180 ms later.
//
// pfc_frame is pure; Kicker owns its socket and is move-only; not thread-safe per object.
#pragma once

#include <array>
#include <cstdint>

#include "core/error.h"
#include "core/unique_fd.h"

namespace tb::congestion {

inline constexpr uint16_t kEthMacControl = 0x8808;  // 802.3 MAC control (PAUSE, PFC)
inline constexpr uint16_t kPfcOpcode = 0x0101;      // 802.1Qbb priority-based flow control
// The MAC control frames' reserved multicast address (802.3 Annex 31B).
inline constexpr std::array<uint8_t, 6> kPfcDest = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01};
// A minimum Ethernet frame without its FCS (the NIC, here the veth, adds none; 60 bytes is what
// a sender hands the kernel for a 64-byte frame).
inline constexpr size_t kPfcFrameBytes = 60;

using PfcFrame = std::array<uint8_t, kPfcFrameBytes>;

// A PFC frame from `src`: the class-enable vector (bit i: priority i's time is valid) and the
// eight pause times in quanta of 512 bit times. All times 0 with every class enabled is XON.
PfcFrame pfc_frame(const std::array<uint8_t, 6>& src, uint8_t class_enable,
                   const std::array<uint16_t, 8>& quanta);
// XON for every priority.
PfcFrame pfc_xon(const std::array<uint8_t, 6>& src);

class Kicker {
 public:
  // A sending socket (protocol 0: it never receives) bound to `ifindex` in the namespace behind
  // `netns_fd`; its frame carries the interface's own MAC address as the source.
  static Result<Kicker> open(int netns_fd, int ifindex);

  Kicker() = default;
  Kicker(Kicker&&) = default;
  Kicker& operator=(Kicker&&) = default;

  // One XON frame out of the interface; the send runs the interface's qdisc in the caller.
  Status kick() const;

 private:
  UniqueFd fd_;
  PfcFrame frame_{};
};

}  // namespace tb::congestion
