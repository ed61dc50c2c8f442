#include "lab/exec.h"

#include "lab/state.h"
#include "lab/up.h"
#include "runner/exec.h"
#include "scenario/names.h"

namespace tb::lab {

Result<int> exec_on_node(const ExecOptions& o) {
  auto st = load_state(o.lab);
  if (!st) return bad_input(st.error().message);
  const plan::Node* n = st->topo.node(scenario::canonical_node(o.node));
  if (!n) {
    std::string some;
    for (size_t i = 0; i < st->topo.nodes.size() && i < 4; ++i)
      some += (i ? ", " : "") + st->topo.nodes[i].name;
    return bad_input("lab " + o.lab + " has no node \"" + o.node + "\" (nodes are named like " +
                     some + "; see `testbedctl status " + o.lab + "`)");
  }
  if (!st->host.empty() && n->host != st->host)
    return bad_input("node " + n->name + " is on host " + n->host + ", not on this one (host " +
                     st->host + " of lab " + o.lab + "); run exec on host " + n->host);
  TB_TRY(require_root("exec"));
  return runner::exec_in_netns(n->netns, o.argv);
}

}  // namespace tb::lab
