#include "core/error.h"

namespace nemotron {

void throw_internal(const char* file, int line, const std::string& what) {
  throw Error(fmt::format("internal error at {}:{}: {}", file, line, what));
}

}  // namespace nemotron
