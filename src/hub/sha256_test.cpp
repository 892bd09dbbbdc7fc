#include "hub/sha256.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "base/error.h"

namespace sluice {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, IncrementalEqualsOneShotAndResets) {
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); i++) data[i] = char(i * 7 + 3);
  Hasher h;
  for (size_t at = 0; at < data.size(); at += 777) h.update(data.data() + at, std::min<size_t>(777, data.size() - at));
  EXPECT_EQ(h.finish_hex(), sha256_hex(data.data(), data.size()));
  h.update("abc", 3);  // finish_hex() restarted it
  EXPECT_EQ(h.finish_hex(), sha256_hex("abc", 3));
}

TEST(Sha256, GitBlobIdIsSha1OfHeaderAndContent) {
  // `git hash-object` of an empty file and of "hello\n".
  Hasher empty(HashKind::sha1);
  empty.update("blob 0\0", 7);
  EXPECT_EQ(empty.finish_hex(), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
  Hasher hello(HashKind::sha1);
  hello.update("blob 6\0hello\n", 13);
  EXPECT_EQ(hello.finish_hex(), "ce013625030ba8dba906f756967f9e9ca394464a");
}

TEST(Sha256, FileAndPrefix) {
  const std::string path = ::testing::TempDir() + "/sluice_sha256_test.bin";
  { std::ofstream(path, std::ios::binary) << "abcdef"; }
  EXPECT_EQ(sha256_file(path), sha256_hex("abcdef", 6));
  EXPECT_EQ(sha256_file(path, 3), sha256_hex("abc", 3));
  EXPECT_THROW(sha256_file(path, 10), Error);
  EXPECT_THROW(sha256_file(path + ".missing"), Error);
  std::remove(path.c_str());
}

TEST(Sha256, HexDigestCheck) {
  EXPECT_TRUE(is_hex_digest(std::string(64, 'a'), HashKind::sha256));
  EXPECT_FALSE(is_hex_digest(std::string(64, 'A'), HashKind::sha256));
  EXPECT_FALSE(is_hex_digest(std::string(63, 'a'), HashKind::sha256));
  EXPECT_TRUE(is_hex_digest(std::string(40, '0'), HashKind::sha1));
}

}  // namespace
}  // namespace sluice
