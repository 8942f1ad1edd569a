// Whole-file reads and writes for tests: files a test prepares or damages, output and log files of
// child processes. Bytes are read and written as they are (binary mode).
//
// Threading: plain functions on their arguments, safe from any thread.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace epoch::test_support {

// The whole file. Throws std::runtime_error naming the path when it cannot be opened or read.
inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string() + " for reading");
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + path.string());
  return out.str();
}

// The whole file, or "" when it cannot be opened (e.g. an output file a process has not created
// yet, polled by a test).
inline std::string ReadFileIfExists(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The last `max_bytes` of the file ("" when it cannot be opened), for failure messages.
inline std::string FileTail(const std::filesystem::path& path, std::size_t max_bytes = 4096) {
  std::string all = ReadFileIfExists(path);
  return all.size() <= max_bytes ? all : all.substr(all.size() - max_bytes);
}

// Replaces the file's contents with `data` (creating it). Throws std::runtime_error naming the
// path when it cannot be written.
inline void WriteFile(const std::filesystem::path& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace epoch::test_support
