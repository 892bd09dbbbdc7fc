// serve/reply.h — from generated ids to what a client sees.
//
// A ReplyBuilder takes the tokens of one generation as generate() reports them
// and releases text as it becomes final: UTF-8-safe detokenizing, the split of
// a chat reply into reasoning and content (text/chat.h), stop sequences on the
// content (engine StopMatcher: held back while they might match, never
// released once matched), and the bytes/logprobs of each token for logprobs.
// Stop sequences apply to the content channel only: reasoning is never cut.
// The server and `sluice run` both use it.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "serve/response.h"
#include "text/chat.h"
#include "text/detokenizer.h"
#include "text/tokenizer.h"

namespace sluice::serve {

// Text released since the last piece, and the tokens sampled meanwhile.
struct Piece {
  std::string reasoning, content;
  std::vector<TokenInfo> logprobs;
  bool has_text() const { return !reasoning.empty() || !content.empty(); }
};

struct ReplyOptions {
  bool chat = false;      // split reasoning / content / tools (else all is content)
  bool thinking = true;   // chat: the prompt opened the think channel
  std::vector<std::string> stop;
  bool logprobs = false;  // record TokenInfo for each token (not for stop ids)
};

class ReplyBuilder {
 public:
  ReplyBuilder(const text::Tokenizer& tok, ReplyOptions opt);

  // One generated token: appends what became final to `out`. Returns
  // Verdict::stop once a stop sequence matched, else Verdict::go.
  Verdict push(const TokenEvent& ev, Piece& out);
  // The generation ended (not cancelled): releases held text, parses tool calls.
  void finish(Piece& out);

  bool stop_matched() const { return stop_.matched(); }
  const nlohmann::json& tool_calls() const { return tool_calls_; }
  int reasoning_tokens() const { return reasoning_tokens_; }

 private:
  void take(const std::string& text, bool final, Piece& out);

  const text::Tokenizer& tok_;
  ReplyOptions opt_;
  text::StreamDecoder dec_;
  text::ReplyStream split_;
  StopMatcher stop_;
  nlohmann::json tool_calls_ = nlohmann::json::array();
  int reasoning_tokens_ = 0;
};

}  // namespace sluice::serve
