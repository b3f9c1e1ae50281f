// OpenAI's /v1/completions API: the request body parsed and checked, turned into the engine's
// generation requests, and the response bodies (whole, and the server-sent-event chunks of a
// streamed completion). Errors are OpenAI's JSON shape:
//   {"error": {"message": ..., "type": "invalid_request_error", "param": <field or null>, "code": null}}
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshflow/core/error.h"
#include "meshflow/data/tokenizer.h"
#include "meshflow/infer/engine.h"

namespace mf::serve {

// A request the server refuses: the HTTP status, the field at fault ("" when none) and the
// message (what was wrong and the value sent).
class RequestError : public Error {
 public:
  RequestError(int status, std::string param, const std::string& message)
      : Error(message), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string param_;
};

// A /v1/completions body. Absent fields (and JSON null) take these defaults.
struct CompletionRequest {
  std::string model;                 // any value is accepted; responses name the served model
  std::vector<std::string> prompts;  // `prompt`: a string, or an array of strings (one choice each)
  int64_t max_tokens = 16;           // >= 1
  double temperature = 1.0;          // >= 0; 0: greedy (OpenAI's convention)
  double top_p = 1.0;                // (0, 1]
  int64_t top_k = 0;                 // >= 0; 0: off (an extension)
  double repetition_penalty = 1.0;   // > 0 (an extension)
  bool stream = false;
  bool echo = false;                 // the prompt's text before the completion's
  std::vector<std::string> stop;     // up to 4 non-empty strings
  std::optional<int64_t> seed;       // none: a fresh seed per request
};

// Parses and checks a body: malformed JSON (with the parser's position), a body that is not an
// object, unknown fields, wrong types and out-of-range values (naming the field and the value),
// n other than 1, and OpenAI fields this server does not implement (logprobs, best_of, suffix,
// logit_bias, presence/frequency penalties) set to anything but their neutral value all throw
// RequestError (400).
CompletionRequest parse_completion_request(std::string_view body);

// What the served model accepts.
struct ModelLimits {
  int64_t max_sequence_length = 0;  // prompt tokens + max_tokens must fit
  int64_t max_prompts = 1;          // prompts per request (the server's largest batch)
};

// One engine request per prompt: the prompt's tokens (an empty prompt reads as the tokenizer's
// end-of-document token, as GPT-2 generates unconditionally), the sampling parameters, the
// end-of-document token as the stop token. Throws RequestError (400, param "prompt") for too many
// prompts and for a prompt whose tokens plus max_tokens exceed max_sequence_length (refused,
// never truncated), saying how many tokens it has and the limit.
std::vector<infer::GenerationRequest> to_generation_requests(const CompletionRequest& r, const Tokenizer& tok,
                                                             const ModelLimits& limits, uint64_t fresh_seed);

// {"error": {...}} for a refused request.
std::string error_body(const std::string& message, const std::string& param = "",
                       const std::string& type = "invalid_request_error");

// One finished choice of a completion.
struct Choice {
  std::string text;
  std::string finish_reason;  // "stop" or "length"
  int64_t completion_tokens = 0;
};

struct ResponseHeader {
  std::string id;        // "cmpl-..."
  int64_t created = 0;   // unix seconds
  std::string model;
};

// The whole response of a request that is not streamed (usage over all its choices).
std::string completion_body(const ResponseHeader& h, const std::vector<Choice>& choices, int64_t prompt_tokens);
// One server-sent event of a streamed response: "data: {...}\n\n" with choice `index`'s new text
// and its finish reason (null until its last chunk).
std::string completion_chunk_event(const ResponseHeader& h, int64_t index, const std::string& text,
                                   const std::string& finish_reason);
inline constexpr std::string_view kDoneEvent = "data: [DONE]\n\n";

}  // namespace mf::serve
