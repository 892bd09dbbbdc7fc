// hub/hf_env.h — the Hugging Face tools' environment, honoured as they do.
//
//   HF_ENDPOINT      the hub URL (default https://huggingface.co)
//   HF_TOKEN         the access token; else the file HF_TOKEN_PATH names; else
//                    $HF_HOME/token (HF_HOME: $XDG_CACHE_HOME/huggingface, or
//                    ~/.cache/huggingface) — where `huggingface-cli login` puts it
#pragma once
#include <string>

namespace sluice {

std::string hf_endpoint();  // no trailing slash
std::string hf_token();     // "" when none is set; surrounding whitespace removed

}  // namespace sluice
