// TempDir: a fresh directory for one test under the system temp directory ($TMPDIR, else /tmp),
// named <prefix>-XXXXXX (mkdtemp), removed with everything in it when the TempDir is destroyed
// unless Keep() was called.
//
// Threading: a TempDir is created and destroyed on one thread; path() and Sub() may be called from
// any thread while it exists.
#pragma once

#include <stdlib.h>  // mkdtemp

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace epoch::test_support {

class TempDir {
 public:
  // Creates the directory; throws std::runtime_error naming the path when mkdtemp fails.
  explicit TempDir(std::string_view prefix = "epoch-test") {
    std::string pattern =
        (std::filesystem::temp_directory_path() / (std::string(prefix) + "-XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
    }
    path_ = std::move(pattern);
  }
  ~TempDir() {
    if (keep_) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The directory's absolute path.
  [[nodiscard]] const std::string& path() const { return path_; }
  // The path of `name` inside the directory (not created).
  [[nodiscard]] std::string Sub(std::string_view name) const {
    return path_ + "/" + std::string(name);
  }
  // Leaves the directory and its contents in place at destruction (e.g. for a failure's logs).
  void Keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

}  // namespace epoch::test_support
