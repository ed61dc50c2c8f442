// Error and Result: the values that expected failures travel as.
//
// An Error says what we did, to what, where, and what the kernel said, in one sentence a user
// can act on: "create veth nvl <-> g3 in netns tb-hzbj-hz-s0-g3: File exists". Broken invariants
// are not Errors; they are bugs and go through TB_CHECK, which aborts.
//
// Plain values; no thread-safety concerns.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <expected>
#include <string>

namespace tb {

// Exit codes every verb uses (STYLE rule 11).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;    // a check failed (a test, an expectation, a lab op)
inline constexpr int kExitBadInput = 2;  // bad input or unusable environment

struct Error {
  std::string message;  // the whole sentence, without a trailing period
  int sys_errno = 0;    // errno the system gave, or 0
  int exit_code = kExitFailed;

  std::string to_string() const { return message; }
};

template <class T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

inline std::unexpected<Error> fail(std::string message, int sys_errno = 0) {
  return std::unexpected(Error{std::move(message), sys_errno, kExitFailed});
}
// Bad input or environment: exit code 2.
inline std::unexpected<Error> bad_input(std::string message) {
  return std::unexpected(Error{std::move(message), 0, kExitBadInput});
}
// "<what>: <strerror(e)>", carrying errno.
std::unexpected<Error> sys_fail(const std::string& what, int e = errno);

// Prefix context to an error as it travels up: "bring up lab hzbj: <inner>".
inline Error with_context(Error e, const std::string& context) {
  e.message = context + ": " + e.message;
  return e;
}

[[noreturn]] void check_failed(const char* expr, const char* file, int line);

}  // namespace tb

#define TB_CHECK(expr) \
  ((expr) ? static_cast<void>(0) : ::tb::check_failed(#expr, __FILE__, __LINE__))

// Propagate a failed Result/Status from the enclosing function.
#define TB_TRY(expr)                                                                               \
  do {                                                                                             \
    if (auto tb_try_r_ = (expr); !tb_try_r_) return std::unexpected(std::move(tb_try_r_).error()); \
  } while (0)
