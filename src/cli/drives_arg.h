// cli/drives_arg.h — the `--drives PATH[:WEIGHT],...` of `stripe` and `setup`.
#pragma once
#include <string>
#include <vector>

#include "io/stripe.h"

namespace sluice::cli {

// The drives of the list (io/stripe.h parse_drives), each folder made and
// named by its absolute path; a drive given no weight gets its O_DIRECT rate:
// saved by an earlier `sluice probe --save`, else measured now on a 1 GB
// scratch file there (and saved for the next time).
std::vector<StripeDrive> drives_with_rates(const std::string& list);

}  // namespace sluice::cli
