// The precompiled header every room, executable and test target reuses (CMakeLists.txt,
// tb_pch; issue 34). Only third-party and standard headers: a header of ours here would make
// every file recompile when it changes, and would hide a missing include of a room's own.
// What is listed is what most translation units include and costs most to parse.
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
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
