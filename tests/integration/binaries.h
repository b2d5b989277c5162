// Paths of the programs the integration tests run, defined by tests/integration/CMakeLists.txt
// for the targets that exist; empty otherwise, and a test that needs a missing one skips, saying
// which.
#pragma once

#ifndef COHORT_COORDINATOR_BIN
#define COHORT_COORDINATOR_BIN ""
#endif
#ifndef COHORT_AGENT_BIN
#define COHORT_AGENT_BIN ""
#endif
#ifndef COHORT_CLI_BIN
#define COHORT_CLI_BIN ""
#endif
#ifndef COHORT_TRAINER_BIN
#define COHORT_TRAINER_BIN ""
#endif
#ifndef COHORT_REDUCER_BIN
#define COHORT_REDUCER_BIN ""
#endif
#ifndef COHORT_PS_BIN
#define COHORT_PS_BIN ""
#endif
#ifndef COHORT_PROBE_SCRIPT
#define COHORT_PROBE_SCRIPT ""
#endif
