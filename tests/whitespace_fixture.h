// The reference ids of tests/fixtures/unicode_whitespace.json (scripts/make_whitespace_fixtures.sh
// writes them from independent JavaScript encoders; the script's header says which encoder gave
// each tokenizer's ids): ~220 texts around every Unicode White_Space code point and the
// look-alikes that are not White_Space (U+FEFF, U+200B, U+180E, U+001C-001F), for gpt2, llama3,
// qwen3, llama2 and bert. expect_whitespace_ids encodes every text and lists the mismatches.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "data_testing.h"
#include "meshflow/data/unicode.h"

namespace mft {

// Unicode's White_Space property (PropList.txt): 25 code points.
inline const std::set<char32_t>& white_space_code_points() {
  static const std::set<char32_t> s = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,   0xA0,   0x1680,
                                       0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
                                       0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  return s;
}

// Non-ASCII and control characters as \uXXXX (\U for beyond the BMP), for readable failures.
inline std::string escaped(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    char32_t cp = mf::unicode::decode_utf8(s, i, len);
    char buf[16];
    if (cp >= 0x20 && cp < 0x7F) {
      out.push_back(static_cast<char>(cp));
    } else {
      std::snprintf(buf, sizeof buf, cp > 0xFFFF ? "\\U%08X" : "\\u%04X", static_cast<unsigned>(cp));
      out += buf;
    }
    i += len;
  }
  return out;
}

inline std::string join_ids(const std::vector<int32_t>& ids) {
  std::ostringstream os;
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? " " : "") << ids[i];
  return os.str();
}

inline void expect_whitespace_ids(const std::string& tokenizer,
                                  const std::function<std::vector<int32_t>(const std::string&)>& encode) {
  nlohmann::json j = nlohmann::json::parse(slurp(fixture_path("unicode_whitespace.json")));
  const nlohmann::json& cases = j.at(tokenizer).at("cases");
  ASSERT_EQ(cases.size(), j.at("texts").get<size_t>());
  std::set<char32_t> seen;
  std::string mismatches;
  int bad = 0;
  for (const auto& c : cases) {
    const std::string text = c.at("text");
    for (size_t i = 0, len = 1; i < text.size(); i += len) seen.insert(mf::unicode::decode_utf8(text, i, len));
    const std::vector<int32_t> want = c.at("ids"), got = encode(text);
    if (got != want && ++bad <= 20)
      mismatches += "\n  \"" + escaped(text) + "\": got [" + join_ids(got) + "], reference [" + join_ids(want) + "]";
  }
  EXPECT_EQ(bad, 0) << tokenizer << ": " << bad << " of " << cases.size() << " texts differ from the reference"
                    << mismatches;
  // The texts cover the 25 White_Space code points and the look-alikes.
  for (char32_t cp : white_space_code_points()) EXPECT_TRUE(seen.count(cp)) << std::hex << static_cast<unsigned>(cp);
  for (unsigned cp : {0xFEFFu, 0x200Bu, 0x180Eu, 0x1Cu, 0x1Fu}) EXPECT_TRUE(seen.count(cp)) << std::hex << cp;
}

}  // namespace mft
