// SPDX-License-Identifier: MIT
// The sample's work, in a file of its own: main.cpp profiles each phase.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

std::string make_input(int count);
std::vector<std::uint32_t> parse(const std::string& text);
std::uint64_t checksum(const std::vector<std::uint32_t>& numbers);
std::uint64_t sort_and_sum(std::vector<std::uint32_t> numbers);
