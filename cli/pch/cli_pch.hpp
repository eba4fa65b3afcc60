// Precompiled header of the foresight binary (cli/meson.build, cpp_pch): the heavy header-only
// libraries every command includes, parsed once instead of once per command file. It changes build
// time only: every source still includes what it uses.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
