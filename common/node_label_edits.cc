#include "common/node_label_edits.h"

#include <utility>

#include "common/yaml_reader.h"

namespace cohort {

StatusOr<NodeLabelEdits> ParseNodeLabelEdits(const std::vector<std::string>& items) {
  if (items.size() > kMaxNodeLabels) {
    return InvalidArgument("at most " + std::to_string(kMaxNodeLabels) + " label edits, got " +
                           std::to_string(items.size()));
  }
  NodeLabelEdits edits;
  for (const std::string& item : items) {
    if (item.find('=') != std::string::npos) {
      auto label = ParseNodeLabel(item);
      if (!label.ok()) return InvalidArgument(label.status().message());
      edits[std::move(label->first)] = std::move(label->second);
      continue;
    }
    const std::string key =
        item.size() > 1 && item.back() == '-' ? item.substr(0, item.size() - 1) : std::string();
    if (key.empty()) {
      return InvalidArgument("expected KEY=VALUE (set a label) or KEY- (remove one), got " +
                             Quoted(item));
    }
    COHORT_RETURN_IF_ERROR(CheckNodeLabel(key, ""));
    edits[key] = std::nullopt;
  }
  return edits;
}

std::string FormatNodeLabelEdits(const NodeLabelEdits& edits) {
  std::string out;
  for (const auto& [key, value] : edits) {
    out += (out.empty() ? "" : ",") + key + (value ? "=" + *value : "-");
  }
  return out;
}

StatusOr<NodeLabelEdits> ParseNodeLabelEditsText(std::string_view text) {
  std::vector<std::string> items;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    items.emplace_back(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return ParseNodeLabelEdits(items);
}

NodeLabels ApplyNodeLabelEdits(NodeLabels agent, const NodeLabelEdits& edits) {
  for (const auto& [key, value] : edits) {
    if (value) {
      agent[key] = *value;
    } else {
      agent.erase(key);
    }
  }
  return agent;
}

}  // namespace cohort
