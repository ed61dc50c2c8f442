// Shared by the scenario loader's unit tests: a valid head to append bad input to, and the
// error a text loads with.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "cli/exit_code.h"
#include "scenario/loader.h"

namespace tb::scenario::testing_text {

// Lines 1-10: a valid lab with one region "hz" (2 servers x 2 GPUs). Tests append from line 11.
inline constexpr const char* kHead = R"([lab]
name = "t"

[[region]]
name = "hz"
servers = 2
gpus_per_server = 2
scale_up = "nvlink"
rail = "hpn"
frontend = "vpc"
)";

// The message `text` fails to load with (as x.toml), which must be exit code 2; "" (and a
// failure) when it loads.
inline std::string load_error(const std::string& text) {
  auto s = load_text(text, "x.toml");
  EXPECT_FALSE(s.has_value()) << "loaded without error";
  if (s) return "";
  EXPECT_EQ(s.error().exit_code, kExitBadInput);
  return s.error().message;
}

}  // namespace tb::scenario::testing_text

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)
