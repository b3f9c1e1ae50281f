// The configuration key reference (docs/guides/config-reference.md), made from the code's own
// schema: the keys, their types and defaults and what they mean from the defaults document
// (defaults.cpp: each key's trailing `# ...` comment), the numeric keys' ranges from ranges.cpp.
// It lists every key the code reads and nothing else, so it cannot drift from the code:
// `meshflow config reference --output docs/guides/config-reference.md` writes it, and
// tests/config_test.cpp fails when a key has no meaning or the committed file is out of date.
#pragma once
#include <string>
#include <vector>

namespace mf {

// A key or a section (a mapping of keys) of a defaults document, with the comment on its line.
struct ConfigKeyDoc {
  std::string key;       // dotted: "train.amp.dtype"; a section's is its prefix: "train.amp"
  bool section = false;  // a mapping of keys rather than a key
  // The trailing comment, joined by spaces with the comment-only lines right below it (its
  // continuation), '#' and surrounding spaces removed; "" when the line has none.
  std::string meaning;
};

// Every key and section of defaults-document text, in document order. The text holds `key: value
// # meaning` lines nested by indentation, section lines `name:` (a comment optional), comment-only
// lines continuing the comment of the line above, and blank lines; anything else throws naming
// the line.
std::vector<ConfigKeyDoc> parse_config_key_docs(const std::string& text);
// Those of the compiled-in defaults document (config_detail::defaults_yaml()), parsed once.
const std::vector<ConfigKeyDoc>& config_key_docs();

// The reference in Markdown: a title, how it is made, then one `##` section per top-level section
// of the defaults document, in its order, each a table `| key | type | default | range | meaning |`
// of its keys in document order (a nested section with a comment is a row `prefix.*` before its
// keys). Every schema key is a row exactly once; throws when the document's comments and the
// schema disagree on the keys.
std::string config_reference_markdown();

// Where the reference lives in the source tree, and the command that writes it there.
inline constexpr const char kConfigReferencePath[] = "docs/guides/config-reference.md";
inline constexpr const char kConfigReferenceCommand[] =
    "meshflow config reference --output docs/guides/config-reference.md";

}  // namespace mf
