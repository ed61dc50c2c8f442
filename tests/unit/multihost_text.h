// Shared by the multi-host unit tests: scenario text to append to testing_text::kHead.
#pragma once

namespace tb::scenario::testing_text {

// Lines 11-25: region "bj" (1 x 2) and a WAN link "ec" between hz and bj; tests append from 26.
inline constexpr const char* kBjWan = R"([[region]]
name = "bj"
servers = 1
gpus_per_server = 2
scale_up = "nvlink"
rail = "hpn"
frontend = "vpc"
spines = 1

[[wan]]
name = "ec"
between = ["hz", "bj"]
profile = "express-connect"


)";

// Lines 26-34 (after kBjWan): hz on host a, bj on host b.
inline constexpr const char* kTwoHosts = R"([[host]]
name = "a"
underlay = "10.0.0.1"
regions = ["hz"]

[[host]]
name = "b"
underlay = "10.0.0.2"
regions = ["bj"]
)";

}  // namespace tb::scenario::testing_text
