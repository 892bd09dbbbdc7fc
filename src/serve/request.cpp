// serve/request.cpp — checking OpenAI requests (serve/request.h).
#include "serve/request.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "base/json_parse.h"

namespace sluice::serve {

void check_json_depth(std::string_view text, int max_depth) {
  if (json_too_deep(text, max_depth))
    refuse("", "The JSON body is nested deeper than " + std::to_string(max_depth) + " levels.", "invalid_json");
}

namespace {

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

[[noreturn]] void wrong_type(const std::string& param, const json& v, const std::string& want) {
  refuse(param, "Invalid type for '" + param + "': expected " + want + ", but got " + type_name(v) + ".",
         "invalid_type");
}

[[noreturn]] void unsupported(const std::string& param, const std::string& why) {
  refuse(param, "'" + param + "' is not supported by sluice: " + why, "unsupported_parameter");
}

bool present(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

// An integer (JSON integers, or floats with an integral value) within [lo, hi].
// Compared exactly: a float such as 9.3e18 is past int64 (and a double cannot
// hold INT64_MAX: 2^63 compares equal to it), so it is refused, never cast.
int64_t get_int(const json& v, const std::string& param, int64_t lo, int64_t hi) {
  bool in_range;
  int64_t n = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    in_range = u <= uint64_t(std::numeric_limits<int64_t>::max()) && int64_t(u) >= lo && int64_t(u) <= hi;
    n = int64_t(u);
  } else if (v.is_number_integer()) {
    n = v.get<int64_t>();
    in_range = n >= lo && n <= hi;
  } else if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()) {
    const double d = v.get<double>();
    in_range = d >= -0x1p63 && d < 0x1p63;  // representable as int64
    if (in_range) {
      n = int64_t(d);
      in_range = n >= lo && n <= hi;
    }
  } else {
    wrong_type(param, v, "an integer");
  }
  if (!in_range)
    refuse(param, "Invalid '" + param + "': " + v.dump() + " is out of range; expected " + std::to_string(lo) +
                      " to " + std::to_string(hi) + ".");
  return n;
}

double get_number(const json& v, const std::string& param, double lo, double hi) {
  if (!v.is_number()) wrong_type(param, v, "a number");
  double d = v.get<double>();
  if (!(d >= lo && d <= hi))
    refuse(param, "Invalid '" + param + "': " + v.dump() + " is out of range; expected a number from " +
                      json(lo).dump() + " to " + json(hi).dump() + ".");
  return d;
}

bool get_bool(const json& v, const std::string& param) {
  if (!v.is_boolean()) wrong_type(param, v, "a boolean");
  return v.get<bool>();
}

const std::string& get_string(const json& v, const std::string& param) {
  if (!v.is_string()) wrong_type(param, v, "a string");
  return v.get_ref<const std::string&>();
}

// Fields vLLM, llama.cpp or SGLang clients send that sluice does not implement;
// lenient mode ignores them (and says so in the log).
const std::set<std::string> kVendorFields = {
    "min_p", "repetition_penalty", "chat_template_kwargs", "typical_p", "top_a", "tfs_z", "mirostat",
    "mirostat_tau", "mirostat_eta", "min_tokens", "length_penalty", "use_beam_search", "skip_special_tokens",
    "spaces_between_special_tokens", "include_stop_str_in_output", "add_generation_prompt", "continue_final_message",
    "cache_prompt", "n_probs", "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n",
    "xtc_probability", "xtc_threshold", "repeat_penalty", "repeat_last_n", "penalize_nl", "truncate_prompt_tokens",
    "guided_json", "guided_regex", "guided_choice", "guided_grammar", "grammar", "chat_template",
    "documents", "priority", "best_of_n", "enable_thinking", "thinking", "separate_reasoning", "top_n_sigma"};

void check_known(const json& body, const std::set<std::string>& known, const Limits& lim, GenerationRequest& r) {
  for (auto& [k, v] : body.items()) {
    if (known.count(k)) continue;
    if (lim.lenient && kVendorFields.count(k)) {
      r.ignored.push_back(k);
      continue;
    }
    std::string hint = kVendorFields.count(k) ? " (sluice does not implement it; the server's lenient mode ignores it)" : "";
    refuse(k, "Unrecognized request argument supplied: " + k + hint, "unknown_parameter");
  }
}

void parse_model(const json& body, const Limits& lim, GenerationRequest& r) {
  if (!present(body, "model")) {
    if (!lim.lenient) refuse("model", "you must provide a model parameter", "missing_required_parameter");
    r.model = lim.model_id;  // vLLM and llama.cpp take the served model too
    return;
  }
  r.model = get_string(body["model"], "model");
  if (r.model != lim.model_id)
    throw ApiError{404, "The model '" + r.model + "' does not exist. This server serves '" + lim.model_id + "'.",
                   "invalid_request_error", "model", "model_not_found"};
}

// A request before its fields are read: the model's defaults.
GenerationRequest with_defaults(const Limits& lim) {
  GenerationRequest r;
  const text::ChatDefaults& d = lim.defaults;
  r.sampling.temperature = d.temperature;
  r.sampling.top_p = d.top_p;
  if (d.reasoning_effort == "none")
    r.thinking = false;  // reasoning_effort keeps K3's default for a request that turns thinking on
  else
    r.reasoning_effort = d.reasoning_effort;
  return r;
}

// Sampling, length, stop, streaming: the fields both endpoints share.
void parse_common(const json& body, const Limits& lim, GenerationRequest& r) {
  auto max_tokens_of = [&](const char* key) -> int {
    if (!present(body, key)) return 0;
    int64_t n = get_int(body[key], key, 1, std::numeric_limits<int32_t>::max());
    if (n > lim.max_tokens)
      refuse(key, std::string(key) + " is too large: " + std::to_string(n) + ". This server allows at most " +
                      std::to_string(lim.max_tokens) + " completion tokens per request (--max-tokens).");
    return int(n);
  };
  int a = max_tokens_of("max_tokens"), b = max_tokens_of("max_completion_tokens");
  if (a && b && a != b)
    refuse("max_completion_tokens", "max_tokens and max_completion_tokens disagree; give one of them.");
  r.max_tokens = b ? b : a;

  if (present(body, "temperature")) r.sampling.temperature = float(get_number(body["temperature"], "temperature", 0, 2));
  if (present(body, "top_p")) {
    double p = get_number(body["top_p"], "top_p", 0, 1);
    if (p == 0)
      r.sampling.top_k = 1;  // the smallest set reaching 0 is the most probable token
    else
      r.sampling.top_p = float(p);
  }
  if (present(body, "top_k") && r.sampling.top_k != 1)
    r.sampling.top_k = int(get_int(body["top_k"], "top_k", 0, std::numeric_limits<int32_t>::max()));
  if (present(body, "seed")) {
    // An int64, as OpenAI's API takes it; negative seeds wrap (-1: 2^64 - 1).
    r.sampling.seed = uint64_t(
        get_int(body["seed"], "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    r.seed_given = true;
  }

  if (present(body, "stop")) {
    const json& s = body["stop"];
    if (s.is_string()) {
      r.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      if (s.size() > 4) refuse("stop", "Invalid 'stop': at most 4 stop sequences are allowed.");
      for (size_t i = 0; i < s.size(); i++) r.stop.push_back(get_string(s[i], "stop[" + std::to_string(i) + "]"));
    } else {
      wrong_type("stop", s, "a string or an array of strings");
    }
    for (auto& x : r.stop) {
      if (x.empty()) refuse("stop", "Invalid 'stop': stop sequences must not be empty.");
      if (x.size() > kMaxStopLength)
        refuse("stop", "Invalid 'stop': a stop sequence is at most " + std::to_string(kMaxStopLength) + " bytes.");
    }
  }

  if (present(body, "n") && get_int(body["n"], "n", 1, 128) != 1)
    unsupported("n", "it generates one choice per request (n = 1).");
  for (const char* k : {"presence_penalty", "frequency_penalty"})
    if (present(body, k) && get_number(body[k], k, -2, 2) != 0) unsupported(k, "penalties are not implemented.");
  if (present(body, "logit_bias")) {
    if (!body["logit_bias"].is_object()) wrong_type("logit_bias", body["logit_bias"], "an object");
    if (!body["logit_bias"].empty()) unsupported("logit_bias", "logit biases are not implemented.");
  }
  if (present(body, "user")) get_string(body["user"], "user");  // accepted, changes nothing
  if (present(body, "return_token_ids")) r.return_token_ids = get_bool(body["return_token_ids"], "return_token_ids");
  if (present(body, "ignore_eos")) r.ignore_eos = get_bool(body["ignore_eos"], "ignore_eos");

  if (present(body, "stream")) r.stream = get_bool(body["stream"], "stream");
  if (present(body, "stream_options")) {
    const json& o = body["stream_options"];
    if (!o.is_object()) wrong_type("stream_options", o, "an object");
    if (!r.stream)
      refuse("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.");
    for (auto& [k, v] : o.items()) {
      if (k == "include_usage")
        r.include_usage = v.is_null() ? false : get_bool(v, "stream_options.include_usage");
      else if (k == "include_obfuscation")
        get_bool(v, "stream_options.include_obfuscation");  // sluice never pads chunks
      else if (k == "include_progress")  // extension: prompt_progress events during prefill
        r.include_progress = v.is_null() ? false : get_bool(v, "stream_options.include_progress");
      else
        refuse("stream_options." + k, "Unrecognized request argument supplied: stream_options." + k,
               "unknown_parameter");
    }
  }
}

const char* const kRoles[] = {"system", "developer", "user", "assistant", "tool"};

// Text parts only; the model has no vision or audio path.
void check_content(const json& c, const std::string& where, bool may_be_null) {
  if (c.is_null()) {
    if (!may_be_null) refuse(where, "Invalid '" + where + "': content is required for this message.");
    return;
  }
  if (c.is_string()) return;
  if (!c.is_array()) wrong_type(where, c, "a string or an array of content parts");
  for (size_t j = 0; j < c.size(); j++) {
    const std::string pw = where + "[" + std::to_string(j) + "]";
    const json& part = c[j];
    if (!part.is_object()) wrong_type(pw, part, "an object");
    if (!part.contains("type")) refuse(pw + ".type", "Missing required parameter: '" + pw + ".type'.",
                                       "missing_required_parameter");
    const std::string& type = get_string(part["type"], pw + ".type");
    if (type != "text")
      refuse(pw + ".type",
             "Content parts of type '" + type + "' are not supported: sluice serves a text-only model.",
             "unsupported_content");
    if (!part.contains("text")) refuse(pw + ".text", "Missing required parameter: '" + pw + ".text'.",
                                       "missing_required_parameter");
    get_string(part["text"], pw + ".text");
    for (auto& [k, v] : part.items())
      if (k != "type" && k != "text")
        refuse(pw + "." + k, "Unrecognized argument in a text part: " + k, "unknown_parameter");
  }
}

void check_tool_calls(const json& calls, const std::string& where) {
  if (!calls.is_array()) wrong_type(where, calls, "an array");
  for (size_t j = 0; j < calls.size(); j++) {
    const std::string cw = where + "[" + std::to_string(j) + "]";
    const json& c = calls[j];
    if (!c.is_object()) wrong_type(cw, c, "an object");
    if (c.contains("id")) get_string(c["id"], cw + ".id");
    if (c.contains("type") && get_string(c["type"], cw + ".type") != "function")
      refuse(cw + ".type", "Only tool calls of type 'function' are supported.");
    if (!c.contains("function") || !c["function"].is_object())
      refuse(cw + ".function", "Invalid '" + cw + ".function': expected an object with name and arguments.");
    const json& f = c["function"];
    if (!f.contains("name")) refuse(cw + ".function.name", "Missing required parameter: '" + cw + ".function.name'.",
                                    "missing_required_parameter");
    get_string(f["name"], cw + ".function.name");
    if (f.contains("arguments") && !f["arguments"].is_string() && !f["arguments"].is_object())
      wrong_type(cw + ".function.arguments", f["arguments"], "a string");
  }
}

void check_messages(const json& msgs) {
  if (!msgs.is_array()) wrong_type("messages", msgs, "an array");
  if (msgs.empty()) refuse("messages", "Invalid 'messages': empty array. Expected an array with minimum length 1.",
                           "empty_array");
  for (size_t i = 0; i < msgs.size(); i++) {
    const std::string mw = "messages[" + std::to_string(i) + "]";
    const json& m = msgs[i];
    if (!m.is_object()) wrong_type(mw, m, "an object");
    if (!m.contains("role"))
      refuse(mw + ".role", "Missing required parameter: '" + mw + ".role'.", "missing_required_parameter");
    const std::string& role = get_string(m["role"], mw + ".role");
    bool known = false;
    for (const char* r : kRoles) known = known || role == r;
    if (!known)
      refuse(mw + ".role", "Invalid value: '" + role +
                               "'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'.");
    const bool assistant = role == "assistant";
    for (auto& [k, v] : m.items()) {
      if (k == "role" || k == "content") continue;
      if (k == "name") {
        get_string(v, mw + ".name");
      } else if (k == "tool_calls" && assistant) {
        check_tool_calls(v, mw + ".tool_calls");
      } else if (k == "reasoning_content" && assistant) {
        if (!v.is_null()) get_string(v, mw + ".reasoning_content");
      } else if (k == "refusal" && assistant) {
        if (!v.is_null()) get_string(v, mw + ".refusal");
      } else if (k == "tool_call_id" && role == "tool") {
        get_string(v, mw + ".tool_call_id");
      } else if ((k == "audio" || k == "function_call") && v.is_null()) {
      } else {
        refuse(mw + "." + k, "Unrecognized argument in a " + role + " message: " + k, "unknown_parameter");
      }
    }
    if (!m.contains("content") && !(assistant && m.contains("tool_calls")))
      refuse(mw + ".content", "Missing required parameter: '" + mw + ".content'.", "missing_required_parameter");
    check_content(m.contains("content") ? m["content"] : json(nullptr), mw + ".content", assistant);
  }
}

// none | low | medium (taken as high: text::thinking_effort) | high | max; lenient
// mode maps OpenAI's "minimal" to low.
void set_reasoning_effort(const std::string& e, const std::string& param, const Limits& lim, GenerationRequest& r) {
  const std::string k3 = text::thinking_effort(e);
  if (k3 == "none") {
    r.thinking = false;
  } else if (!k3.empty()) {
    r.thinking = true;
    r.reasoning_effort = k3;
  } else if (e == "minimal" && lim.lenient) {
    r.thinking = true;
    r.reasoning_effort = "low";
    r.ignored.push_back(param + "=minimal (as low)");
  } else {
    refuse(param, "Invalid value: '" + e +
                      "'. Supported values are: 'none' (no thinking), 'low', 'medium', 'high' and 'max'" +
                      (e == "minimal" ? " ('minimal' is taken as 'low' in the server's lenient mode)." : "."));
  }
}

// The thinking switches other servers' clients send, as one answer: on, off, or not said.
// chat_template_kwargs {thinking, enable_thinking} (vLLM, SGLang: the template's
// variables), enable_thinking (Qwen-style servers), thinking {type: enabled|disabled}
// (Moonshot's own API) or a boolean. Switches that disagree are refused.
std::optional<bool> thinking_switch(const json& body, const Limits& lim, GenerationRequest& r) {
  std::optional<bool> on;
  std::string first;
  auto take = [&](bool v, const std::string& param) {
    if (on && *on != v)
      refuse(param, "'" + param + "' and '" + first + "' disagree about thinking; give one of them.");
    if (!on) first = param;
    on = v;
  };
  if (present(body, "chat_template_kwargs")) {
    const json& k = body["chat_template_kwargs"];
    if (!k.is_object()) wrong_type("chat_template_kwargs", k, "an object");
    for (auto& [key, v] : k.items()) {
      const std::string param = "chat_template_kwargs." + key;
      if ((key == "thinking" || key == "enable_thinking") && !v.is_null()) {
        take(get_bool(v, param), param);
      } else if (lim.lenient) {
        r.ignored.push_back(param);
      } else if (!v.is_null()) {
        refuse(param, "Unrecognized request argument supplied: " + param +
                          " (sluice's chat template takes 'thinking' and 'enable_thinking')", "unknown_parameter");
      }
    }
  }
  if (present(body, "enable_thinking")) take(get_bool(body["enable_thinking"], "enable_thinking"), "enable_thinking");
  if (present(body, "thinking")) {
    const json& t = body["thinking"];
    if (t.is_boolean()) {
      take(t.get<bool>(), "thinking");
    } else if (t.is_object()) {
      if (!t.contains("type"))
        refuse("thinking.type", "Missing required parameter: 'thinking.type'.", "missing_required_parameter");
      const std::string& type = get_string(t["type"], "thinking.type");
      if (type != "enabled" && type != "disabled")
        refuse("thinking.type", "Invalid value: '" + type + "'. Supported values are: 'enabled' and 'disabled'.");
      take(type == "enabled", "thinking.type");
    } else {
      wrong_type("thinking", t, "an object ({\"type\": \"disabled\"}) or a boolean");
    }
  }
  return on;
}

// reasoning_effort and the thinking switches, over the model's default.
void parse_thinking(const json& body, const Limits& lim, GenerationRequest& r) {
  const std::optional<bool> on = thinking_switch(body, lim, r);
  if (present(body, "reasoning_effort")) {
    const std::string& e = get_string(body["reasoning_effort"], "reasoning_effort");
    set_reasoning_effort(e, "reasoning_effort", lim, r);
    if (on && *on != r.thinking)
      refuse("reasoning_effort", "reasoning_effort '" + e + "' and the thinking switch (" + (*on ? "on" : "off") +
                                     ") disagree; give one of them.");
  } else if (on) {
    r.thinking = *on;  // on: the model's effort, else K3's default (max)
  }
}

void check_tools(const json& tools) {
  if (!tools.is_array()) wrong_type("tools", tools, "an array");
  if (tools.size() > kMaxTools)
    refuse("tools", "Invalid 'tools': at most " + std::to_string(kMaxTools) + " tools are allowed.", "array_above_max_length");
  for (size_t i = 0; i < tools.size(); i++) {
    const std::string tw = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object()) wrong_type(tw, t, "an object");
    if (!t.contains("type") || get_string(t["type"], tw + ".type") != "function")
      refuse(tw + ".type", "Only tools of type 'function' are supported.");
    if (!t.contains("function") || !t["function"].is_object())
      refuse(tw + ".function", "Invalid '" + tw + ".function': expected an object.");
    const json& f = t["function"];
    if (!f.contains("name")) refuse(tw + ".function.name", "Missing required parameter: '" + tw + ".function.name'.",
                                    "missing_required_parameter");
    const std::string& name = get_string(f["name"], tw + ".function.name");
    bool ok_name = !name.empty() && name.size() <= kMaxToolNameLength;
    for (char ch : name) ok_name = ok_name && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-');
    if (!ok_name)
      refuse(tw + ".function.name", "Invalid '" + tw + ".function.name': a tool name is 1 to " +
                                        std::to_string(kMaxToolNameLength) + " letters, digits, '_' or '-'.");
    if (f.contains("parameters") && !f["parameters"].is_object())
      wrong_type(tw + ".function.parameters", f["parameters"], "an object");
  }
}

}  // namespace

GenerationRequest parse_chat_request(const json& body, const Limits& lim) {
  if (!body.is_object()) refuse("", "The request body must be a JSON object.", "invalid_type");
  GenerationRequest r = with_defaults(lim);
  check_known(body, {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
                     "seed", "stop", "n", "stream", "stream_options", "logprobs", "top_logprobs",
                     "reasoning_effort", "presence_penalty", "frequency_penalty", "logit_bias", "user", "tools",
                     "tool_choice", "parallel_tool_calls", "response_format", "metadata", "store", "service_tier",
                     "modalities", "audio", "prediction", "functions", "function_call", "web_search_options",
                     "safety_identifier", "prompt_cache_key", "verbosity", "return_token_ids", "ignore_eos",
                     "chat_template_kwargs", "enable_thinking", "thinking"},
              lim, r);
  r.endpoint = Endpoint::chat;
  parse_model(body, lim, r);
  if (!body.contains("messages"))
    refuse("messages", "Missing required parameter: 'messages'.", "missing_required_parameter");
  check_messages(body["messages"]);
  r.messages = body["messages"];
  parse_common(body, lim, r);

  if (present(body, "logprobs")) r.logprobs = get_bool(body["logprobs"], "logprobs");
  if (present(body, "top_logprobs")) {
    r.top_logprobs = int(get_int(body["top_logprobs"], "top_logprobs", 0, 20));
    if (!r.logprobs) refuse("top_logprobs", "top_logprobs requires logprobs to be true.");
  }

  parse_thinking(body, lim, r);

  if (present(body, "tools")) {
    check_tools(body["tools"]);
    if (!body["tools"].empty()) r.tools = body["tools"];
  }
  if (present(body, "tool_choice")) {
    const json& c = body["tool_choice"];
    if (c.is_object()) unsupported("tool_choice", "forcing one named tool is not implemented; use 'required'.");
    const std::string& s = get_string(c, "tool_choice");
    if (s != "auto" && s != "none" && s != "required")
      refuse("tool_choice", "Invalid value: '" + s + "'. Supported values are: 'none', 'auto' and 'required'.");
    if (s != "auto") r.tool_choice = s;
  }
  if (present(body, "parallel_tool_calls") && !get_bool(body["parallel_tool_calls"], "parallel_tool_calls"))
    unsupported("parallel_tool_calls", "the model may call several tools in one reply and sluice cannot stop it.");
  if (present(body, "response_format")) {
    const json& f = body["response_format"];
    if (!f.is_object()) wrong_type("response_format", f, "an object");
    if (!f.contains("type")) refuse("response_format.type", "Missing required parameter: 'response_format.type'.",
                                    "missing_required_parameter");
    const std::string& t = get_string(f["type"], "response_format.type");
    if (t == "json_schema") {
      if (!f.contains("json_schema") || !f["json_schema"].is_object())
        refuse("response_format.json_schema", "Missing required parameter: 'response_format.json_schema'.",
               "missing_required_parameter");
      const json& js = f["json_schema"];
      if (js.contains("strict") && js["strict"].is_boolean() && js["strict"].get<bool>())
        unsupported("response_format.json_schema.strict",
                    "output is not constrained to the schema (the model is instructed, not forced).");
      r.response_format = f;
    } else if (t == "json_object") {
      r.response_format = f;
    } else if (t != "text") {
      refuse("response_format.type",
             "Invalid value: '" + t + "'. Supported values are: 'text', 'json_object' and 'json_schema'.");
    }
  }
  if (present(body, "metadata") && !body["metadata"].is_object())
    wrong_type("metadata", body["metadata"], "an object");
  if (present(body, "store") && get_bool(body["store"], "store"))
    unsupported("store", "sluice stores nothing.");
  if (present(body, "service_tier")) {
    const std::string& t = get_string(body["service_tier"], "service_tier");
    if (t != "auto" && t != "default") unsupported("service_tier", "there is one tier.");
  }
  for (const char* k : {"safety_identifier", "prompt_cache_key"})
    if (present(body, k)) get_string(body[k], k);
  if (present(body, "modalities")) {
    const json& m = body["modalities"];
    if (!m.is_array()) wrong_type("modalities", m, "an array");
    for (auto& x : m)
      if (!x.is_string() || x.get<std::string>() != "text") unsupported("modalities", "the model writes text only.");
  }
  for (const char* k : {"audio", "prediction", "functions", "function_call", "web_search_options", "verbosity"})
    if (present(body, k)) unsupported(k, "not implemented.");
  return r;
}

GenerationRequest parse_completion_request(const json& body, const Limits& lim) {
  if (!body.is_object()) refuse("", "The request body must be a JSON object.", "invalid_type");
  GenerationRequest r = with_defaults(lim);
  check_known(body, {"model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "n",
                     "stream", "stream_options", "logprobs", "echo", "suffix", "best_of", "presence_penalty",
                     "frequency_penalty", "logit_bias", "user", "return_token_ids", "ignore_eos"},
              lim, r);
  r.endpoint = Endpoint::completions;
  r.api = Api::completions;
  parse_model(body, lim, r);
  if (!present(body, "prompt"))
    refuse("prompt", "Missing required parameter: 'prompt'.", "missing_required_parameter");
  const json& p = body["prompt"];
  // A string, or token ids; OpenAI's batch forms are accepted with one element.
  auto ids_of = [&](const json& a, const std::string& where) {
    for (size_t i = 0; i < a.size(); i++)
      r.prompt_ids.push_back(int(get_int(a[i], where + "[" + std::to_string(i) + "]", 0, lim.vocab_size - 1)));
  };
  if (p.is_string()) {
    r.prompt_text = p.get<std::string>();
    r.prompt_is_text = true;
  } else if (p.is_array() && !p.empty() && p[0].is_string()) {
    if (p.size() != 1) unsupported("prompt", "a batch of prompts (one request, one prompt).");
    r.prompt_text = p[0].get<std::string>();
    r.prompt_is_text = true;
  } else if (p.is_array() && !p.empty() && p[0].is_array()) {
    if (p.size() != 1) unsupported("prompt", "a batch of prompts (one request, one prompt).");
    ids_of(p[0], "prompt[0]");
  } else if (p.is_array()) {
    ids_of(p, "prompt");
  } else {
    wrong_type("prompt", p, "a string, an array of token ids, or an array with one of either");
  }
  if (r.prompt_is_text ? r.prompt_text.empty() : r.prompt_ids.empty())
    refuse("prompt", "Invalid 'prompt': the prompt is empty.");
  parse_common(body, lim, r);
  if (present(body, "logprobs")) {
    r.top_logprobs = int(get_int(body["logprobs"], "logprobs", 0, 5));
    r.logprobs = true;
  }
  if (present(body, "echo") && get_bool(body["echo"], "echo")) unsupported("echo", "prompts are not echoed.");
  if (present(body, "suffix")) unsupported("suffix", "insertion is not implemented.");
  if (present(body, "best_of") && get_int(body["best_of"], "best_of", 1, 20) != 1)
    unsupported("best_of", "it generates one choice per request.");
  return r;
}

GenerationRequest parse_responses_request(const json& body, const Limits& lim) {
  if (!body.is_object()) refuse("", "The request body must be a JSON object.", "invalid_type");
  GenerationRequest r = with_defaults(lim);
  check_known(body, {"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "top_k", "seed",
                     "stream", "reasoning", "store", "metadata", "user", "text", "truncation", "parallel_tool_calls",
                     "service_tier", "safety_identifier", "prompt_cache_key", "stream_options"},
              lim, r);
  r.endpoint = Endpoint::chat;
  r.api = Api::responses;
  parse_model(body, lim, r);
  // The same checks as chat, on the fields both have.
  json common = json::object();
  for (const char* k : {"temperature", "top_p", "top_k", "seed", "stream", "user"})
    if (body.contains(k)) common[k] = body[k];
  if (present(body, "max_output_tokens")) common["max_tokens"] = body["max_output_tokens"];
  try {
    parse_common(common, lim, r);
  } catch (ApiError& e) {
    if (e.param == "max_tokens") e.param = "max_output_tokens";
    throw;
  }
  if (present(body, "stream_options")) {
    const json& o = body["stream_options"];
    if (!o.is_object()) wrong_type("stream_options", o, "an object");
  }

  json messages = json::array();
  if (present(body, "instructions"))
    messages.push_back({{"role", "system"}, {"content", get_string(body["instructions"], "instructions")}});
  if (!present(body, "input")) refuse("input", "Missing required parameter: 'input'.", "missing_required_parameter");
  const json& in = body["input"];
  if (in.is_string()) {
    messages.push_back({{"role", "user"}, {"content", in}});
  } else if (in.is_array()) {
    for (size_t i = 0; i < in.size(); i++) {
      const std::string w = "input[" + std::to_string(i) + "]";
      const json& m = in[i];
      if (!m.is_object()) wrong_type(w, m, "an object");
      if (m.contains("type") && get_string(m["type"], w + ".type") != "message")
        unsupported(w + ".type", "input items other than messages are not implemented.");
      if (!m.contains("role")) refuse(w + ".role", "Missing required parameter: '" + w + ".role'.",
                                      "missing_required_parameter");
      const std::string& role = get_string(m["role"], w + ".role");
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        refuse(w + ".role", "Invalid value: '" + role +
                                "'. Supported values are: 'user', 'assistant', 'system' and 'developer'.");
      if (!m.contains("content"))
        refuse(w + ".content", "Missing required parameter: '" + w + ".content'.", "missing_required_parameter");
      const json& c = m["content"];
      std::string text;
      if (c.is_string()) {
        text = c.get<std::string>();
      } else if (c.is_array()) {
        for (size_t j = 0; j < c.size(); j++) {
          const std::string pw = w + ".content[" + std::to_string(j) + "]";
          const json& part = c[j];
          if (!part.is_object()) wrong_type(pw, part, "an object");
          const std::string& type = part.contains("type") ? get_string(part["type"], pw + ".type") : "";
          if (type != "input_text" && type != "output_text" && type != "text")
            unsupported(pw + ".type", "only text parts (input_text, output_text) are implemented.");
          if (!part.contains("text")) refuse(pw + ".text", "Missing required parameter: '" + pw + ".text'.",
                                             "missing_required_parameter");
          text += get_string(part["text"], pw + ".text");
        }
      } else {
        wrong_type(w + ".content", c, "a string or an array of content parts");
      }
      messages.push_back({{"role", role}, {"content", text}});
    }
    if (in.empty()) refuse("input", "Invalid 'input': empty array.", "empty_array");
  } else {
    wrong_type("input", in, "a string or an array of messages");
  }
  r.messages = std::move(messages);

  if (present(body, "reasoning")) {
    const json& re = body["reasoning"];
    if (!re.is_object()) wrong_type("reasoning", re, "an object");
    for (auto& [k, v] : re.items()) {
      if (k == "effort") {
        if (!v.is_null()) set_reasoning_effort(get_string(v, "reasoning.effort"), "reasoning.effort", lim, r);
      } else if (k != "summary" && k != "generate_summary") {
        refuse("reasoning." + k, "Unrecognized request argument supplied: reasoning." + k, "unknown_parameter");
      }
    }
  }
  if (present(body, "text")) {
    const json& t = body["text"];
    if (!t.is_object()) wrong_type("text", t, "an object");
    if (t.contains("format") && t["format"].is_object() && t["format"].value("type", "text") != "text")
      unsupported("text.format", "only plain text output is implemented here (use /v1/chat/completions).");
  }
  if (present(body, "store") && get_bool(body["store"], "store"))
    unsupported("store", "sluice stores nothing (send store: false).");
  if (present(body, "metadata") && !body["metadata"].is_object()) wrong_type("metadata", body["metadata"], "an object");
  return r;
}

}  // namespace sluice::serve
