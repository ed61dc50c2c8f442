// The idle wake's counting program (congestion/wake.h), instruction by instruction: the kernel's
// verifier takes it (tests/netns/congestion_agent_test.cc loads and runs it); here, that it
// counts into the slot asked for and lets every packet go on.
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#include "congestion/wake.h"

namespace tb::congestion {
namespace {

TEST(CongestionWakeTest, TheProgramAddsSkbLenToItsSlotAndLetsThePacketGoOn) {
  const auto p = count_program(7, 24);
  ASSERT_EQ(p.size(), 6u);
  // r2 = skb->len: a 32-bit load from offset 0 of the context (struct __sk_buff's len).
  EXPECT_EQ(p[0].code, BPF_LDX | BPF_MEM | BPF_W);
  EXPECT_EQ(p[0].dst_reg, 2);
  EXPECT_EQ(p[0].src_reg, 1);
  EXPECT_EQ(p[0].off, 0);
  // r1 = the address of byte 24 of map 7's value: a wide load whose second half is the offset.
  EXPECT_EQ(p[1].code, BPF_LD | BPF_DW | BPF_IMM);
  EXPECT_EQ(p[1].dst_reg, 1);
  EXPECT_EQ(p[1].src_reg, BPF_PSEUDO_MAP_VALUE);
  EXPECT_EQ(p[1].imm, 7);
  EXPECT_EQ(p[2].code, 0);
  EXPECT_EQ(p[2].imm, 24);
  // An atomic 64-bit add of r2 at r1.
  EXPECT_EQ(p[3].code, BPF_STX | BPF_ATOMIC | BPF_DW);
  EXPECT_EQ(p[3].dst_reg, 1);
  EXPECT_EQ(p[3].src_reg, 2);
  EXPECT_EQ(p[3].imm, BPF_ADD);
  // return TC_ACT_UNSPEC.
  EXPECT_EQ(p[4].code, BPF_ALU64 | BPF_MOV | BPF_K);
  EXPECT_EQ(p[4].dst_reg, 0);
  EXPECT_EQ(p[4].imm, TC_ACT_UNSPEC);
  EXPECT_EQ(p[5].code, BPF_JMP | BPF_EXIT);
}

TEST(CongestionWakeTest, NoPortIsAnError) {
  EXPECT_FALSE(ByteCounters::create(0).has_value());
}

}  // namespace
}  // namespace tb::congestion
