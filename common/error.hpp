#pragma once
/// The one error hierarchy of Foresight. Library code throws these; only `main` catches, prints
/// one message and exits non-zero. Every message says where (file, JSON pointer or field), what
/// was expected and what was found.

#include <cstdint>
#include <stdexcept>
#include <string>

namespace foresight::sim {

/// Base of every error Foresight reports to a user.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// A scenario, plan, option or quantity string is invalid.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// A cluster description is invalid (unknown keys, dangling links, bad bandwidth, ...).
class TopologyError : public Error {
 public:
  using Error::Error;
};

/// A model description is invalid or inconsistent with the plan.
class ModelError : public Error {
 public:
  using Error::Error;
};

/// A trace file is malformed or truncated.
class TraceError : public Error {
 public:
  using Error::Error;
};

/// An execution graph is inconsistent (dangling dependency, unmatched collective, cycle, ...).
class GraphError : public Error {
 public:
  using Error::Error;
};

/// An invariant of the simulator itself was violated: a bug, reported with context.
class InternalError : public Error {
 public:
  using Error::Error;
};

/// The user-facing error classes, for code that reads input on behalf of several callers (the
/// JSON reader) and must throw the caller's kind.
enum class ErrorKind : std::uint8_t { config, topology, model, trace, graph };

/// Throws the error class of `kind` with `message`.
[[noreturn]] inline void raise(ErrorKind kind, const std::string& message) {
  switch (kind) {
    case ErrorKind::topology:
      throw TopologyError(message);
    case ErrorKind::model:
      throw ModelError(message);
    case ErrorKind::trace:
      throw TraceError(message);
    case ErrorKind::graph:
      throw GraphError(message);
    case ErrorKind::config:
      break;
  }
  throw ConfigError(message);
}

}  // namespace foresight::sim
