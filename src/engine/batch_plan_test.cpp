// plan_batch_passes: the memory plan of a multi-sequence server or bench holds
// a pass's rows and every logit row it returns.
#include <gtest/gtest.h>

#include "engine/batch.h"
#include "k3/k3_config.h"
#include "k3/model.h"

namespace sluice {
namespace {

TEST(BatchPlan, APassHoldsItsRowsAndTheirLogits) {
  ModelOptions mo;
  plan_batch_passes(mo, 4, 8, 256);
  EXPECT_EQ(mo.logit_rows, 36);     // 4 sequences x (1 + 8 drafts)
  EXPECT_EQ(mo.chunk_tokens, 256);  // a prompt chunk is the larger pass
  plan_batch_passes(mo, 8, 0, 16);
  EXPECT_EQ(mo.logit_rows, 8);
  EXPECT_EQ(mo.chunk_tokens, 16);
  plan_batch_passes(mo, 8, 8, 16);
  EXPECT_EQ(mo.chunk_tokens, 73);  // the rows and one joining prompt's row
  // Each logit row is a vocabulary of floats and the caller's copy.
  const ModelConfig c = k3_config();
  EXPECT_EQ(working_bytes(c, 73, 72) - working_bytes(c, 73, 1), 71ull * uint64_t(c.vocab_size) * 8);
  EXPECT_EQ(working_bytes(c, 73, 0), working_bytes(c, 73, 1));
}

}  // namespace
}  // namespace sluice
