// Barrier among the workers of a transport: no worker returns before every worker has entered.
// Dissemination (Hensgen, Finkel and Manber): in round k a worker tells worker rank + 2^k it has
// arrived and waits for worker rank - 2^k; after ceil(log2 n) rounds each worker has heard,
// directly or not, from every other. The messages are the call headers themselves, so a worker
// that called another collective at this point is named in the error.
#pragma once

#include "collective/algorithms/collective_call.h"

namespace cohort::collective {

// Called by every worker with the same seq.
Status Barrier(Transport& transport, const CollectiveOptions& options);

}  // namespace cohort::collective
