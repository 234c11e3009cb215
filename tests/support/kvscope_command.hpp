#pragma once
// Runs the kvscope binary as a user would (the tools tests): $KVSCOPE_BIN, else the one the
// build made.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kvscope::test {

// A 1 MiB last-level cache keeps cold runs of the small test shapes to a few MB of copies
// (the real one can be hundreds of MiB). A caller's own setting wins.
inline const bool small_llc = ::setenv("KVSCOPE_LLC_BYTES", "1M", /*overwrite=*/0) == 0;

struct CommandResult {
  int status;
  std::string out;  // stdout and stderr together
};

inline CommandResult kvscope(const std::string& args) {
  const char* bin = std::getenv("KVSCOPE_BIN");
  const std::string command = std::string(bin ? bin : KVSCOPE_BIN_DEFAULT) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  std::array<char, 4096> buffer;
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) out += buffer.data();
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace kvscope::test
