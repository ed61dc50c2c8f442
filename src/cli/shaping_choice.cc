#include "cli/shaping_choice.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "capability/capabilities.h"
#include "shaping/backend.h"

namespace tb::cli {

Result<ShapingChoice> choose_shaping(const std::string& requested) {
  const bool root = ::geteuid() == 0;
  std::vector<std::string> available;
  bool nfqueue = false;
  if (root)
    for (const auto& spec : capability::check_registry()) {
      const std::string name(spec.name);
      if (name != "netem" && name != "tbf" && name != "htb" && name != "nfqueue") continue;
      if (!spec.probe().available) continue;
      if (name == "nfqueue")
        nfqueue = true;
      else
        available.push_back(name);
    }
  if (requested == "none") return ShapingChoice{"none", true, "asked"};
  if (requested != "auto") {
    if (!shaping::find_backend(requested))
      return bad_input("--shaping " + requested + ": use auto, none or one of " +
                       shaping::backend_kinds());
    return ShapingChoice{requested, !root || nfqueue, "asked"};
  }
  if (!root) return ShapingChoice{"tbf", true, "assumed (not root: nothing probed)"};
  const shaping::Backend* b = shaping::pick_backend(available);
  if (!b)
    return bad_input(
        "no shaping backend works on this kernel (netem, tbf and htb all failed "
        "their probes; see `testbedctl doctor`); use --shaping none to build "
        "unshaped links");
  return ShapingChoice{std::string(b->kind), nfqueue, "probed"};
}

}  // namespace tb::cli
