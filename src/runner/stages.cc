#include "runner/stages.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "apply/state.h"
#include "runner/supervisor.h"
#include "stage/queue_spec.h"

namespace tb::runner {

std::string stage_config_path(const std::string& lab, const std::string& netns) {
  return apply::lab_dir(lab) + "/stages/" + netns + ".conf";
}
std::string stage_stats_path(const std::string& lab, const std::string& netns) {
  return apply::lab_dir(lab) + "/stages/" + netns + ".stats.json";
}

std::string delayd_path() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = self.parent_path() / "tb-delayd";
    if (::access(beside.c_str(), X_OK) == 0) return beside;
  }
  return "/usr/local/bin/tb-delayd";
}

Status start_stages(const std::string& lab, const std::vector<plan::Stage>& stages) {
  if (stages.empty()) return {};
  std::error_code ec;
  std::filesystem::create_directories(apply::lab_dir(lab) + "/stages", ec);
  if (ec) return fail("create " + apply::lab_dir(lab) + "/stages: " + ec.message());
  const std::string delayd = delayd_path();
  if (::access(delayd.c_str(), X_OK) != 0)
    return sys_fail("the delay stage " + delayd +
                    " is not installed (cmake --install puts it "
                    "beside testbedctl)");
  std::vector<ChildSpec> specs;
  for (const auto& st : stages) {
    std::vector<stage::QueueSpec> queues;
    for (const auto& q : st.queues) queues.push_back({q.queue, q.delay, q.jitter, q.maxlen});
    const std::string conf = stage_config_path(lab, st.netns);
    std::ofstream(conf, std::ios::trunc) << stage::to_config(queues);
    specs.push_back({"stage " + st.node,
                     st.netns,
                     {delayd, "--config", conf, "--stats", stage_stats_path(lab, st.netns)}});
  }
  return start_supervisor(lab, apply::lab_dir(lab), plan::owner_marker(lab), specs);
}

}  // namespace tb::runner
