// The NFQUEUE rules' nf_tables batch (netlink/nft_message.h, stage/netfilter_rules.h
// queue_rules_batch), checked byte by byte without root against the batch iptables-nft sent for
// the same rules.
#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <cstring>
#include <string>
#include <vector>

#include "netlink/nft_message.h"
#include "stage/calibration.h"
#include "stage/netfilter_rules.h"

namespace tb::netlink {
namespace {

// What iptables-restore v1.8.9 (nf_tables) sent, on Linux 6.18, into a fresh namespace (so it
// made table ip mangle and both chains), captured with
//   ip netns add h18-cap
//   ip netns exec h18-cap strace -f -e trace=sendmsg -e write=3 -s 65535
//       iptables-restore -w 5 --noflush < in.txt
// (fd 3 is its nf_tables socket; the hex dump of its one batch sendmsg, sequence numbers 1-10)
// with in.txt, queue_restore_script's text for the rules in kRules below:
//   *mangle
//   -A PREROUTING -i e0 -m comment --comment "tb-x link=a-b queue" -j NFQUEUE --queue-num 17
//   -A POSTROUTING -o e0 -m comment --comment "tb-x link=a-b queue" -j NFQUEUE --queue-num 18
//   -A POSTROUTING -o lo -m mark --mark 0x74620001 -m comment --comment
//      "tb-delayd release probe" -j NFQUEUE --queue-num 65535
//   COMMIT
constexpr const char* kCaptured =
    "1c0000001000010001000000000000000000000a080001000000000120000000000a01040200000000000000020000"
    "00"
    "0b0001006d616e676c65000058000000030a01040300000000000000020000000b0001006d616e676c6500000f0003"
    "00"
    "505245524f5554494e47000014000480080001000000000008000200ffffff6a08000500000000010b00070066696c"
    "74"
    "6572000024020000060a010c0400000000000000020000000b0001006d616e676c6500000f000200505245524f5554"
    "49"
    "4e470000e001048024000180090001006d6574610000000014000280080002000000000608000100000000012c0001"
    "80"
    "08000100636d700020000280080001000000000108000200000000000c00038007000100653000002c0101800a0001"
    "00"
    "6d617463680000001c0102800c000100636f6d6d656e740008000200000000000401030074622d78206c696e6b3d61"
    "2d"
    "6220717565756500000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "000000002c0001800c000100636f756e746572001c0002800c00010000000000000000000c00020000000000000000"
    "00"
    "340001800b0001007461726765740000240002800c0001004e4651554555450008000200000000030c000300110001"
    "00"
    "00000000140005800800010000000000080002000000000020000000000a01040500000000000000020000000b0001"
    "00"
    "6d616e676c65000058000000030a01040600000000000000020000000b0001006d616e676c65000010000300504f53"
    "54"
    "524f5554494e470014000480080001000000000408000200ffffff6a08000500000000010b00070066696c74657200"
    "00"
    "24020000060a010c0700000000000000020000000b0001006d616e676c65000010000200504f5354524f5554494e47"
    "00"
    "e001048024000180090001006d6574610000000014000280080002000000000708000100000000012c000180080001"
    "00"
    "636d700020000280080001000000000108000200000000000c00038007000100653000002c0101800a0001006d6174"
    "63"
    "680000001c0102800c000100636f6d6d656e740008000200000000000401030074622d78206c696e6b3d612d622071"
    "75"
    "6575650000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "2c0001800c000100636f756e746572001c0002800c00010000000000000000000c0002000000000000000000340001"
    "80"
    "0b0001007461726765740000240002800c0001004e4651554555450008000200000000030c00030012000100000000"
    "00"
    "140005800800010000000000080002000000000020000000000a01040800000000000000020000000b0001006d616e"
    "67"
    "6c65000074020000060a010c0900000000000000020000000b0001006d616e676c65000010000200504f5354524f55"
    "54"
    "494e47003002048024000180090001006d6574610000000014000280080002000000000708000100000000012c0001"
    "80"
    "08000100636d700020000280080001000000000108000200000000000c000380070001006c6f000024000180090001"
    "00"
    "6d6574610000000014000280080002000000000308000100000000012c00018008000100636d700020000280080001"
    "00"
    "0000000108000200000000000c00038008000100010062742c0101800a0001006d617463680000001c0102800c0001"
    "00"
    "636f6d6d656e740008000200000000000401030074622d64656c6179642072656c656173652070726f626500000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00"
    "0000000000000000000000000000000000000000000000000000000000000000000000002c0001800c000100636f75"
    "6e"
    "746572001c0002800c00010000000000000000000c0002000000000000000000340001800b00010074617267657400"
    "00"
    "240002800c0001004e4651554555450008000200000000030c000300ffff0100000000001400058008000100000000"
    "00"
    "080002000000000014000000110001000a000000000000000000000a"
    "";

std::vector<uint8_t> captured() {
  const std::string hex = kCaptured;
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// The capture less the one thing we send differently: iptables-nft's begin message carries
// NFNL_BATCH_GENID (the generation its cache was read at: 8 bytes, attribute type 1, value 1);
// ours carries none (nft_message.h says why), so its nlmsg_len is 20, not 28.
std::vector<uint8_t> captured_without_genid() {
  auto b = captured();
  EXPECT_EQ(b[0], 28);
  EXPECT_EQ(b[20], 8);  // nla_len
  EXPECT_EQ(b[22], NFNL_BATCH_GENID);
  b.erase(b.begin() + 20, b.begin() + 28);
  b[0] = 20;
  return b;
}

const std::vector<stage::MarkedQueue> kRules{{{"e0", 17, false}, "tb-x link=a-b queue"},
                                             {{"e0", 18, true}, "tb-x link=a-b queue"}};
const stage::ProbeRule kProbe{stage::kProbeQueue, stage::kProbeMark, stage::kProbeMarker};

struct Msg {
  uint16_t type, flags;
  uint32_t seq;
};
std::vector<Msg> messages(const std::vector<uint8_t>& bytes) {
  std::vector<Msg> out;
  int len = static_cast<int>(bytes.size());
  for (auto* nlh = reinterpret_cast<const nlmsghdr*>(bytes.data()); mnl_nlmsg_ok(nlh, len);
       nlh = mnl_nlmsg_next(nlh, &len))
    out.push_back({nlh->nlmsg_type, nlh->nlmsg_flags, nlh->nlmsg_seq});
  EXPECT_EQ(len, 0);
  return out;
}

TEST(NftMessage, QueueRulesAreTheBytesIptablesNftSent) {
  ASSERT_EQ(stage::kProbeQueue, 65535);  // the capture's values
  ASSERT_EQ(stage::kProbeMark, 0x74620001u);
  ASSERT_STREQ(stage::kProbeMarker, "tb-delayd release probe");
  auto batch = stage::queue_rules_batch(kRules, &kProbe, 1);
  ASSERT_TRUE(batch) << batch.error().message;
  const auto want = captured_without_genid();
  ASSERT_EQ(batch->bytes.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(batch->bytes[i], want[i]) << "first difference at byte " << i;
  // One name per message, begin and end included.
  EXPECT_EQ(batch->what.size(), messages(batch->bytes).size());
  EXPECT_EQ(batch->what[3], "add rule PREROUTING -i e0 ... -j NFQUEUE --queue-num 17");
}

TEST(NftMessage, TableAndChainComeBeforeEachRuleEachChainOnce) {
  const auto nft = [](int m) { return static_cast<uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | m); };
  auto batch = stage::queue_rules_batch(kRules, &kProbe, 100);
  ASSERT_TRUE(batch);
  const auto msgs = messages(batch->bytes);
  const std::vector<uint16_t> types{
      NFNL_MSG_BATCH_BEGIN,  nft(NFT_MSG_NEWTABLE), nft(NFT_MSG_NEWCHAIN), nft(NFT_MSG_NEWRULE),
      nft(NFT_MSG_NEWTABLE), nft(NFT_MSG_NEWCHAIN), nft(NFT_MSG_NEWRULE),  nft(NFT_MSG_NEWTABLE),
      nft(NFT_MSG_NEWRULE),  NFNL_MSG_BATCH_END};
  ASSERT_EQ(msgs.size(), types.size());
  for (size_t i = 0; i < msgs.size(); ++i) {
    EXPECT_EQ(msgs[i].type, types[i]) << i;
    EXPECT_EQ(msgs[i].seq, 100 + i) << i;
    // Never NLM_F_EXCL (an existing table or chain is fine) nor NLM_F_ACK (the sender's).
    EXPECT_EQ(msgs[i].flags & (NLM_F_EXCL | NLM_F_ACK), 0) << i;
  }
  // Only the probe's rule: its chain still comes first.
  auto probe_only = stage::queue_rules_batch({}, &kProbe);
  ASSERT_TRUE(probe_only);
  EXPECT_EQ(messages(probe_only->bytes).size(), 5u);
  EXPECT_EQ(probe_only->what[2], "add chain ip mangle POSTROUTING");
}

TEST(NftMessage, NamesIptablesWouldNotTakeExactlyAreBadInput) {
  for (const char* name : {"", "sixteen-chars-ab", "eth+"}) {
    auto r = stage::queue_rules_batch({{{name, 1}, "tb-x"}});
    ASSERT_FALSE(r) << name;
    EXPECT_EQ(r.error().exit_code, kExitBadInput) << r.error().message;
    EXPECT_NE(r.error().message.find("interface name"), std::string::npos);
  }
  EXPECT_TRUE(stage::queue_rules_batch({{{"fifteen-chars-a", 1}, "tb-x"}}));
  EXPECT_FALSE(stage::queue_rules_batch({{{"e0", 1}, std::string(256, 'x')}}));
  EXPECT_TRUE(stage::queue_rules_batch({{{"e0", 1}, std::string(255, 'x')}}));
}

}  // namespace
}  // namespace tb::netlink
