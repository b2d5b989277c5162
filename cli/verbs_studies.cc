// The study verbs of the `cohort` CLI: tune, trials, studies (cancel STUDY: verbs_jobs.cc).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli.h"
#include "cli/job_view.h"
#include "cli/output.h"
#include "cli/verb_util.h"
#include "cli/verbs.h"
#include "common/study_spec.h"

namespace cohort::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Prints the study's name; with --wait follows it until it ends.
int FollowStudy(CoordinatorClient& client, const std::string& name, const ParsedArgs& args,
                const Context& ctx) {
  ctx.out << name << std::endl;
  if (!args.Has("--wait")) return kExitOk;

  // Follow: a progress line whenever the state or the number of finished trials changes.
  std::string last_progress;
  auto last_reply = Clock::now();
  auto unreachable_limit =
      std::max<std::chrono::milliseconds>(ctx.options.timeout * 6, std::chrono::seconds(30));
  while (true) {
    auto current = client.GetStudy(name);
    if (!current.ok()) {
      if (current.status().code() == StatusCode::kUnavailable &&
          Clock::now() - last_reply < unreachable_limit) {
        continue;
      }
      return Fail(ctx.err, current.status());
    }
    last_reply = Clock::now();
    int finished = 0;
    int active = 0;
    for (const auto& t : current->trials) {
      if (!t) continue;
      if (t->state == "ACTIVE" || t->state == "REQUESTED" || t->state == "STOPPING") {
        ++active;
      } else {
        ++finished;
      }
    }
    std::string progress = "study " + name + ": " + current->state + ", " +
                           std::to_string(finished) + " of " + std::to_string(current->max_trials) +
                           " trials done, " + std::to_string(active) + " running" +
                           (current->best_trial.empty() ? "" : ", best " + current->best_trial);
    if (progress != last_progress) {
      ctx.err << progress << std::endl;
      last_progress = progress;
    }
    if (IsStudyTerminal(current->state)) {
      PrintStudy(*current, ctx.out);
      return current->state == "SUCCEEDED" ? kExitOk : kExitJobFailed;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace

int Tune(const ParsedArgs& args, const Context& ctx) {
  if (args.Has("--name") && args.Get("--name").empty()) {
    return UsageError(ctx.err, "tune", "--name: an empty name");
  }
  SubmitEdits edits;
  ParsedArgs file_args;
  if (Status read = ReadEnvLabelsAndArgs(args, &edits, &file_args); !read.ok()) {
    return UsageError(ctx.err, "tune", read.message());
  }
  return SubmitSpecFile<StudySpec, wire::StudyInfoT>(
      file_args, ctx, "tune", "study", ParseStudySpec,
      [](CoordinatorClient& client, const std::string& text) { return client.SubmitStudy(text); },
      [&](CoordinatorClient& client, const StudySpec& spec, const wire::StudyInfoT& study) {
        for (const std::string& w : study.warnings) ctx.err << "cohort: warning: " << w << "\n";
        return FollowStudy(client, study.name.empty() ? spec.name : study.name, args, ctx);
      },
      [&](const std::string& text) -> StatusOr<std::string> {
        // A Vertex tuning file may lack the displayName --name replaces.
        auto as_study = [&](std::string_view t, std::string_view source) {
          return AsCohortStudyFile(t, source, args.Get("--name"));
        };
        COHORT_ASSIGN_OR_RETURN(std::string study,
                                AsCohortFile(text, file_args.positionals[0], as_study, ctx.err));
        if (!edits.empty()) {
          COHORT_ASSIGN_OR_RETURN(study, WithTrialJobEdits(study, edits));
        }
        if (!args.Has("--name")) return study;
        return WithStudyName(study, args.Get("--name"));
      });
}

int Trials(const ParsedArgs& args, const Context& ctx) {
  return ShowOne(args, ctx, "trials", "STUDY", &CoordinatorClient::GetStudy, StudyToJson,
                 PrintStudy, &CoordinatorClient::GetStudySpec);
}

int Studies(const ParsedArgs& args, const Context& ctx) {
  return ShowAll(args, ctx, "studies", &CoordinatorClient::ListStudies, StudyToJson, PrintStudies);
}

}  // namespace cohort::cli
