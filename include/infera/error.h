// Errors that cross the library boundary. Every message names the thing at fault (a tensor, a file,
// an option) so that a user can act on it; the CLI prints what() on one line and exits non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace infera {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A model folder, weight file, config or tokenizer file that is malformed or inconsistent.
class FormatError : public Error {
 public:
  using Error::Error;
};

// A caller asked for something invalid: bad option value, token id out of range, prompt too long.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A file or folder could not be opened or read.
class IoError : public Error {
 public:
  using Error::Error;
};

}  // namespace infera
