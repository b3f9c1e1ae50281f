// The server's /v1/completions request (serve/openai.h) and the text it streams back
// (infer/text_stream.h): the input is a request body, a NUL byte, then the generated tokens, one
// byte each (byte 0: the end-of-document token). An accepted request becomes generation requests
// (a byte tokenizer, a 64-position model, up to 4 prompts); each prompt's row then streams those
// tokens through its stop strings, and the responses are formed. The streamed text must be a
// prefix of the tokens' text and hold no stop string.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "meshflow/core/error.h"
#include "meshflow/infer/text_stream.h"
#include "meshflow/serve/openai.h"

namespace {

// Token b < 256 is byte b; 256 is the end-of-document token (no text).
class ByteTokens final : public mf::Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    return std::vector<int32_t>(reinterpret_cast<const unsigned char*>(text.data()),
                                reinterpret_cast<const unsigned char*>(text.data()) + text.size());
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string s;
    for (int32_t id : ids)
      if (id < 256) s.push_back(static_cast<char>(id));
    return s;
  }
  int64_t vocab_size() const override { return 257; }
  int32_t eod_id() const override { return 256; }
  std::string name() const override { return "byte"; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = mf::fuzz::split_parts(data, size, 2);
  static const ByteTokens tok;
  mf::serve::CompletionRequest r;
  std::vector<mf::infer::GenerationRequest> gens;
  try {
    r = mf::serve::parse_completion_request(parts[0]);
    gens = mf::serve::to_generation_requests(r, tok, mf::serve::ModelLimits{64, 4}, 7);
  } catch (const mf::serve::RequestError& e) {
    if (e.status() != 400) __builtin_trap();
    (void)mf::serve::error_body(e.what(), e.param());
    return 0;
  }
  const mf::serve::ResponseHeader header{"cmpl-fuzz", 0, r.model};
  std::vector<mf::serve::Choice> choices;
  for (size_t i = 0; i < gens.size(); ++i) {
    mf::infer::TextStream stream(tok, r.stop, gens[i].stop_tokens);
    std::string all, out;  // the tokens' text up to the row's end; the text given out
    for (unsigned char b : parts[1]) {
      if (stream.tokens() >= gens[i].max_new_tokens) break;
      const int64_t id = b == 0 ? tok.eod_id() : b;
      if (id != tok.eod_id()) all.push_back(static_cast<char>(b));
      const std::string piece = stream.push(id);
      out += piece;
      (void)mf::serve::completion_chunk_event(header, static_cast<int64_t>(i), piece, "");
      if (stream.stopped()) break;
    }
    if (!stream.stopped()) out += stream.finish();
    if (out != stream.text() || all.compare(0, out.size(), out) != 0) __builtin_trap();
    for (const std::string& s : r.stop)
      if (out.find(s) != std::string::npos) __builtin_trap();
    choices.push_back({out, stream.stopped() ? "stop" : "length", stream.tokens()});
  }
  (void)mf::serve::completion_body(header, choices, 0);
  return 0;
}
