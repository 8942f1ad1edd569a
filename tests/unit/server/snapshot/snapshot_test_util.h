// Helpers for the snapshot tests: a temporary directory, files with deterministic contents, a
// small KvStore with a few keys, and whole-file comparison.
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "epoch/state/kv_store.h"

namespace epoch::server::snapshot_testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "epoch-snap-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  REQUIRE(out.good());
}

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
    out[e.path().filename().string()] = ReadAll(e.path().string());
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
  for (const auto& [name, data] : files) WriteAll(dir + "/" + name, data);
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
