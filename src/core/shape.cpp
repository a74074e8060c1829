#include "core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nemotron {

std::string Shape::str() const { return fmt::format("[{}]", fmt::join(dims_, ", ")); }

}  // namespace nemotron
