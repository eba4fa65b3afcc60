#pragma once
/// StringMap<V>: a hash map from std::string, looked up by std::string_view or a C string
/// without building a std::string (C++20's heterogeneous lookup).

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace foresight {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

}  // namespace foresight
