#include "store_import.h"

#include <filesystem>
#include <system_error>
#include <utility>

namespace epoch::server {
namespace {

// Past every stored key: each table's prefix is a lowercase letter.
const std::string kKeySpaceEnd(1, '\xff');

}  // namespace

FamilyImport::FamilyImport(rocksdb::DB* db, StoreFamilies families, std::string path_prefix)
    : db_(db), families_(families) {
  main_.path = path_prefix + ".main.sst";
  main_.family = families.main;
  history_.path = path_prefix + ".history.sst";
  history_.family = families.history;
}

FamilyImport::~FamilyImport() {
  std::error_code ec;
  std::filesystem::remove(main_.path, ec);
  std::filesystem::remove(history_.path, ec);
}

Status FamilyImport::OpenFile(File* f, const StoredBounds& replace) {
  f->writer = std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(),
                                                       db_->GetOptions(f->family), f->family);
  EPOCH_RETURN_IF_ERROR(FromRocks(f->writer->Open(f->path), "create " + f->path));
  const std::string& upper = replace.upper.empty() ? kKeySpaceEnd : replace.upper;
  return FromRocks(f->writer->DeleteRange(replace.lower, upper), "write " + f->path);
}

Status FamilyImport::Open(const StoredBounds& replace_main, const StoredBounds& replace_history) {
  EPOCH_RETURN_IF_ERROR(OpenFile(&main_, replace_main));
  return OpenFile(&history_, replace_history);
}

Status FamilyImport::Add(const rocksdb::Slice& key, const rocksdb::Slice& value) {
  const bool history = families_.For({key.data(), key.size()}) == families_.history;
  File& f = history ? history_ : main_;
  if (history) ++history_keys_;
  return FromRocks(f.writer->Put(key, value), "write " + f.path);
}

Status FamilyImport::Ingest() {
  std::vector<rocksdb::IngestExternalFileArg> args;
  for (File* f : {&main_, &history_}) {
    EPOCH_RETURN_IF_ERROR(FromRocks(f->writer->Finish(), "finish " + f->path));
    rocksdb::IngestExternalFileArg& arg = args.emplace_back();
    arg.column_family = f->family;
    arg.external_files = {f->path};
    arg.options.move_files = true;  // a hard link: same file system as the store
  }
  return FromRocks(db_->IngestExternalFiles(args), "ingest " + main_.path);
}

}  // namespace epoch::server
