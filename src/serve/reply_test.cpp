// ReplyBuilder on the fixture's tokenizer: a chat reply split into reasoning
// and content, stop sequences cutting the content only, stop ids never text,
// tool calls parsed at the end, logprob token bytes.
#include "serve/reply.h"

#include <gtest/gtest.h>

namespace sluice::serve {
namespace {

const text::Tokenizer& tokenizer() {
  static text::Tokenizer tok = text::Tokenizer::load(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model");
  return tok;
}

// Feeds `reply` (specials spelled out) token by token; returns all released text.
Piece feed(ReplyBuilder& b, const std::string& reply, bool* stopped = nullptr, bool finish = true) {
  std::vector<int> ids = tokenizer().encode(reply, /*allow_special=*/true);
  Piece all;
  for (int id : ids) {
    TokenEvent ev;
    ev.id = id;
    Piece p;
    Verdict v = b.push(ev, p);
    all.reasoning += p.reasoning;
    all.content += p.content;
    for (auto& t : p.logprobs) all.logprobs.push_back(t);
    if (v == Verdict::stop) {
      if (stopped) *stopped = true;
      return all;
    }
  }
  if (finish) {
    Piece p;
    b.finish(p);
    all.reasoning += p.reasoning;
    all.content += p.content;
  }
  return all;
}

TEST(Reply, ChatSplitsReasoningFromContent) {
  ReplyBuilder b(tokenizer(), {true, true, {}, false});
  Piece p = feed(b, "Let me think.<|close|>think<|sep|><|open|>response<|sep|>Hello there!<|close|>response<|sep|>"
                    "<|close|>message<|sep|>");
  EXPECT_EQ(p.reasoning, "Let me think.");
  EXPECT_EQ(p.content, "Hello there!");
  EXPECT_GT(b.reasoning_tokens(), 0);
  EXPECT_TRUE(b.tool_calls().empty());
  EXPECT_FALSE(b.stop_matched());
}

TEST(Reply, StopSequencesCutTheContentNotTheReasoning) {
  ReplyBuilder b(tokenizer(), {true, true, {"END"}, false});
  bool stopped = false;
  Piece p = feed(b, "An END in thought.<|close|>think<|sep|><|open|>response<|sep|>Answer ENDING here", &stopped);
  EXPECT_TRUE(stopped);
  EXPECT_TRUE(b.stop_matched());
  EXPECT_EQ(p.reasoning, "An END in thought.");
  EXPECT_EQ(p.content, "Answer ");
  Piece more;
  b.finish(more);  // nothing after a stop
  EXPECT_TRUE(more.content.empty());
}

TEST(Reply, CompletionTextStopIdsAndLogprobBytes) {
  ReplyBuilder b(tokenizer(), {false, false, {"zz"}, true});
  Piece p = feed(b, "plain text z");
  EXPECT_EQ(p.content, "plain text z");  // the held "z" is released at the end
  EXPECT_FALSE(p.logprobs.empty());
  std::string joined;
  for (auto& t : p.logprobs) joined += t.bytes;
  EXPECT_EQ(joined, "plain text z");

  ReplyBuilder c(tokenizer(), {false, false, {}, true});
  TokenEvent stop_ev;
  stop_ev.id = tokenizer().require_special("<|end_of_msg|>");
  stop_ev.is_stop_id = true;
  Piece q;
  EXPECT_EQ(c.push(stop_ev, q), Verdict::go);
  EXPECT_TRUE(q.content.empty());
  EXPECT_TRUE(q.logprobs.empty());
}

TEST(Reply, ToolCallsAreParsedAtTheEnd) {
  ReplyBuilder b(tokenizer(), {true, true, {}, false});
  Piece p = feed(b,
                 "Need weather.<|close|>think<|sep|><|open|>response<|sep|>Calling.<|close|>response<|sep|>"
                 "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
                 "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|>"
                 "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>");
  EXPECT_EQ(p.reasoning, "Need weather.");
  EXPECT_EQ(p.content, "Calling.");
  ASSERT_EQ(b.tool_calls().size(), 1u);
  const nlohmann::json& call = b.tool_calls()[0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(nlohmann::json::parse(call["function"]["arguments"].get<std::string>()),
            nlohmann::json({{"city", "Paris"}}));
}

TEST(Reply, ThinkingOffIsAllContent) {
  ReplyBuilder b(tokenizer(), {true, false, {}, false});
  Piece p = feed(b, "Direct answer.<|close|>response<|sep|><|close|>message<|sep|>");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "Direct answer.");
  EXPECT_EQ(b.reasoning_tokens(), 0);
}

}  // namespace
}  // namespace sluice::serve
