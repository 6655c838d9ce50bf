// File: tools/report_model.h
//
// The report model (report/report_model.h) under the names the `poolscope` command's renderers
// use. Nothing is defined here.
#ifndef POOLSCOPE_TOOLS_REPORT_MODEL_H_
#define POOLSCOPE_TOOLS_REPORT_MODEL_H_

#include "report/report_model.h"

namespace poolscope::tools {

using report::Bool;
using report::Count;
using report::Find;
using report::kReportSchema;
using report::LoadReport;
using report::Number;
using report::Report;
using report::String;
using report::ValidateReport;
using report::WallSeconds;

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_REPORT_MODEL_H_
