// `report`: one self-contained HTML page from a results directory (a run's, a bench's, train's)
// or from the JSON `verify --json` or `train --json` printed, or several benches (or train
// results) side by side; no root and no lab needed (report/html.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "report/html.h"

namespace tb::cli {
namespace {

struct ReportFlags {
  std::vector<std::string> paths;
  std::string out;
};

int cmd_report(const ReportFlags& f) {
  auto h = report::write_html_report(f.paths, f.out);
  if (!h) return report(h.error());
  std::printf("%s\n", h->c_str());
  return kExitOk;
}

}  // namespace

void add_report(CLI::App& app, int& rc) {
  auto f = std::make_shared<ReportFlags>();
  auto* cmd = app.add_subcommand(
      "report",
      "an HTML report (charts, topology) from a run's, bench's or train's results directory, "
      "verify's or train's JSON, or several benches side by side");
  cmd->add_option("RESULTS", f->paths,
                  "results directory of run, bench or train, or a verify/train JSON file; "
                  "several benches (or train results) are drawn side by side")
      ->required();
  cmd->add_option("-o,--output", f->out,
                  "where to write it (default: report.html in the directory, FILE.html, or "
                  "compare.html in the first directory for several)");
  cmd->callback([f, &rc] { rc = cmd_report(*f); });
}

}  // namespace tb::cli
