#include "meshflow/serve/openai.h"

#include <limits>
#include <nlohmann/json.hpp>

namespace mf::serve {
namespace {

using nlohmann::json;

// JSON text of a value, invalid UTF-8 replaced (U+FFFD): byte-level tokens may split a character.
std::string dump(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string shown(const json& v) {
  std::string s = dump(v);
  return s.size() <= 60 ? s : s.substr(0, 57) + "...";
}

[[noreturn]] void refuse(const std::string& field, const std::string& what, const json& v) {
  throw RequestError(400, field, detail::cat("`", field, "` must be ", what, ", got ", shown(v)));
}

int64_t integer(const std::string& field, const json& v, int64_t lo, const std::string& what) {
  if (!v.is_number_integer()) refuse(field, what, v);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    refuse(field, what, v);
  const int64_t x = v.get<int64_t>();
  if (x < lo) refuse(field, what, v);
  return x;
}

double number(const std::string& field, const json& v) {
  if (!v.is_number()) refuse(field, "a number", v);
  return v.get<double>();
}

bool boolean(const std::string& field, const json& v) {
  if (!v.is_boolean()) refuse(field, "true or false", v);
  return v.get<bool>();
}

std::vector<std::string> prompts_of(const json& v) {
  const char* what = "a string or a non-empty array of strings";
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array() || v.empty()) refuse("prompt", what, v);
  std::vector<std::string> out;
  for (const json& e : v) {
    if (e.is_number_integer() || e.is_array())
      throw RequestError(400, "prompt", "`prompt` as token ids is not supported by this server: send the text");
    if (!e.is_string()) refuse("prompt", what, v);
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<std::string> stops_of(const json& v) {
  const char* what = "a non-empty string or an array of up to 4 non-empty strings";
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else {
    if (!v.is_array() || v.size() > 4) refuse("stop", what, v);
    for (const json& e : v) {
      if (!e.is_string()) refuse("stop", what, v);
      out.push_back(e.get<std::string>());
    }
  }
  for (const std::string& s : out)
    if (s.empty()) refuse("stop", what, v);
  return out;
}

// OpenAI fields this server does not implement: accepted only with their neutral value.
bool neutral_unsupported(const std::string& key, const json& v) {
  if (key == "best_of") return v.is_number_integer() && v.get<int64_t>() == 1;
  if (key == "presence_penalty" || key == "frequency_penalty") return v.is_number() && v.get<double>() == 0.0;
  if (key == "logit_bias") return v.is_object() && v.empty();
  if (key == "suffix") return v.is_string() && v.get<std::string>().empty();
  return false;  // logprobs: only null
}

bool is_unsupported(const std::string& key) {
  return key == "logprobs" || key == "best_of" || key == "suffix" || key == "logit_bias" || key == "presence_penalty" ||
         key == "frequency_penalty";
}

bool is_known(const std::string& key) {
  static const char* const kKeys[] = {"model", "prompt", "max_tokens", "temperature", "top_p", "top_k",
                                      "repetition_penalty", "n", "stream", "echo", "stop", "seed", "user"};
  for (const char* k : kKeys)
    if (key == k) return true;
  return is_unsupported(key);
}

void apply_field(CompletionRequest& r, const std::string& key, const json& v) {
  if (key == "model") {
    if (!v.is_string()) refuse(key, "a string", v);
    r.model = v.get<std::string>();
  } else if (key == "prompt") {
    r.prompts = prompts_of(v);
  } else if (key == "max_tokens") {
    r.max_tokens = integer(key, v, 1, "an integer >= 1");
  } else if (key == "temperature") {
    r.temperature = number(key, v);
    if (!(r.temperature >= 0.0)) refuse(key, "a number >= 0 (0: greedy)", v);
  } else if (key == "top_p") {
    r.top_p = number(key, v);
    if (!(r.top_p > 0.0 && r.top_p <= 1.0)) refuse(key, "a number in (0, 1]", v);
  } else if (key == "top_k") {
    r.top_k = integer(key, v, 0, "an integer >= 0 (0: off)");
  } else if (key == "repetition_penalty") {
    r.repetition_penalty = number(key, v);
    if (!(r.repetition_penalty > 0.0)) refuse(key, "a number > 0 (1: off)", v);
  } else if (key == "n") {
    const int64_t n = integer(key, v, 1, "an integer >= 1");
    if (n != 1)
      throw RequestError(400, key, detail::cat("`n` = ", n, " is not supported: this server returns one choice per "
                                               "prompt (send n = 1, or several requests)"));
  } else if (key == "stream") {
    r.stream = boolean(key, v);
  } else if (key == "echo") {
    r.echo = boolean(key, v);
  } else if (key == "stop") {
    r.stop = stops_of(v);
  } else if (key == "seed") {
    r.seed = integer(key, v, std::numeric_limits<int64_t>::min(), "an integer");
  } else if (key == "user") {
    if (!v.is_string()) refuse(key, "a string", v);
  } else if (is_unsupported(key)) {
    if (!neutral_unsupported(key, v))
      throw RequestError(400, key, detail::cat("`", key, "` is not supported by this server (got ", shown(v), ")"));
  } else {
    throw RequestError(400, key, detail::cat("unknown field `", key, "` in the request body"));
  }
}

// "parse error at line 1, column 5: ..." without nlohmann's "[json.exception.parse_error.101] ".
std::string parser_message(const json::exception& e) {
  std::string m = e.what();
  const size_t cut = m.find("] ");
  return cut == std::string::npos ? m : m.substr(cut + 2);
}

json header_json(const ResponseHeader& h) {
  return json{{"id", h.id}, {"object", "text_completion"}, {"created", h.created}, {"model", h.model}};
}

json choice_json(int64_t index, const std::string& text, const std::string& finish_reason) {
  return json{{"text", text},
              {"index", index},
              {"logprobs", nullptr},
              {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}};
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, or out_of_range: a number like 1e400
    throw RequestError(400, "", "the request body is not valid JSON: " + parser_message(e));
  }
  if (!j.is_object())
    throw RequestError(400, "", detail::cat("the request body must be a JSON object, got ", j.type_name()));
  CompletionRequest r;
  bool has_prompt = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "prompt") has_prompt = !v.is_null();
    if (v.is_null() && is_known(key)) continue;  // null: the field's default
    apply_field(r, key, v);
  }
  if (!has_prompt) throw RequestError(400, "prompt", "`prompt` is required (a string or an array of strings)");
  return r;
}

std::vector<infer::GenerationRequest> to_generation_requests(const CompletionRequest& r, const Tokenizer& tok,
                                                             const ModelLimits& limits, uint64_t fresh_seed) {
  const int64_t n = static_cast<int64_t>(r.prompts.size());
  if (n > limits.max_prompts)
    throw RequestError(400, "prompt", detail::cat("`prompt` has ", n, " strings, more than this server's ",
                                                  limits.max_prompts, " per request (--max-batch)"));
  infer::SamplingParams s;
  s.do_sample = r.temperature > 0.0;
  s.temperature = s.do_sample ? r.temperature : 1.0;
  s.top_k = s.do_sample ? r.top_k : 0;
  s.top_p = s.do_sample ? r.top_p : 1.0;
  s.repetition_penalty = r.repetition_penalty;
  const uint64_t seed = r.seed ? static_cast<uint64_t>(*r.seed) : fresh_seed;
  std::vector<infer::GenerationRequest> out;
  for (int64_t i = 0; i < n; ++i) {
    infer::GenerationRequest g;
    const std::vector<int32_t> ids = tok.encode(r.prompts[i]);
    g.prompt.assign(ids.begin(), ids.end());
    if (g.prompt.empty()) g.prompt.push_back(tok.eod_id());
    const int64_t len = static_cast<int64_t>(g.prompt.size());
    if (r.max_tokens > limits.max_sequence_length - len) {  // max_tokens may be up to INT64_MAX: no sum
      const std::string which = n == 1 ? "`prompt`" : detail::cat("`prompt[", i, "]`");
      throw RequestError(400, "prompt",
                         detail::cat(which, " has ", len, " tokens; with max_tokens ", r.max_tokens, " that is ",
                                     static_cast<uint64_t>(len) + static_cast<uint64_t>(r.max_tokens),
                                     ", more than the model's maximum sequence length of ", limits.max_sequence_length,
                                     " tokens (shorten the prompt or lower max_tokens; prompts are never truncated)"));
    }
    g.max_new_tokens = r.max_tokens;
    g.sampling = s;
    g.sampling.seed = seed + static_cast<uint64_t>(i);
    g.stop_tokens = {tok.eod_id()};
    out.push_back(std::move(g));
  }
  return out;
}

std::string error_body(const std::string& message, const std::string& param, const std::string& type) {
  const json e{{"error",
                {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
                 {"code", nullptr}}}};
  return dump(e);
}

std::string completion_body(const ResponseHeader& h, const std::vector<Choice>& choices, int64_t prompt_tokens) {
  json j = header_json(h);
  json cs = json::array();
  int64_t completion = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    cs.push_back(choice_json(static_cast<int64_t>(i), choices[i].text, choices[i].finish_reason));
    completion += choices[i].completion_tokens;
  }
  j["choices"] = std::move(cs);
  j["usage"] = json{{"prompt_tokens", prompt_tokens},
                    {"completion_tokens", completion},
                    {"total_tokens", prompt_tokens + completion}};
  return dump(j);
}

std::string completion_chunk_event(const ResponseHeader& h, int64_t index, const std::string& text,
                                   const std::string& finish_reason) {
  json j = header_json(h);
  j["choices"] = json::array({choice_json(index, text, finish_reason)});
  return "data: " + dump(j) + "\n\n";
}

}  // namespace mf::serve
