// `report`: one self-contained HTML page from a results directory (a run's or a bench's) or from
// the JSON `verify --json` printed; no root and no lab needed (report/html.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "report/html.h"

namespace tb::cli {
namespace {

struct ReportFlags {
  std::string path, out;
};

int cmd_report(const ReportFlags& f) {
  auto h = report::write_html_report(f.path, f.out);
  if (!h) return report(h.error());
  std::printf("%s\n", h->c_str());
  return kExitOk;
}

}  // namespace

void add_report(CLI::App& app, int& rc) {
  auto f = std::make_shared<ReportFlags>();
  auto* cmd = app.add_subcommand(
      "report",
      "an HTML report (charts, topology) from a run's or bench's results directory "
      "or verify's JSON");
  cmd->add_option("RESULTS", f->path, "results directory of run or bench, or a verify JSON file")
      ->required();
  cmd->add_option("-o,--output", f->out,
                  "where to write it (default: report.html in the directory, or FILE.html)");
  cmd->callback([f, &rc] { rc = cmd_report(*f); });
}

}  // namespace tb::cli
