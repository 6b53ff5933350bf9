#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "infera/error.h"

namespace infera::io {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// Closes the descriptor on every path out of open(): the mapping does not need it once made.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::shared_ptr<MappedFile> MappedFile::open(const std::filesystem::path& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw IoError(path.string() + ": cannot open: " + errno_text(errno));
  FdGuard guard{fd};

  struct stat st {};
  if (::fstat(fd, &st) != 0) throw IoError(path.string() + ": cannot stat: " + errno_text(errno));
  // A directory or device would "open" fine but has no meaningful size to map.
  if (!S_ISREG(st.st_mode)) throw IoError(path.string() + ": not a regular file");
  if (st.st_size < 0) throw IoError(path.string() + ": negative file size");

  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  // mmap of length 0 fails with EINVAL; an empty file is still a valid (empty) mapping for callers,
  // which then report it as too short in their own format terms.
  if (file->size_ == 0) return file;

  // PROT_READ: weights are never written through this mapping, so a stray write faults loudly
  // instead of silently diverging from the file. MAP_PRIVATE: nothing is ever written back.
  // (A file truncated by another process while mapped would still SIGBUS on access; model files
  // are expected to be immutable while in use, as with every mmap-based loader.)
  void* addr = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (addr == MAP_FAILED) throw IoError(path.string() + ": cannot mmap: " + errno_text(errno));
  file->data_ = static_cast<const uint8_t*>(addr);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr && size_ > 0) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace infera::io
