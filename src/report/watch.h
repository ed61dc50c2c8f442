// What `watch` prints: one frame of a live lab's links (lab/watch.h) as a terminal table, busiest
// first, with the delay stages and the last events; or as one JSON line per frame. Pure;
// thread-safe.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "lab/watch.h"

namespace tb::report {

// `max_links`: rows of links at most (0: all); the rest are counted in one line.
std::string watch_text(const std::string& lab, const lab::WatchFrame& f, size_t max_links);
nlohmann::json watch_json(const std::string& lab, const lab::WatchFrame& f);
// The PFC section under the table (lossless links: each direction's pauses received and paused
// share, pauses sent, lossless drops) and the ECN one (each ecn port's CE marks and ECT packets
// per second over the same window), at most `max_rows` rows each (0: all); "" when the lab has
// no congestion agent. At most 80 columns for names up to 31 characters.
std::string watch_pfc_text(const lab::WatchFrame& f, size_t max_rows);

// "395.2M", "12.0K", "0": bit/s in a short form for a table cell.
std::string short_rate(double bps);

}  // namespace tb::report
