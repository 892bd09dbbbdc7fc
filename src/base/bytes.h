// base/bytes.h — byte sizes as people write and read them; the one parser
// every byte-size flag goes through, and the one formatter for messages.
//
// The unit rule (case-insensitive, an optional space before the unit):
//   none or B               bytes
//   K M G T  and KiB..TiB   binary: powers of 1024   (16G = 16 GiB)
//   KB MB GB TB             decimal: powers of 1000  (16GB = 16e9, as disks are sold)
// Fractions are allowed ("1.5G"); the result is rounded down to whole bytes.
#pragma once
#include <cstdint>
#include <string>

namespace sluice {

// Bytes in `text`; throws Error "<flag>: ..." on anything else. `allow_zero`
// for flags where 0 means "no bound".
uint64_t parse_byte_size(const std::string& text, const std::string& flag, bool allow_zero = false);

// "14.2 MiB", "3.00 GiB", "512 B": binary units, three significant digits.
std::string format_bytes(uint64_t bytes);

// The smallest whole size of the shortest unit at or above `bytes` that the
// parser reads back: 14.2 MiB -> "15M", 900 B -> "900", 3 GiB -> "3G".
std::string size_flag_at_least(uint64_t bytes);

}  // namespace sluice
