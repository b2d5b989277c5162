// An admin's edits of a node's labels (`cohort label NODE gpu=h100 zone-`, kubectl label's
// syntax): per key, the value the node carries whatever its agent says, or nullopt: the node has
// no such label even where its agent reports one. The coordinator keeps them per node (stored,
// so they outlast a coordinator restart and the agent's re-registration), and a node's labels,
// which node_selector, node_affinity and preferred_node_affinity read, are its agent's with the
// edits applied.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/job_spec.h"
#include "common/status.h"

namespace cohort {

using NodeLabelEdits = std::map<std::string, std::optional<std::string>>;

// "KEY=VALUE" sets the label, "KEY-" removes it (a later item of the same key wins over an
// earlier one); InvalidArgument naming the item for anything else, or a key or value
// CheckNodeLabel refuses, or more than kMaxNodeLabels items.
StatusOr<NodeLabelEdits> ParseNodeLabelEdits(const std::vector<std::string>& items);
// The items ParseNodeLabelEdits reads, joined by commas: "gpu=h100,zone-" ("" for none). Neither
// keys nor values hold a comma, so ParseNodeLabelEdits(Split(text, ',')) reads it back.
std::string FormatNodeLabelEdits(const NodeLabelEdits& edits);
// The inverse of FormatNodeLabelEdits ("" is no edits).
StatusOr<NodeLabelEdits> ParseNodeLabelEditsText(std::string_view text);
// `agent`'s labels with `edits` applied.
NodeLabels ApplyNodeLabelEdits(NodeLabels agent, const NodeLabelEdits& edits);

}  // namespace cohort
