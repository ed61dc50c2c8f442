#include "report/doctor.h"

#include <algorithm>

#include "report/format.h"

namespace tb::report {
namespace {

constexpr size_t kMaxDetailWidth = 72;  // longer details overflow their column, never truncate

std::string enables_or_fallback(const capability::Capability& c) {
  if (c.available) return c.enables;
  return "fallback: " + c.fallback + " (would enable: " + c.enables + ")";
}

}  // namespace

std::string doctor_text(const capability::DoctorReport& r) {
  size_t wn = 4, wd = 6;
  for (const auto& c : r.capabilities) {
    wn = std::max(wn, c.name.size());
    wd = std::max(wd, std::min(c.detail.size(), kMaxDetailWidth));
  }
  std::string s = "kernel: " + r.kernel + "\n\n";
  s += pad("NAME", wn) + "  AVAILABLE  " + pad("DETAIL", wd) + "  ENABLES / FALLBACK\n";
  for (const auto& c : r.capabilities)
    s += pad(c.name, wn) + "  " + pad(c.available ? "yes" : "no", 9) + "  " + pad(c.detail, wd) +
         "  " + enables_or_fallback(c) + "\n";
  s += "\nshaping backend: " + r.chosen.shaping + "\ntransport: " + r.chosen.transport +
       "\nfailover: " + r.chosen.failover + "\n";
  if (r.extras.empty()) return s;
  // The packages the product uses beside the kernel (core/extras.h): the light set comes with
  // scripts/setup, a group with scripts/setup --with GROUP.
  size_t we = 5, wf = 7, wp = 7;
  for (const auto& e : r.extras) {
    we = std::max(we, e.name.size());
    wf = std::max(wf, e.path.empty() ? 7 : e.path.size());
    wp = std::max(wp, e.package.size());
  }
  s += "\n" + pad("EXTRA", we) + "  " + pad("FOUND", wf) + "  " + pad("PACKAGE", wp) +
       "  SETUP           NEEDED FOR\n";
  for (const auto& e : r.extras)
    s += pad(e.name, we) + "  " + pad(e.path.empty() ? "missing" : e.path, wf) + "  " +
         pad(e.package, wp) + "  " + pad(e.group.empty() ? "default" : "--with " + e.group, 14) +
         "  " + e.needed_for + "\n";
  return s;
}

}  // namespace tb::report
