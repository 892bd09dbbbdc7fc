// text/xtml.h — the XTML markers K3's chat format is built from (spec §6.3);
// shared by the renderer, the reply splitter and the tool-call parser.
#pragma once
#include <string_view>

namespace sluice::text {

inline constexpr std::string_view kOpen = "<|open|>", kClose = "<|close|>", kSep = "<|sep|>",
                                  kEndOfMsg = "<|end_of_msg|>";

}  // namespace sluice::text
