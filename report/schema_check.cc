// File: report/schema_check.cc
//
// See schema_check.h. The fields listed here are the ones the identities read.
#include "report/schema_check.h"

#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fmt/format.h"
#include "report/check_util.h"
#include "report/report_model.h"

namespace poolscope::report {
namespace {

using nlohmann::json;

constexpr std::string_view kTopLevel[] = {
    "schema",  "process",         "options", "logical", "real",  "internal",       "pool",
    "threads", "threads_omitted", "sizes",   "sites",   "leaks", "reconciliation", "errors",
};
constexpr std::string_view kProcessFields[] = {"pid",      "ppid",   "exe",    "argv",
                                               "start_ns", "end_ns", "reason", "forked_from"};
constexpr std::string_view kProcessIntegers[] = {"pid", "ppid", "start_ns", "end_ns"};
constexpr std::string_view kOptionFields[] = {"pool", "pool_size", "pools"};
// by_api is keyed by these C names and C++ operators (docs/report-schema.md).
constexpr std::string_view kEntryPoints[] = {
    "malloc", "calloc",  "realloc", "reallocarray", "posix_memalign", "aligned_alloc", "memalign",
    "valloc", "pvalloc", "free",    "new",          "new[]",          "delete",        "delete[]",
};
constexpr std::string_view kLedgerFields[] = {
    "allocs", "frees", "reallocs", "bytes_requested", "live_blocks", "live_bytes", "by_api"};
// live_bytes and bytes_requested may be null (unknown); these may not.
constexpr std::string_view kLedgerIntegers[] = {"allocs", "frees", "reallocs", "live_blocks"};
constexpr std::string_view kPoolFields[] = {"enabled",
                                            "pool_size",
                                            "pools_per_thread",
                                            "hits",
                                            "misses",
                                            "pools_created",
                                            "pools_reused",
                                            "pools_released",
                                            "resets_in_place",
                                            "pools_cached_at_exit",
                                            "pools_in_use_at_exit",
                                            "spills",
                                            "absorbs"};
constexpr std::string_view kPoolIntegers[] = {"hits", "pools_created", "spills", "absorbs"};
constexpr std::string_view kReconciliationFields[] = {"real_live_blocks", "unpooled_live_blocks",
                                                      "pools_cached",     "pools_in_use",
                                                      "balanced",         "detector_view"};
constexpr std::string_view kDetectorFields[] = {"unfreed_blocks",      "unfreed_bytes",
                                                "program_leak_blocks", "pool_blocks",
                                                "internal_blocks",     "verdict"};
constexpr std::string_view kErrorsFields[] = {"invalid_frees", "double_frees"};

class SchemaCheck {
 public:
  explicit SchemaCheck(const json& doc) : doc_(doc) {}

  std::vector<std::string> Run();

 private:
  // The member `field` of the object at `parent`, or null (with a problem) when it is absent.
  const json* Member(const json* object, std::string_view parent, std::string_view field) {
    if (object == nullptr) return nullptr;
    auto it = object->find(field);
    if (it == object->end()) {
      problems_.push_back(absl::StrCat(check::Path(parent, field), " is missing"));
      return nullptr;
    }
    return &*it;
  }

  // The object at `path` when it is one; a problem when it is there but not an object.
  const json* Object(std::string_view path) {
    const json* node = Find(doc_, path);
    if (node == nullptr) return nullptr;  // its absence is reported by the parent's field list
    if (!node->is_object()) {
      problems_.push_back(fmt::format("{} must be an object, got {}", path, check::Text(*node)));
      return nullptr;
    }
    return node;
  }

  void Array(std::string_view path) {
    const json* node = Find(doc_, path);
    if (node != nullptr && !node->is_array()) {
      problems_.push_back(fmt::format("{} must be a list, got {}", path, node->type_name()));
    }
  }

  template <size_t N>
  void Fields(const json* object, std::string_view path, const std::string_view (&fields)[N]) {
    for (std::string_view field : fields) Member(object, path, field);
  }

  template <size_t N>
  void Integers(const json* object, std::string_view path, const std::string_view (&fields)[N]) {
    if (object == nullptr) return;
    for (std::string_view field : fields) {
      auto it = object->find(field);
      if (it != object->end() && !check::IsInt(&*it)) {
        problems_.push_back(
            fmt::format("{} must be an integer, got {}", check::Path(path, field), check::Text(*it)));
      }
    }
  }

  void Process();
  void Ledger(std::string_view side);

  const json& doc_;
  std::vector<std::string> problems_;
};

void SchemaCheck::Process() {
  const json* p = Object("process");
  Fields(p, "process", kProcessFields);
  Integers(p, "process", kProcessIntegers);
  if (p == nullptr) return;
  const json* exe = Find(*p, "exe");
  if (exe != nullptr && !(exe->is_string() && !exe->get<std::string>().empty())) {
    problems_.push_back("process.exe must be a non-empty string, got " + check::Text(*exe));
  }
  const json* argv = Find(*p, "argv");
  if (argv != nullptr) {
    bool strings = argv->is_array();
    for (size_t i = 0; strings && i < argv->size(); ++i) strings = (*argv)[i].is_string();
    if (!strings) problems_.push_back("process.argv must be a list of strings, got " + check::Text(*argv));
  }
  const json* reason = Find(*p, "reason");
  if (reason != nullptr && *reason != "exit" && *reason != "snapshot" && *reason != "signal" &&
      *reason != "detach") {
    problems_.push_back(fmt::format(
        "process.reason = {}, expected \"exit\", \"snapshot\", \"signal\" or \"detach\"", check::Text(*reason)));
  }
  // A report of `poolscope attach` says when it attached, and a detach's report when it detached.
  if (reason != nullptr && *reason == "detach") {
    const json* detached = Find(doc_, "attach.detached_ns");
    if (detached == nullptr || !detached->is_number_unsigned()) {
      problems_.push_back("process.reason = \"detach\" without an integer attach.detached_ns");
    }
  }
  if (const json* attach = Find(doc_, "attach"); attach != nullptr) {
    for (const char* field : {"attached_ns", "objects_patched", "slots_patched", "preexisting_frees",
                              "preexisting_reallocs", "preexisting_usable_size"}) {
      const json* v = Find(*attach, field);
      if (v == nullptr || !v->is_number_integer()) {
        problems_.push_back(fmt::format("attach.{} must be an integer, got {}", field,
                                        v == nullptr ? std::string("(missing)") : check::Text(*v)));
      }
    }
    const json* at = Find(*p, "attached_ns");
    if (at == nullptr || !at->is_number_integer()) problems_.push_back("process.attached_ns is missing");
  }
  // A report written for a signal names it: one of those poolscope writes a report for.
  if (reason != nullptr && *reason == "signal") {
    const json* sig = Find(*p, "signal");
    if (sig == nullptr || !(*sig == "SIGTERM" || *sig == "SIGINT" || *sig == "SIGHUP")) {
      problems_.push_back("process.signal = " + (sig == nullptr ? std::string("(missing)") : check::Text(*sig)) +
                          ", expected \"SIGTERM\", \"SIGINT\" or \"SIGHUP\" with process.reason \"signal\"");
    }
  }
  // The run of `poolscope run`/`compare` a report belongs to (absent in reports older than the field).
  const json* run = Find(*p, "run");
  if (run != nullptr && !run->is_null()) {
    if (!run->is_string() || run->get<std::string>().empty()) {
      problems_.push_back("process.run must be null or a non-empty string, got " + check::Text(*run));
    } else if (!check::IsInt(Find(*p, "root_pid"))) {
      problems_.push_back("process.run = " + check::Text(*run) + " without an integer process.root_pid");
    }
  }
  const json* forked_from = Find(*p, "forked_from");
  if (forked_from != nullptr && !forked_from->is_null() && !check::IsInt(forked_from)) {
    problems_.push_back("process.forked_from must be null or a pid, got " + check::Text(*forked_from));
  }
  const json* start = Find(*p, "start_ns");
  const json* end = Find(*p, "end_ns");
  if (check::IsInt(start) && check::IsInt(end) && check::IntOf(*end) < check::IntOf(*start)) {
    problems_.push_back(fmt::format("process.end_ns = {} is before process.start_ns = {}",
                                    check::IntOf(*end), check::IntOf(*start)));
  }
}

void SchemaCheck::Ledger(std::string_view side) {
  const json* ledger = Object(side);
  Fields(ledger, side, kLedgerFields);
  Integers(ledger, side, kLedgerIntegers);
  std::string by_api_path = check::Path(side, "by_api");
  const json* by_api = Object(by_api_path);
  Fields(by_api, by_api_path, kEntryPoints);
  if (by_api == nullptr) return;
  for (const auto& [key, value] : by_api->items()) {
    if (!check::IsInt(&value)) {
      problems_.push_back(
          fmt::format("{}.{} must be an integer, got {}", by_api_path, key, check::Text(value)));
    }
  }
}

std::vector<std::string> SchemaCheck::Run() {
  Fields(&doc_, "", kTopLevel);
  Process();
  Fields(Object("options"), "options", kOptionFields);
  Ledger("logical");
  Ledger("real");
  Object("internal");
  const json* pool = Object("pool");
  Fields(pool, "pool", kPoolFields);
  Integers(pool, "pool", kPoolIntegers);
  Object("pool.misses");
  Array("threads");
  Member(Object("sizes"), "sizes", "buckets");
  Array("sizes.buckets");
  Array("sites");
  Array("leaks");
  Fields(Object("reconciliation"), "reconciliation", kReconciliationFields);
  Fields(Object("reconciliation.detector_view"), "reconciliation.detector_view", kDetectorFields);
  Fields(Object("errors"), "errors", kErrorsFields);
  return std::move(problems_);
}

}  // namespace

std::vector<std::string> SchemaProblems(const json& doc) { return SchemaCheck(doc).Run(); }

}  // namespace poolscope::report
