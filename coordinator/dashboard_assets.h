// The dashboard's files (coordinator/http_service.h serves them): one page, its script and its
// style. Plain HTML and JS, no build step; charts use Chart.js from Debian (/static/chart.js).
#pragma once

namespace cohort::coordinator {

extern const char kDashboardHtml[];
extern const char kDashboardJs[];
extern const char kDashboardCss[];

}  // namespace cohort::coordinator
