// base/run_jobs.h — a few independent jobs on a few threads (I/O-bound work:
// writing a stripe's files, hashing shards), the first failure stopping the rest.
#pragma once
#include <cstddef>
#include <functional>

namespace sluice {

// Runs work(i) for every i in [0, n), on up to `jobs` threads (the caller's
// among them). Each thread gets its own work function from make_work(),
// called on that thread (state of its own: a connection, a reader). After a
// job throws, no new job starts; the first exception is rethrown once every
// thread is done.
void run_jobs(size_t n, int jobs, const std::function<std::function<void(size_t)>()>& make_work);

}  // namespace sluice
