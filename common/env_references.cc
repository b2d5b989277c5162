#include "common/env_references.h"

namespace cohort {

std::string ExpandEnvReferences(std::string_view text,
                                const std::map<std::string, std::string>& env) {
  std::string out;
  out.reserve(text.size());
  // Where the last ')' is: a "$(" after it has no end, and looking for one again at each "$("
  // would make a text of many of them cost its length squared.
  const size_t last_close = text.rfind(')');
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c != '$' || i + 1 == text.size()) {
      out += c;
      ++i;
      continue;
    }
    const char next = text[i + 1];
    if (next == '$' && i + 2 < text.size() && text[i + 2] == '(') {  // an escaped reference
      out += "$(";
      i += 3;
      continue;
    }
    const size_t close = next == '(' && last_close != std::string_view::npos && last_close > i + 1
                             ? text.find(')', i + 2)
                             : std::string_view::npos;
    if (close == std::string_view::npos) {  // no reference: as written
      out += c;
      ++i;
      continue;
    }
    const std::string name(text.substr(i + 2, close - i - 2));
    auto value = env.find(name);
    if (value != env.end()) {
      out += value->second;
    } else {
      out.append(text.substr(i, close + 1 - i));
    }
    i = close + 1;
  }
  return out;
}

void ExpandEnvReferences(std::vector<std::string>& args,
                         const std::map<std::string, std::string>& env) {
  for (std::string& arg : args) arg = ExpandEnvReferences(arg, env);
}

}  // namespace cohort
