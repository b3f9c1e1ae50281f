// The HTTP server of `meshflow serve` (src/meshflow/serve): /v1/completions bodies checked (every
// kind of error, OpenAI's error shape), incremental UTF-8 text and stop strings, the batch message
// of a multi-rank server, and the server itself over a stand-in engine on an ephemeral port, hit
// by httplib clients from several threads (batching, server-sent events, errors, shutdown, a
// follower rank over an in-process communicator).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <latch>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>

#include "meshflow/data/tokenizer.h"
#include "meshflow/serve/batch_wire.h"
#include "meshflow/serve/openai.h"
#include "meshflow/serve/server.h"
#include "meshflow/infer/text_stream.h"
#include "testing.h"

namespace {

using nlohmann::json;
using mf::serve::CompletionRequest;
using mf::serve::RequestError;
using mf::infer::TextStream;
namespace infer = mf::infer;
namespace serve = mf::serve;

// ---------------------------------------------------------------- request bodies

// The RequestError a body raises (status 0 when it parses).
RequestError refusal(const std::string& body) {
  try {
    serve::parse_completion_request(body);
  } catch (const RequestError& e) {
    return e;
  }
  return RequestError(0, "", "parsed");
}

TEST(ServeRequest, DefaultsAndNulls) {
  const CompletionRequest r = serve::parse_completion_request(R"({"prompt": "hi"})");
  EXPECT_EQ(r.prompts, std::vector<std::string>{"hi"});
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_EQ(r.temperature, 1.0);
  EXPECT_EQ(r.top_p, 1.0);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.echo);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.seed.has_value());
  // null is every known field's default (clients send it)
  const CompletionRequest n = serve::parse_completion_request(
      R"({"prompt": "hi", "max_tokens": null, "stop": null, "seed": null, "logprobs": null, "n": null, "user": null})");
  EXPECT_EQ(n.max_tokens, 16);
  EXPECT_FALSE(n.seed.has_value());
}

TEST(ServeRequest, EveryField) {
  const CompletionRequest r = serve::parse_completion_request(
      R"({"model": "anything", "prompt": ["a", "b"], "max_tokens": 5, "temperature": 0, "top_p": 0.5, "top_k": 7,
          "n": 1, "stream": true, "stop": ["x", "yz"], "seed": -3, "repetition_penalty": 1.2, "echo": true,
          "user": "u", "best_of": 1, "presence_penalty": 0, "frequency_penalty": 0.0, "logit_bias": {}, "suffix": ""})");
  EXPECT_EQ(r.model, "anything");
  EXPECT_EQ(r.prompts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.top_p, 0.5);
  EXPECT_EQ(r.top_k, 7);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(r.seed, -3);
  EXPECT_EQ(r.repetition_penalty, 1.2);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(serve::parse_completion_request(R"({"prompt": "p", "stop": "\n"})").stop,
            std::vector<std::string>{"\n"});
}

TEST(ServeRequest, MalformedJsonGivesTheParsersPosition) {
  const RequestError e = refusal("{\"prompt\": \"a\",\n  \"max_tokens\": }");
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "");
  EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("line 2, column 17"), std::string::npos) << e.what();
  EXPECT_NE(std::string(refusal("").what()).find("not valid JSON"), std::string::npos);
  EXPECT_NE(std::string(refusal("[1, 2]").what()).find("must be a JSON object, got array"), std::string::npos);
  // A number past the double range is the parser's out_of_range, not a parse_error: once it
  // escaped the handler (a 500 without OpenAI's error body).
  const RequestError big = refusal(R"({"prompt": "a", "temperature": 1e400})");
  EXPECT_EQ(big.status(), 400);
  EXPECT_NE(std::string(big.what()).find("not valid JSON: number overflow parsing '1e400'"), std::string::npos)
      << big.what();
}

TEST(ServeRequest, UnknownFieldIsNamed) {
  const RequestError e = refusal(R"({"prompt": "a", "max_token": 3})");
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "max_token");
  EXPECT_NE(std::string(e.what()).find("unknown field `max_token`"), std::string::npos) << e.what();
}

TEST(ServeRequest, WrongTypesAndRangesNameTheFieldAndValue) {
  struct Case {
    const char* body;
    const char* param;
    const char* words;  // in the message, besides the field's name
  };
  const Case cases[] = {
      {R"({"prompt": "a", "max_tokens": 0})", "max_tokens", "got 0"},
      {R"({"prompt": "a", "max_tokens": "16"})", "max_tokens", "got \"16\""},
      {R"({"prompt": "a", "max_tokens": 1.5})", "max_tokens", "got 1.5"},
      {R"({"prompt": "a", "temperature": -0.5})", "temperature", "got -0.5"},
      {R"({"prompt": "a", "temperature": "hot"})", "temperature", "got \"hot\""},
      {R"({"prompt": "a", "top_p": 0})", "top_p", "(0, 1], got 0"},
      {R"({"prompt": "a", "top_p": 1.5})", "top_p", "got 1.5"},
      {R"({"prompt": "a", "top_k": -1})", "top_k", "got -1"},
      {R"({"prompt": "a", "repetition_penalty": 0})", "repetition_penalty", "got 0"},
      {R"({"prompt": "a", "stream": "yes"})", "stream", "true or false, got \"yes\""},
      {R"({"prompt": "a", "echo": 1})", "echo", "got 1"},
      {R"({"prompt": "a", "stop": ["1", "2", "3", "4", "5"]})", "stop", "up to 4"},
      {R"({"prompt": "a", "stop": ""})", "stop", "got \"\""},
      {R"({"prompt": "a", "stop": [7]})", "stop", "got [7]"},
      {R"({"prompt": "a", "seed": "x"})", "seed", "got \"x\""},
      {R"({"prompt": "a", "model": 3})", "model", "got 3"},
      {R"({"prompt": "a", "user": 1})", "user", "got 1"},
      {R"({"prompt": 3})", "prompt", "got 3"},
      {R"({"prompt": []})", "prompt", "got []"},
      {R"({"prompt": [1, 2]})", "prompt", "token ids is not supported"},
      {R"({"max_tokens": 3})", "prompt", "is required"},
      {R"({"prompt": "a", "n": 2})", "n", "`n` = 2 is not supported"},
      {R"({"prompt": "a", "n": 0})", "n", "got 0"},
      {R"({"prompt": "a", "logprobs": 1})", "logprobs", "not supported"},
      {R"({"prompt": "a", "best_of": 3})", "best_of", "not supported"},
  };
  for (const Case& c : cases) {
    const RequestError e = refusal(c.body);
    EXPECT_EQ(e.status(), 400) << c.body;
    EXPECT_EQ(e.param(), c.param) << c.body;
    const std::string m = e.what();
    EXPECT_NE(m.find(std::string("`") + c.param + "`"), std::string::npos) << c.body << " -> " << m;
    EXPECT_NE(m.find(c.words), std::string::npos) << c.body << " -> " << m;
  }
}

TEST(ServeRequest, ErrorBodyHasOpenAIsShape) {
  const json e = json::parse(serve::error_body("bad `top_k`", "top_k"));
  EXPECT_EQ(e["error"]["message"], "bad `top_k`");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "top_k");
  EXPECT_TRUE(e["error"]["code"].is_null());
  EXPECT_TRUE(json::parse(serve::error_body("x"))["error"]["param"].is_null());
}

TEST(ServeRequest, GenerationRequests) {
  mf::ByteTokenizer tok;
  const serve::ModelLimits limits{32, 4};
  CompletionRequest r = serve::parse_completion_request(R"({"prompt": ["abc", ""], "max_tokens": 4, "seed": 9})");
  std::vector<infer::GenerationRequest> g = serve::to_generation_requests(r, tok, limits, 1234);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].prompt, (std::vector<int64_t>{'a', 'b', 'c'}));
  EXPECT_EQ(g[1].prompt, std::vector<int64_t>{mf::ByteTokenizer::kEod});  // an empty prompt
  EXPECT_EQ(g[0].max_new_tokens, 4);
  EXPECT_EQ(g[0].stop_tokens, std::vector<int64_t>{mf::ByteTokenizer::kEod});
  EXPECT_TRUE(g[0].sampling.do_sample);
  EXPECT_EQ(g[0].sampling.seed, 9u);
  EXPECT_EQ(g[1].sampling.seed, 10u);
  // temperature 0: greedy, top-k and top-p off; no seed given: the fresh one
  r = serve::parse_completion_request(R"({"prompt": "abc", "temperature": 0, "top_k": 5, "top_p": 0.3})");
  g = serve::to_generation_requests(r, tok, limits, 1234);
  EXPECT_FALSE(g[0].sampling.do_sample);
  EXPECT_EQ(g[0].sampling.top_k, 0);
  EXPECT_EQ(g[0].sampling.top_p, 1.0);
  EXPECT_EQ(g[0].sampling.seed, 1234u);
  r = serve::parse_completion_request(R"({"prompt": "abc", "temperature": 0.7, "top_k": 5})");
  g = serve::to_generation_requests(r, tok, limits, 1);
  EXPECT_TRUE(g[0].sampling.do_sample);
  EXPECT_EQ(g[0].sampling.temperature, 0.7);
  EXPECT_EQ(g[0].sampling.top_k, 5);
  // more prompts than a batch holds
  r = serve::parse_completion_request(R"({"prompt": ["a", "b", "c", "d", "e"]})");
  try {
    serve::to_generation_requests(r, tok, limits, 1);
    FAIL() << "5 prompts accepted";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.param(), "prompt");
    EXPECT_NE(std::string(e.what()).find("5 strings, more than this server's 4"), std::string::npos) << e.what();
  }
}

TEST(ServeRequest, OversizePromptIsRefusedNotTruncated) {
  mf::ByteTokenizer tok;
  const serve::ModelLimits limits{16, 8};
  // 10 tokens + 6 fit 16 exactly
  EXPECT_EQ(serve::to_generation_requests(
                serve::parse_completion_request(R"({"prompt": "0123456789", "max_tokens": 6})"), tok, limits, 1)[0]
                .prompt.size(),
            10u);
  try {
    serve::to_generation_requests(serve::parse_completion_request(R"({"prompt": "0123456789", "max_tokens": 7})"), tok,
                                  limits, 1);
    FAIL() << "an oversize prompt accepted";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "prompt");
    const std::string m = e.what();
    for (const char* w : {"has 10 tokens", "max_tokens 7", "17", "maximum sequence length of 16", "never truncated"})
      EXPECT_NE(m.find(w), std::string::npos) << w << " not in: " << m;
  }
  // The largest max_tokens a client can send: refused, and its sum with the prompt's tokens
  // printed without overflowing (once a signed overflow that wrapped to a negative sum and passed).
  MFT_EXPECT_ERROR(serve::to_generation_requests(serve::parse_completion_request(
                                                     R"({"prompt": "0123456789", "max_tokens": 9223372036854775807})"),
                                                 tok, limits, 1),
                   "max_tokens 9223372036854775807 that is 9223372036854775817");
}

// ---------------------------------------------------------------- text

std::vector<int64_t> bytes_of(const std::string& s) {
  std::vector<int64_t> out;
  for (unsigned char c : s) out.push_back(c);
  return out;
}

const std::unique_ptr<mf::Tokenizer>& gpt2_tokenizer() {
  static const auto tok = mf::make_tokenizer("gpt2_bpe", std::string(MESHFLOW_SOURCE_DIR) + "/data/gpt2");
  return tok;
}

TEST(ServeText, CompleteUtf8Prefix) {
  EXPECT_EQ(mf::infer::complete_utf8_prefix(""), 0u);
  EXPECT_EQ(mf::infer::complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(mf::infer::complete_utf8_prefix("a\xC3"), 1u);
  EXPECT_EQ(mf::infer::complete_utf8_prefix("a\xC3\xA9"), 3u);
  EXPECT_EQ(mf::infer::complete_utf8_prefix("\xE2\x82"), 0u);
  EXPECT_EQ(mf::infer::complete_utf8_prefix("x\xE2\x82\xAC"), 4u);
  EXPECT_EQ(mf::infer::complete_utf8_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(mf::infer::complete_utf8_prefix("\xF0\x9F\x98\x80"), 4u);
  EXPECT_EQ(mf::infer::complete_utf8_prefix("a\x80"), 2u);              // a stray continuation byte
  EXPECT_EQ(mf::infer::complete_utf8_prefix("a\xFF"), 2u);              // not UTF-8 at all
  EXPECT_EQ(mf::infer::complete_utf8_prefix("\x80\x80\x80\x80\x80"), 5u);
}

// Every piece given out is complete UTF-8 and the pieces make the text.
void expect_streams_whole_characters(const mf::Tokenizer& tok, const std::string& text) {
  const std::vector<int32_t> ids = tok.encode(text);
  TextStream ts(tok, {}, {tok.eod_id()});
  std::string joined;
  for (int32_t id : ids) {
    const std::string piece = ts.push(id);
    EXPECT_EQ(mf::infer::complete_utf8_prefix(piece), piece.size()) << "a split character given out";
    joined += piece;
  }
  joined += ts.finish();
  EXPECT_EQ(joined, text);
  EXPECT_EQ(ts.text(), text);
  EXPECT_EQ(ts.tokens(), static_cast<int64_t>(ids.size()));
}

TEST(ServeText, IncrementalDecodeGivesWholeCharacters) {
  mf::ByteTokenizer bytes;
  TextStream ts(bytes, {}, {});
  EXPECT_EQ(ts.push('h'), "h");
  EXPECT_EQ(ts.push(0xC3), "");  // the first byte of é waits
  EXPECT_EQ(ts.push(0xA9), "\xC3\xA9");
  EXPECT_EQ(ts.push(0xE2), "");
  EXPECT_EQ(ts.push(0x82), "");
  EXPECT_EQ(ts.push(0xAC), "\xE2\x82\xAC");
  EXPECT_EQ(ts.push(0xF0), "");
  EXPECT_EQ(ts.finish(), "\xF0");  // the end gives what is held, incomplete or not
  for (const std::string text : {"h\xC3\xA9llo \xE2\x82\xAC 5", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x98\x80!"})
    expect_streams_whole_characters(bytes, text);
  // GPT-2's byte-level BPE splits characters over tokens (日本語, emoji)
  const auto& gpt2 = gpt2_tokenizer();
  const std::string cjk = "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E and \xF0\x9F\x98\x80\xF0\x9F\x9A\x80 caf\xC3\xA9";
  EXPECT_GT(gpt2->encode(cjk).size(), 6u);
  expect_streams_whole_characters(*gpt2, cjk);
  expect_streams_whole_characters(*gpt2, "Hello, world! A longer sentence, with punctuation.");
}

TEST(ServeText, StopStringCutsTheTextAndEndsTheRow) {
  mf::ByteTokenizer tok;
  TextStream ts(tok, {"\n\n", "END"}, {mf::ByteTokenizer::kEod});
  std::string out;
  for (int64_t t : bytes_of("ab\nc")) out += ts.push(t);
  EXPECT_EQ(out, "ab\nc");  // "\n" was held until "c" showed it starts no stop string
  EXPECT_EQ(ts.push('E'), "");
  EXPECT_EQ(ts.push('N'), "");  // "EN" may begin "END"
  EXPECT_FALSE(ts.stopped());
  EXPECT_EQ(ts.push('D'), "");
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(ts.text(), "ab\nc");
  EXPECT_THROW(ts.push('x'), mf::Error);

  // a stop string inside one token's text; the text after it is dropped
  const auto& gpt2 = gpt2_tokenizer();
  TextStream g(*gpt2, {"world"}, {gpt2->eod_id()});
  std::string got;
  for (int32_t id : gpt2->encode("Hello, world and more")) {
    got += g.push(id);
    if (g.stopped()) break;
  }
  EXPECT_TRUE(g.stopped());
  EXPECT_EQ(got, "Hello, ");

  // a held tail that turns out not to be a stop string comes out at the end
  TextStream h(tok, {"END"}, {});
  EXPECT_EQ(h.push('x'), "x");
  EXPECT_EQ(h.push('E'), "");
  EXPECT_EQ(h.finish(), "E");
  EXPECT_FALSE(h.stopped());
}

TEST(ServeText, StopTokenEndsTheRowWithoutItsText) {
  mf::ByteTokenizer tok;
  TextStream ts(tok, {"END"}, {mf::ByteTokenizer::kEod});
  EXPECT_EQ(ts.push('o'), "o");
  EXPECT_EQ(ts.push('k'), "k");
  EXPECT_EQ(ts.push('E'), "");
  EXPECT_EQ(ts.push(mf::ByteTokenizer::kEod), "E");  // the held text goes out, the token's text does not
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(ts.text(), "okE");
  EXPECT_EQ(ts.tokens(), 4);
}

// A model's vocabulary padded past its tokenizer's (Qwen2: 151936 rows, 151665 tokens) can pick
// an id the tokenizer lacks: it renders as nothing and the row goes on (it once threw "outside
// the vocabulary" and ended generate and the serve batch).
TEST(ServeText, AnIdPastTheTokenizersVocabularyRendersAsNothing) {
  mf::ByteTokenizer tok;  // ids 0..256
  TextStream ts(tok, {}, {mf::ByteTokenizer::kEod});
  EXPECT_EQ(ts.push('h'), "h");
  EXPECT_EQ(ts.push(413), "");
  EXPECT_FALSE(ts.stopped());
  EXPECT_EQ(ts.push(0xC3), "");
  EXPECT_EQ(ts.push(257), "");  // inside a character: the character still completes
  EXPECT_EQ(ts.push(0xA9), "\xC3\xA9");
  EXPECT_EQ(ts.push('!'), "!");
  EXPECT_EQ(ts.finish(), "");
  EXPECT_EQ(ts.text(), "h\xC3\xA9!");
  EXPECT_EQ(ts.tokens(), 6);
  EXPECT_TRUE(mf::infer::in_vocabulary(tok, 256));
  EXPECT_FALSE(mf::infer::in_vocabulary(tok, 257));
  EXPECT_FALSE(mf::infer::in_vocabulary(tok, -1));
  const std::vector<int64_t> ids{'o', 151900, 'k', 257, -5};
  EXPECT_EQ(mf::infer::decode_known(tok, ids), "ok");
}

// ---------------------------------------------------------------- the batch message

TEST(ServeWire, BatchRoundTrip) {
  infer::GenerationRequest a;
  a.prompt = {1, 2, 3};
  a.max_new_tokens = 7;
  a.sampling = {true, 0.7, 40, 0.9, 1.3, 0xFFFFFFFFFFFFFFF0ull};
  a.stop_tokens = {50256, 2};
  infer::GenerationRequest b;
  b.prompt = {9};
  b.stop_tokens = {};
  const auto back = serve::decode_batch(serve::encode_batch({a, b}));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].prompt, a.prompt);
  EXPECT_EQ(back[0].max_new_tokens, 7);
  EXPECT_TRUE(back[0].sampling.do_sample);
  EXPECT_EQ(back[0].sampling.temperature, 0.7);
  EXPECT_EQ(back[0].sampling.top_k, 40);
  EXPECT_EQ(back[0].sampling.top_p, 0.9);
  EXPECT_EQ(back[0].sampling.repetition_penalty, 1.3);
  EXPECT_EQ(back[0].sampling.seed, 0xFFFFFFFFFFFFFFF0ull);
  EXPECT_EQ(back[0].stop_tokens, a.stop_tokens);
  EXPECT_EQ(back[1].prompt, b.prompt);
  EXPECT_FALSE(back[1].sampling.do_sample);
  EXPECT_TRUE(back[1].stop_tokens.empty());
  std::vector<int64_t> words = serve::encode_batch({a});
  EXPECT_THROW(serve::decode_batch({1, 2, 3}), mf::Error);
  words.pop_back();
  EXPECT_THROW(serve::decode_batch(words), mf::Error);
}

// ---------------------------------------------------------------- the server

// A stand-in engine: row r's new tokens are its prompt's bytes over and over, one step for all
// rows at a time; a '#' in the prompt comes out as the end-of-document token (a stop token). It
// records the batches it ran; `step_ms` paces the steps; `gate`, when set, holds the first batch
// until it opens.
struct FakeEngine {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<infer::GenerationRequest>> batches;
  int step_ms = 2;
  bool gated = false, gate_open = false;

  serve::GenerateFn fn() {
    return [this](const std::vector<infer::GenerationRequest>& rows, const infer::TokenCallback& on_token) {
      {
        std::unique_lock lk(mu);
        batches.push_back(rows);
        cv.notify_all();
        cv.wait(lk, [&] { return !gated || gate_open; });
      }
      std::vector<infer::GenerationResult> out(rows.size());
      std::vector<bool> live(rows.size(), true);
      for (int64_t step = 0;; ++step) {
        bool any = false;
        for (size_t r = 0; r < rows.size(); ++r) {
          if (!live[r]) continue;
          if (step >= rows[r].max_new_tokens) {
            live[r] = false;
            out[r].finish_reason = "length";
            continue;
          }
          int64_t t = rows[r].prompt[static_cast<size_t>(step) % rows[r].prompt.size()];
          if (t == '#') t = mf::ByteTokenizer::kEod;
          out[r].tokens.push_back(t);
          const bool go_on = !on_token || on_token(static_cast<int64_t>(r), t);
          const bool stop_token = std::find(rows[r].stop_tokens.begin(), rows[r].stop_tokens.end(), t) !=
                                  rows[r].stop_tokens.end();
          if (!go_on || stop_token) {
            live[r] = false;
            out[r].finish_reason = "stop";
          }
          any = true;
        }
        if (!any) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
      }
      return out;
    };
  }
  std::vector<size_t> batch_sizes() {
    std::lock_guard lk(mu);
    std::vector<size_t> s;
    for (const auto& b : batches) s.push_back(b.size());
    return s;
  }
  void open_gate() {
    std::lock_guard lk(mu);
    gate_open = true;
    cv.notify_all();
  }
};

// A server on a free port, running on its own thread until the fixture ends.
struct RunningServer {
  std::shared_ptr<mf::Tokenizer> tok = std::make_shared<mf::ByteTokenizer>();
  std::FILE* log = std::tmpfile();
  std::unique_ptr<serve::Server> server;
  int port = 0;
  std::thread thread;

  RunningServer(FakeEngine& engine, serve::ServeOptions o, mf::comm::CommPtr world = nullptr) {
    o.host = "127.0.0.1";
    o.port = 0;
    server = std::make_unique<serve::Server>(engine.fn(), tok, o, world, log);
    port = server->bind();
    thread = std::thread([this] { server->run(); });
  }
  ~RunningServer() {
    stop();
    std::fclose(log);
  }
  void stop() {
    if (!thread.joinable()) return;
    server->stop();
    thread.join();
  }
  std::string log_text() {
    std::fflush(log);
    std::rewind(log);
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, log)) > 0) s.append(buf, n);
    return s;
  }
  httplib::Result post(const std::string& body) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30);
    return c.Post("/v1/completions", body, "application/json");
  }
};

serve::ServeOptions options(int64_t max_batch, double wait_ms) {
  serve::ServeOptions o;
  o.max_batch = max_batch;
  o.batch_wait_ms = wait_ms;
  o.model_name = "tiny-test";
  o.max_sequence_length = 64;
  return o;
}

// The events of a server-sent-event body: each "data: " payload, in order.
std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an event not ended by a blank line: " << body.substr(at);
    if (end == std::string::npos) break;
    const std::string ev = body.substr(at, end - at);
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    out.push_back(ev.substr(6));
    at = end + 2;
  }
  return out;
}

// The text a streamed body carries for choice 0, checking the chunks' shape on the way.
std::string streamed_text(const std::string& body, std::string* finish_reason) {
  const std::vector<std::string> events = sse_events(body);
  EXPECT_GE(events.size(), 2u);
  if (events.empty()) return "";
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json j = json::parse(events[i]);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["model"], "tiny-test");
    EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
    const json& c = j["choices"][0];
    text += c["text"].get<std::string>();
    const bool last = i + 2 == events.size();
    EXPECT_EQ(c["finish_reason"].is_null(), !last) << events[i];
    if (last) *finish_reason = c["finish_reason"];
  }
  return text;
}

std::string repeat_to(const std::string& s, size_t n) {
  std::string out;
  while (out.size() < n) out += s[out.size() % s.size()];
  return out;
}

TEST(ServeServer, ConcurrentRequestsAreBatchedAndStreamed) {
  FakeEngine engine;
  RunningServer rs(engine, options(8, 400));
  httplib::Client c("127.0.0.1", rs.port);
  auto health = c.Get("/health");
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "tiny-test");

  constexpr int kClients = 6;
  std::latch start(kClients);
  std::vector<std::string> bodies(kClients), types(kClients);
  std::vector<int> status(kClients, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      const bool stream = i % 2 == 1;
      const json req{{"prompt", "p" + std::to_string(i) + "-abc"}, {"max_tokens", 12 + i}, {"stream", stream}};
      start.arrive_and_wait();
      auto res = rs.post(req.dump());
      if (!res) return;
      status[i] = res->status;
      bodies[i] = res->body;
      types[i] = res->get_header_value("Content-Type");
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) {
    ASSERT_EQ(status[i], 200) << i << ": " << bodies[i];
    const std::string prompt = "p" + std::to_string(i) + "-abc";
    const std::string want = repeat_to(prompt, 12 + i);
    if (i % 2 == 1) {
      EXPECT_EQ(types[i], "text/event-stream");
      std::string finish;
      EXPECT_EQ(streamed_text(bodies[i], &finish), want);
      EXPECT_EQ(finish, "length");
      EXPECT_GT(sse_events(bodies[i]).size(), 3u) << "the text came in one piece";
    } else {
      EXPECT_EQ(types[i], "application/json");
      const json j = json::parse(bodies[i]);
      EXPECT_EQ(j["object"], "text_completion");
      EXPECT_EQ(j["model"], "tiny-test");
      EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
      EXPECT_GT(j["created"].get<int64_t>(), 1700000000);
      EXPECT_EQ(j["choices"][0]["text"], want);
      EXPECT_EQ(j["choices"][0]["index"], 0);
      EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
      EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
      EXPECT_EQ(j["usage"]["prompt_tokens"], prompt.size());
      EXPECT_EQ(j["usage"]["completion_tokens"], 12 + i);
      EXPECT_EQ(j["usage"]["total_tokens"], prompt.size() + 12 + i);
    }
  }
  const std::vector<size_t> sizes = engine.batch_sizes();
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), size_t{0}), static_cast<size_t>(kClients));
  EXPECT_GT(*std::max_element(sizes.begin(), sizes.end()), 1u) << "no two requests shared a batch";
  rs.stop();
  const serve::ServerStats s = rs.server->stats();
  EXPECT_EQ(s.requests, kClients);
  EXPECT_EQ(s.batches.rows, kClients);
  EXPECT_EQ(s.batches.batches, static_cast<int64_t>(sizes.size()));
  const std::string log = rs.log_text();
  size_t lines = 0;
  for (size_t at = log.find("serve: cmpl-"); at != std::string::npos; at = log.find("serve: cmpl-", at + 1)) ++lines;
  EXPECT_EQ(lines, static_cast<size_t>(kClients)) << log;
  EXPECT_NE(log.find("serve: stopped: 6 requests answered"), std::string::npos) << log;
}

// A second server on a port one already serves fails to bind (it once shared the port and took
// half of the requests).
TEST(ServeServer, ASecondServerOnATakenPortIsRefused) {
  FakeEngine engine;
  RunningServer first(engine, options(4, 1));
  serve::ServeOptions o = options(4, 1);
  o.host = "127.0.0.1";
  o.port = first.port;
  std::FILE* log = std::tmpfile();
  serve::Server second(engine.fn(), first.tok, o, nullptr, log);
  const std::string where = "serve: cannot listen on 127.0.0.1:" + std::to_string(first.port);
  MFT_EXPECT_ERROR(second.bind(), where.c_str(), "another server on that port?");
  std::fclose(log);
}

TEST(ServeServer, StopsEchoesAndErrors) {
  FakeEngine engine;
  RunningServer rs(engine, options(4, 1));
  // a stop string, streamed and not
  auto r = rs.post(R"({"prompt": "hello", "max_tokens": 20, "stop": ["lo"]})");
  ASSERT_TRUE(r);
  json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["text"], "hel");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);  // the tokens generated, the stop string's included
  r = rs.post(R"({"prompt": "hello", "max_tokens": 20, "stop": "lo", "stream": true})");
  ASSERT_TRUE(r);
  std::string finish;
  EXPECT_EQ(streamed_text(r->body, &finish), "hel");
  EXPECT_EQ(finish, "stop");
  // the stop token ('#' in the fake's prompt) ends the row; its text is not given
  r = rs.post(R"({"prompt": "ab#", "max_tokens": 20})");
  j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["text"], "ab");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // echo, and several prompts as several choices
  r = rs.post(R"({"prompt": ["xy", "z"], "max_tokens": 3, "echo": true})");
  j = json::parse(r->body);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["text"], "xyxyx");
  EXPECT_EQ(j["choices"][1]["text"], "zzzz");
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  // errors: OpenAI's shape, the field named
  struct Bad {
    const char* body;
    int status;
    const char* param;  // "" for null
    const char* words;
  };
  const std::string long_prompt(60, 'a');
  const std::string oversize = json{{"prompt", long_prompt}, {"max_tokens", 10}}.dump();
  const Bad bad[] = {
      {R"({"prompt": "a",)", 400, "", "not valid JSON"},
      {R"({"prompt": "a", "foo": 1})", 400, "foo", "unknown field `foo`"},
      {R"({"prompt": "a", "n": 3})", 400, "n", "`n` = 3"},
      {R"({"prompt": "a", "temperature": -1})", 400, "temperature", "got -1"},
      {oversize.c_str(), 400, "prompt", "has 60 tokens"},
  };
  for (const Bad& b : bad) {
    auto res = rs.post(b.body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, b.status) << b.body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
    const json e = json::parse(res->body)["error"];
    EXPECT_EQ(e["type"], "invalid_request_error");
    if (*b.param)
      EXPECT_EQ(e["param"], b.param);
    else
      EXPECT_TRUE(e["param"].is_null());
    EXPECT_TRUE(e["code"].is_null());
    EXPECT_NE(e["message"].get<std::string>().find(b.words), std::string::npos) << e["message"];
  }
  httplib::Client c("127.0.0.1", rs.port);
  auto nope = c.Get("/v1/nope");
  ASSERT_TRUE(nope);
  EXPECT_EQ(nope->status, 404);
  EXPECT_NE(json::parse(nope->body)["error"]["message"].get<std::string>().find("no route GET /v1/nope"),
            std::string::npos);
  rs.stop();
  EXPECT_EQ(rs.server->stats().refused, 5);
}

TEST(ServeServer, StopFinishesTheRunningBatchAndRefusesTheRest) {
  FakeEngine engine;
  engine.gated = true;
  RunningServer rs(engine, options(1, 0));
  std::thread a([&] {
    auto r = rs.post(R"({"prompt": "run", "max_tokens": 6})");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], "runrun");
  });
  {  // the first request runs (held at the gate)
    std::unique_lock lk(engine.mu);
    engine.cv.wait(lk, [&] { return !engine.batches.empty(); });
  }
  int queued_status = 0;
  std::thread b([&] {
    auto r = rs.post(R"({"prompt": "queued", "max_tokens": 6, "stream": true})");
    if (!r) return;
    queued_status = r->status;
    EXPECT_NE(r->body.find("shutting down"), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos) << r->body;
  });
  while (rs.server->stats().batches.jobs < 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  rs.server->stop();
  b.join();
  EXPECT_EQ(queued_status, 200);  // a stream's status goes out first; the error comes as an event
  // while the running batch drains, new requests are refused
  auto late = rs.post(R"({"prompt": "late"})");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 503);
  EXPECT_EQ(json::parse(late->body)["error"]["type"], "server_error");
  engine.open_gate();
  a.join();
  rs.thread.join();
  EXPECT_EQ(engine.batch_sizes(), std::vector<size_t>{1});
}

// Slow clients on loopback, bounded: each opens a connection, sends a request line and then one
// header line every `interval_s` without ever ending the headers, for at most `max_s` seconds or
// until the server answers or closes. Records what the server sent and when it closed.
class SlowClients {
 public:
  SlowClients(int port, int n, double interval_s, double max_s) : replies_(n), closed_s_(n, -1.0) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([=, this] { dribble(port, i, interval_s, max_s); });
  }
  ~SlowClients() { join(); }
  void join() {
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
  }
  int connected() const { return connected_; }
  const std::string& reply(int i) const { return replies_[static_cast<size_t>(i)]; }
  double closed_after_s(int i) const { return closed_s_[static_cast<size_t>(i)]; }  // -1: not by the server

 private:
  void dribble(int port, int i, double interval_s, double max_s) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      if (fd >= 0) ::close(fd);
      return;
    }
    ++connected_;
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    std::string line = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    while (elapsed() < max_s) {
      if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) < 0) {
        closed_s_[static_cast<size_t>(i)] = elapsed();
        break;
      }
      line = "X-Slow: " + std::to_string(i) + "\r\n";
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(interval_s * 1000)) > 0) {
        char buf[4096];
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n > 0) replies_[static_cast<size_t>(i)].append(buf, static_cast<size_t>(n));
        if (n <= 0) {
          closed_s_[static_cast<size_t>(i)] = elapsed();
          break;
        }
      }
    }
    ::close(fd);
  }

  std::vector<std::string> replies_;
  std::vector<double> closed_s_;
  std::atomic<int> connected_{0};
  std::vector<std::thread> threads_;
};

// 16 connections dribbling header lines (a slowloris) once held every HTTP thread of a server
// with --max-batch 4 (2 x 4 + 4 = 12 threads) and /health got no answer; now it answers at once.
TEST(ServeServer, SlowClientsDoNotStarveTheOthers) {
  FakeEngine engine;
  RunningServer rs(engine, options(4, 1));
  SlowClients slow(rs.port, 16, 0.5, 4.0);
  while (slow.connected() < 16) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // they hold their connections
  httplib::Client c("127.0.0.1", rs.port);
  c.set_connection_timeout(3);
  c.set_read_timeout(3);
  const auto t0 = std::chrono::steady_clock::now();
  auto health = c.Get("/health");
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(health) << "/health got no answer: " << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  EXPECT_LT(took_s, 3.0);
  auto r = rs.post(R"({"prompt": "still here", "max_tokens": 4})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// A request's line and headers get --header-timeout-s in all: a client that dribbles them (a
// header line more often than any per-read timeout) is answered 408 and closed.
TEST(ServeServer, HeadersThatTakeTooLongAreAnswered408) {
  FakeEngine engine;
  serve::ServeOptions o = options(4, 1);
  o.header_timeout_s = 1.5;
  RunningServer rs(engine, o);
  SlowClients slow(rs.port, 3, 0.3, 8.0);
  slow.join();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(slow.reply(i).rfind("HTTP/1.1 408", 0), 0u) << slow.reply(i);
    EXPECT_NE(slow.reply(i).find("did not arrive within 1.5 s"), std::string::npos) << slow.reply(i);
    EXPECT_GE(slow.closed_after_s(i), 1.2);
    EXPECT_LE(slow.closed_after_s(i), 5.0);
  }
  rs.stop();
  EXPECT_EQ(rs.server->stats().refused, 3);
  EXPECT_NE(rs.log_text().find("did not arrive within 1.5 s (--header-timeout-s) from 127.0.0.1"), std::string::npos)
      << rs.log_text();
}

// A read that times out inside the headers (--read-timeout-s) ends the request with a 408 and closes
// the connection: it once answered 400 and kept the connection, and each header line the client
// sent next was taken for a request line (five 400s, one per keep-alive request).
TEST(ServeServer, AReadTimeoutInTheHeadersAnswers408AndCloses) {
  FakeEngine engine;
  serve::ServeOptions o = options(4, 1);
  o.header_timeout_s = 30;
  o.read_timeout_s = 0.4;
  RunningServer rs(engine, o);
  SlowClients slow(rs.port, 2, 1.0, 6.0);
  slow.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(slow.reply(i).rfind("HTTP/1.1 408", 0), 0u) << slow.reply(i);
    EXPECT_EQ(slow.reply(i).find("HTTP/1.1", 1), std::string::npos) << "one answer only:\n" << slow.reply(i);
    EXPECT_NE(slow.reply(i).find("no bytes for 0.4 s (--read-timeout-s)"), std::string::npos) << slow.reply(i);
    EXPECT_GE(slow.closed_after_s(i), 0.3);
    EXPECT_LE(slow.closed_after_s(i), 4.0);
  }
  rs.stop();
  EXPECT_EQ(rs.server->stats().refused, 2);
}

// One client holds at most --max-connections-per-client connections: the next is answered 429 at
// once; once its connections end, it is served again.
TEST(ServeServer, OneClientsConnectionsAreCapped) {
  FakeEngine engine;
  serve::ServeOptions o = options(4, 1);
  o.max_connections_per_client = 3;
  RunningServer rs(engine, o);
  {
    SlowClients slow(rs.port, 3, 0.2, 2.0);
    while (slow.connected() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    httplib::Client c("127.0.0.1", rs.port);
    c.set_read_timeout(3);
    auto refused = c.Get("/health");
    ASSERT_TRUE(refused) << httplib::to_string(refused.error());
    EXPECT_EQ(refused->status, 429);
    EXPECT_NE(json::parse(refused->body)["error"]["message"].get<std::string>().find(
                  "too many connections from 127.0.0.1 (at most 3 at once: --max-connections-per-client)"),
              std::string::npos)
        << refused->body;
  }
  // Its connections are gone (the server sees them close within moments): it is served again.
  httplib::Client c("127.0.0.1", rs.port);
  int status = 0;
  for (int tries = 0; tries < 40 && status != 200; ++tries) {
    if (tries > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto health = c.Get("/health");
    status = health ? health->status : -1;
  }
  EXPECT_EQ(status, 200);
  EXPECT_THROW(serve::check_http_limits({.max_connections = 0}), mf::Error);
  EXPECT_THROW(serve::check_http_limits({.header_timeout_s = 0}), mf::Error);
}

TEST(ServeServer, AClientGoneEndsItsRow) {
  FakeEngine engine;
  engine.step_ms = 5;
  RunningServer rs(engine, options(4, 0));
  httplib::Client c("127.0.0.1", rs.port);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = R"({"prompt": "abc", "max_tokens": 60, "stream": true})";
  req.set_header("Content-Type", "application/json");
  int pieces = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++pieces < 2; };  // then hang up
  c.send(req);
  for (int i = 0; i < 2000 && rs.server->stats().batches.batches == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const serve::ServerStats s = rs.server->stats();
  EXPECT_EQ(s.batches.batches, 1);
  EXPECT_LT(s.batches.completion_tokens, 60) << "the row ran to its end";
  rs.stop();
  EXPECT_EQ(rs.server->stats().cancelled, 1);
  EXPECT_NE(rs.log_text().find("the client closed the connection"), std::string::npos);
}

// ---------------------------------------------------------------- several ranks

// An in-process group for one process's threads: only broadcast, the root's bytes queued for the
// others.
class LocalGroup final : public mf::comm::Communicator {
 public:
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::deque<std::vector<char>>> inbox;
  };
  LocalGroup(int rank, int size, std::shared_ptr<Shared> shared)
      : Communicator(rank, size, ranks(size)), shared_(std::move(shared)) {}
  const char* backend() const override { return "local"; }
  std::shared_ptr<Communicator> split(int, int) override { MF_THROW("LocalGroup: no split"); }

 protected:
  struct Done final : mf::comm::Work {
    explicit Done(std::string w) : Work(std::move(w)) {}
    void wait() override {}
    bool is_completed() override { return true; }
  };
  mf::comm::WorkPtr do_broadcast(mf::Tensor& t, int root, std::string what) override {
    std::unique_lock lk(shared_->mu);
    if (rank() == root) {
      const char* p = static_cast<const char*>(t.raw_data());
      for (int r = 0; r < size(); ++r)
        if (r != root) shared_->inbox[static_cast<size_t>(r)].emplace_back(p, p + t.nbytes());
      shared_->cv.notify_all();
    } else {
      auto& box = shared_->inbox[static_cast<size_t>(rank())];
      shared_->cv.wait(lk, [&] { return !box.empty(); });
      MF_CHECK(box.front().size() == t.nbytes(), "LocalGroup: broadcast of ", t.nbytes(), " bytes, ",
               box.front().size(), " sent");
      std::memcpy(t.raw_data(), box.front().data(), t.nbytes());
      box.pop_front();
    }
    return std::make_shared<Done>(what);
  }
  mf::comm::WorkPtr do_all_reduce(mf::Tensor&, mf::comm::ReduceOp, std::string) override { MF_THROW("no"); }
  mf::comm::WorkPtr do_reduce_scatter(const mf::Tensor&, mf::Tensor&, mf::comm::ReduceOp, std::string) override {
    MF_THROW("no");
  }
  mf::comm::WorkPtr do_all_gather(const mf::Tensor&, mf::Tensor&, std::string) override { MF_THROW("no"); }
  mf::comm::WorkPtr do_all_to_all(const mf::Tensor&, mf::Tensor&, std::string) override { MF_THROW("no"); }
  mf::comm::WorkPtr do_send(const mf::Tensor&, int, int, std::string) override { MF_THROW("no"); }
  mf::comm::WorkPtr do_recv(mf::Tensor&, int, int, std::string) override { MF_THROW("no"); }
  mf::comm::WorkPtr do_barrier(std::string) override { MF_THROW("no"); }
  mf::DeviceType device_type() const override { return mf::DeviceType::kCPU; }

 private:
  static std::vector<int> ranks(int n) {
    std::vector<int> r(static_cast<size_t>(n));
    std::iota(r.begin(), r.end(), 0);
    return r;
  }
  std::shared_ptr<Shared> shared_;
};

TEST(ServeServer, FollowerRanksRunTheSameBatches) {
  auto shared = std::make_shared<LocalGroup::Shared>();
  shared->inbox.resize(3);
  std::vector<std::shared_ptr<LocalGroup>> group;
  for (int r = 0; r < 3; ++r) group.push_back(std::make_shared<LocalGroup>(r, 3, shared));
  FakeEngine lead, follower1, follower2;
  int64_t followed1 = -1, followed2 = -1;
  std::thread f1([&] { followed1 = serve::follow(follower1.fn(), *group[1]); });
  std::thread f2([&] { followed2 = serve::follow(follower2.fn(), *group[2]); });
  {
    RunningServer rs(lead, options(4, 50), group[0]);
    std::vector<std::thread> clients;
    for (int i = 0; i < 5; ++i)
      clients.emplace_back([&, i] {
        auto r = rs.post(json{{"prompt", "r" + std::to_string(i)}, {"max_tokens", 4}, {"temperature", 0.5},
                              {"seed", i}, {"stream", i == 0}}
                             .dump());
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200);
      });
    for (auto& t : clients) t.join();
    rs.stop();  // sends the followers the shutdown message
  }
  f1.join();
  f2.join();
  ASSERT_EQ(followed1, static_cast<int64_t>(lead.batches.size()));
  ASSERT_EQ(followed2, followed1);
  for (size_t b = 0; b < lead.batches.size(); ++b) {
    ASSERT_EQ(follower1.batches[b].size(), lead.batches[b].size());
    for (size_t r = 0; r < lead.batches[b].size(); ++r) {
      const infer::GenerationRequest& want = lead.batches[b][r];
      for (const FakeEngine* f : {&follower1, &follower2}) {
        const infer::GenerationRequest& got = f->batches[b][r];
        EXPECT_EQ(got.prompt, want.prompt);
        EXPECT_EQ(got.max_new_tokens, want.max_new_tokens);
        EXPECT_EQ(got.sampling.seed, want.sampling.seed);
        EXPECT_EQ(got.sampling.temperature, want.sampling.temperature);
        EXPECT_EQ(got.stop_tokens, want.stop_tokens);
      }
    }
  }
}

}  // namespace
