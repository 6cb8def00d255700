// Human-readable byte counts: "1.50 MiB" out, "24GiB" / "512MB" / "1048576" in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fitgrad {

// Binary units (KiB, MiB, GiB, TiB) with two decimals; plain bytes below 1 KiB.
std::string format_bytes(int64_t bytes);
// Accepts an integer or decimal number followed by an optional unit: B, KiB, MiB, GiB,
// TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000), case-insensitive, optional
// space. Throws fitgrad::Error naming the text when it is not a size.
uint64_t parse_bytes(std::string_view text);

}  // namespace fitgrad
