// Drafter: the continuation of the longest earlier suffix match (most recent on
// ties), nothing below min_match, a longer match in the store preferred, the
// store bounded.
#include "engine/drafter.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(Drafter, ProposesTheContinuationOfTheLongestMatch) {
  DraftOptions o;
  o.min_match = 2;
  Drafter d(o);
  //            0  1  2  3  4  5  6  7  8  9 10 11
  d.append(std::vector<int>{1, 2, 3, 4, 9, 2, 3, 5, 6, 1, 2, 3});
  // Suffix [1 2 3] matches at 0..2 (length 3); [2 3] also at 5..6 (length 2): the longer wins.
  EXPECT_EQ(d.draft(3), (std::vector<int>{4, 9, 2}));
  EXPECT_EQ(d.draft(1), (std::vector<int>{4}));
  EXPECT_TRUE(d.draft(0).empty());
}

TEST(Drafter, MostRecentOfEquallyLongMatches) {
  Drafter d(DraftOptions{});
  d.append(std::vector<int>{7, 8, 1, 7, 8, 2, 7, 8});
  EXPECT_EQ(d.draft(4), (std::vector<int>{2, 7, 8}));  // continuation stops at the context's end
}

TEST(Drafter, NothingBelowMinMatchOrWhenOff) {
  DraftOptions o;
  o.min_match = 3;
  Drafter d(o);
  d.append(std::vector<int>{5, 6, 7, 1, 6, 7});
  EXPECT_TRUE(d.draft(4).empty());  // [6 7] is only 2 long
  d.append(8);
  EXPECT_TRUE(d.draft(4).empty());  // 8 never occurred before
  o.min_match = 2;
  Drafter e(o);
  e.append(std::vector<int>{5, 6, 7, 1, 6, 7});
  EXPECT_EQ(e.draft(4), (std::vector<int>{1, 6, 7}));
  o.max_tokens = 0;
  Drafter off(o);
  off.append(std::vector<int>{5, 6, 7, 1, 6, 7});
  EXPECT_TRUE(off.draft(4).empty());
  o.max_tokens = 2;
  Drafter capped(o);
  capped.append(std::vector<int>{5, 6, 7, 1, 6, 7});
  EXPECT_EQ(capped.draft(4), (std::vector<int>{1, 6}));
}

TEST(Drafter, PeriodicTextDraftsAcrossItsOwnSuffix) {
  Drafter d(DraftOptions{});
  d.append(std::vector<int>{3, 4, 3, 4, 3, 4});
  EXPECT_EQ(d.draft(3), (std::vector<int>{3, 4}));  // match ends at 3 (length 4): tokens 4..5 follow
}

TEST(Drafter, FallsBackToTheStore) {
  DraftStore store(100);
  store.add(std::vector<int>{10, 11, 12, 13, 14});
  store.add(std::vector<int>{20, 11, 12, 15});
  DraftOptions o;
  Drafter d(o, &store);
  d.append(std::vector<int>{1, 10, 11, 12});
  EXPECT_EQ(d.draft(2), (std::vector<int>{13, 14}));  // [10 11 12] in the first beats [11 12] in the newer
  Drafter e(o, &store);
  e.append(std::vector<int>{9, 11, 12});
  EXPECT_EQ(e.draft(2), (std::vector<int>{15}));  // equally long: the newest
  Drafter f(o, &store);
  f.append(std::vector<int>{9, 9, 14});
  EXPECT_TRUE(f.draft(2).empty());  // 14 ends a sequence: no continuation
}

TEST(Drafter, TheLongerOfContextAndStoreMatchWins) {
  DraftStore store(100);
  store.add(std::vector<int>{1, 2, 3, 4, 40, 41});
  Drafter d(DraftOptions{}, &store);
  d.append(std::vector<int>{9, 3, 4, 30, 31, 2, 3, 4});
  EXPECT_EQ(d.draft(2), (std::vector<int>{40, 41}));  // store [2 3 4] beats context [3 4]
  Drafter e(DraftOptions{}, &store);
  e.append(std::vector<int>{1, 2, 3, 4, 30, 31, 1, 2, 3, 4});
  EXPECT_EQ(e.draft(2), (std::vector<int>{30, 31}));  // equally long: the context's
}

TEST(Drafter, StoreDropsTheOldestPastItsBound) {
  DraftStore store(8);
  store.add(std::vector<int>{1, 2, 3, 4, 5});
  store.add(std::vector<int>{6, 7, 8, 9});
  EXPECT_EQ(store.tokens(), 4u);
  std::vector<int> out;
  EXPECT_EQ(store.draft(std::vector<int>{0, 1, 2}, DraftOptions{}, 3, out), 0);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(store.draft(std::vector<int>{0, 6, 7}, DraftOptions{}, 3, out), 2);
  EXPECT_EQ(out, (std::vector<int>{8, 9}));
}

}  // namespace
}  // namespace sluice
