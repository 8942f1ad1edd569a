// Helpers for the snapshot tests: files with deterministic contents, a small KvStore with a few
// keys, and whole-directory comparison (TempDir, ReadFile and WriteFile are tests/support's).
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "epoch/state/kv_store.h"
#include "epoch/test_support/files.h"
#include "epoch/test_support/temp_dir.h"

namespace epoch::server::snapshot_testing {

using test_support::ReadFile;
using test_support::TempDir;
using test_support::WriteFile;

inline std::string RandomBytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// name -> contents of every regular file in `dir`.
inline std::map<std::string, std::string> DirContents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out[e.path().filename().string()] = ReadFile(e.path());
  }
  return out;
}

// A checkpoint-like directory: an empty file, small files and one larger than the I/O pieces.
inline std::map<std::string, std::string> MakeFiles(const std::string& dir, std::uint64_t seed) {
  std::filesystem::create_directories(dir);
  std::map<std::string, std::string> files = {
      {"000007.sst", RandomBytes(3 * 1024 * 1024 + 17, seed)},
      {"CURRENT", "MANIFEST-000005\n"},
      {"MANIFEST-000005", RandomBytes(4099, seed + 1)},
      {"OPTIONS-000009", RandomBytes(1, seed + 2)},
      {"000008.log", ""},
  };
  for (const auto& [name, data] : files) WriteFile(dir + "/" + name, data);
  return files;
}

inline std::unique_ptr<KvStore> OpenStore(const std::string& dir, KvStoreOptions options = {}) {
  auto store = KvStore::Open(dir, options);
  REQUIRE(store.ok());
  return std::move(*store);
}

// Applies one put as log index `index`.
inline void Put(KvStore& store, std::uint64_t index, const std::string& key,
                const std::string& value) {
  v1::InternalRequest request;
  request.mutable_put()->set_key(key);
  request.mutable_put()->set_value(value);
  auto result = store.Apply(LogIndex(index), request);
  REQUIRE(result.ok());
  REQUIRE(result->status.ok());
}

// The value of `key`, or nullopt.
inline std::optional<std::string> Get(const KvStore& store, const std::string& key) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  auto response = store.Range(request);
  REQUIRE(response.ok());
  if (response->kvs_size() == 0) return std::nullopt;
  return response->kvs(0).value();
}

}  // namespace epoch::server::snapshot_testing
