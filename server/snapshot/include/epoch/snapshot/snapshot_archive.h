// Snapshot archive: the file `etcdctl snapshot save` writes from Maintenance.Snapshot and
// `epochd --restore-snapshot` reads back. It packs the files of one RocksDB checkpoint of the
// state machine, plus the log position and membership the checkpoint corresponds to, into one
// stream that ends with a SHA-256 trailer, padded so that the whole file is 32 bytes longer than a
// multiple of 512 (etcdctl refuses a snapshot otherwise: clientv3/snapshot `hasChecksum`).
// The byte layout is specified in server/SNAPSHOT.md and encoded by epoch::snapshot_format; this
// file streams it from and to the files of a checkpoint.
//
// Who calls it: the Maintenance.Snapshot stream (ArchiveWriter, on a gRPC thread), the restore
// mode of epochd (VerifyArchive / UnpackArchive), and the unit tests.
//
// Threading: an ArchiveWriter is used by one thread at a time; the free functions are
// re-entrant. Nothing here holds the whole image in memory: files are read and written in
// pieces.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/snapshot_format/snapshot_format.h"
#include "epoch/status.h"

namespace epoch::server {

// What the image is (applied index and term, revision, cluster and membership). The writer fills
// in file_count.
using ArchiveHeader = snapshot_format::Header;

// One file of the checkpoint: its name inside the archive (no directories) and where to read it.
struct ArchiveFile {
  std::string name;
  std::string path;
  std::uint64_t size = 0;
};

// Lists the regular files of a checkpoint directory (sorted by name, sizes from stat). Fails on
// subdirectories or names the archive cannot hold.
[[nodiscard]] Result<std::vector<ArchiveFile>> ListCheckpointFiles(const std::string& dir);

// Produces the archive bytes of `files` in pieces (pull style, so a gRPC stream can send one
// piece per message). TotalBytes() is known before the first piece: header, files, padding and
// trailer.
class ArchiveWriter {
 public:
  ArchiveWriter(ArchiveHeader header, std::vector<ArchiveFile> files);
  ~ArchiveWriter();
  ArchiveWriter(const ArchiveWriter&) = delete;
  ArchiveWriter& operator=(const ArchiveWriter&) = delete;

  [[nodiscard]] std::uint64_t TotalBytes() const { return total_bytes_; }
  [[nodiscard]] std::uint64_t BytesProduced() const { return produced_; }
  [[nodiscard]] bool Done() const { return produced_ == total_bytes_; }
  // Up to `max_bytes` (> 0) next bytes of the archive; empty once Done(). An error (a file that
  // cannot be read or changed size) is final.
  [[nodiscard]] Result<std::string> Next(std::size_t max_bytes);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t produced_ = 0;
};

// Writes the whole archive to `out_path` (tests and tools).
[[nodiscard]] Status WriteArchiveFile(const ArchiveHeader& header, std::vector<ArchiveFile> files,
                                      const std::string& out_path);

// Checks size (% 512 == 32), the SHA-256 trailer and the structure (magic, version, header,
// every file's CRC-32C, end marker, zero padding) without writing anything. Errors say what is
// wrong: truncated, corrupted (checksum mismatch), or not an Epoch snapshot.
[[nodiscard]] Result<ArchiveHeader> VerifyArchive(const std::string& archive_path);

// VerifyArchive, then writes the files into `dest_dir` (created; must not exist or be empty)
// and fsyncs them and the directory.
[[nodiscard]] Result<ArchiveHeader> UnpackArchive(const std::string& archive_path,
                                                  const std::string& dest_dir);

}  // namespace epoch::server
