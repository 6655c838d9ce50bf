// File: fuzz/report_fuzzer.cc
//
// libFuzzer target: the report reader of the `poolscope` command (report/report_model.h: LoadReport,
// which reads a file, and ValidateReport) and, for inputs it accepts, everything the command then does
// with a report (accessors, the text/folded/json/HTML pages, suppressions, the ledger table). Nothing
// may throw out of these functions or crash; LoadReport must answer false with a non-empty one-line
// problem, or true.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <exception>
#include <string>

#include "report/html_report.h"
#include "report/ledger_table.h"
#include "absl/status/statusor.h"
#include "report/report_model.h"
#include "report/suppressions.h"
#include "report/text_report.h"

namespace t = poolscope::report;

namespace {

// The input goes into a memfd, read back through /proc/self/fd/N: LoadReport reads files.
int g_fd = -1;
std::string g_path;

void Fail(const char* what) {
  fprintf(stderr, "report_fuzzer: %s\n", what);
  abort();
}

void Exercise(const nlohmann::json& doc) {
  static const char* kPaths[] = {
      "logical.allocs", "logical.frees", "real.allocs", "real.frees", "pool.hits",
      "pool.pools_created", "reconciliation.balanced", "reconciliation.detector_view.verdict",
      "reconciliation.detector_view.unfreed_blocks", "process.start_ns", "process.end_ns",
      "process.exe", "sizes.share_at_or_below_pool_size", "", ".", "a..b", "logical.by_api.malloc",
  };
  for (const char* p : kPaths) {
    (void)t::Find(doc, p);
    (void)t::Count(doc, p);
    (void)t::Number(doc, p);
    (void)t::String(doc, p);
    (void)t::Bool(doc, p);
  }
  (void)t::WallSeconds(doc);
  (void)t::ApiKeys(doc);
  (void)t::TextReport(doc, "fuzz.json");
  (void)t::FoldedStacks(doc);
  (void)t::PrettyJson(doc);
  (void)t::HtmlReport(doc, "fuzz.json");
  (void)t::Suppressions(doc, "fuzz.json", t::SuppressionFormat::kLsan);
  (void)t::Suppressions(doc, "fuzz.json", t::SuppressionFormat::kValgrind);
  (void)t::Suppressions(doc, "fuzz.json", t::SuppressionFormat::kHeaptrack);
  t::RunFacts facts;
  (void)t::LedgerTable(doc, facts, doc, facts, "pooling off", "pooling on");
  (void)t::Verdict(doc, doc);
  (void)t::ProgramLeakBlocks(doc);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_fd = memfd_create("report_fuzzer", 0);
  if (g_fd < 0) Fail("memfd_create failed");
  g_path = "/proc/self/fd/" + std::to_string(g_fd);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (ftruncate(g_fd, 0) != 0) Fail("ftruncate");
  if (size > 0 && pwrite(g_fd, data, size, 0) != static_cast<ssize_t>(size)) Fail("pwrite");
  try {
    absl::StatusOr<t::Report> report = t::LoadReport(g_path);
    const bool ok = report.ok();
    if (!ok) {
      const std::string problem(report.status().message());
      if (problem.empty()) Fail("LoadReport failed with no problem");
      if (problem.find('\n') != std::string::npos) Fail("LoadReport's problem is not one line");
    } else {
      Exercise(report->doc);
    }
    // ValidateReport on the same bytes parsed without exceptions.
    nlohmann::json doc = nlohmann::json::parse(data, data + size, nullptr, false);
    if (!doc.is_discarded()) {
      const bool valid = t::ValidateReport(doc).ok();
      if (valid != ok) Fail("ValidateReport disagrees with LoadReport");
      if (valid) Exercise(doc);
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "report_fuzzer: exception escaped: %s\n", e.what());
    abort();
  } catch (...) {
    Fail("unknown exception escaped");
  }
  return 0;
}
