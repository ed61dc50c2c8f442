// The precompiled header every room, executable and test target reuses (CMakeLists.txt,
// tb_pch; issue 34). Only third-party and standard headers: a header of ours here would make
// every file recompile when it changes, and would hide a missing include of a room's own.
// What is listed is what most translation units include and costs most to parse. Not CLI11:
// its header-only mode defines validator objects at namespace scope, so a unit that merely
// includes it compiles their constructors (about 6 s and 100 KB of code per unit, measured
// 2026-12-04); only cli/ and the three programs' mains include it.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <expected>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>
