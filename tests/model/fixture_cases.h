// Reads the Qwen3 reference cases of ../shared/fixtures/<name>/cases.json and their logits.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_paths.h"

namespace infera::test {

struct LmCase {
  std::string name;
  std::vector<int32_t> input_ids;
  std::vector<int64_t> logits_positions;
  std::vector<float> logits;  // [positions, vocab]
  int64_t vocab = 0;
  std::vector<int32_t> greedy_new_ids;
  std::vector<float> greedy_step_margins;
};

inline std::vector<float> read_f32(const std::filesystem::path& path, size_t count) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open fixture " + path.string());
  std::vector<float> v(count);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(float)));
  if (in.gcount() != static_cast<std::streamsize>(count * sizeof(float)))
    throw std::runtime_error("fixture " + path.string() + " is shorter than its shape");
  return v;
}

inline std::vector<LmCase> load_lm_cases(const std::string& fixture_name) {
  const auto dir = fixture(fixture_name);
  std::ifstream in(dir / "cases.json");
  if (!in) throw std::runtime_error("cannot open " + (dir / "cases.json").string());
  const auto j = nlohmann::json::parse(in);
  std::vector<LmCase> cases;
  for (const auto& c : j.at("cases")) {
    LmCase lc;
    lc.name = c.at("name").get<std::string>();
    lc.input_ids = c.at("input_ids").get<std::vector<int32_t>>();
    lc.logits_positions = c.at("logits_positions").get<std::vector<int64_t>>();
    const auto shape = c.at("logits_shape").get<std::vector<int64_t>>();
    lc.vocab = shape.at(1);
    lc.logits = read_f32(dir / c.at("logits_file").get<std::string>(),
                         static_cast<size_t>(shape.at(0) * shape.at(1)));
    lc.greedy_new_ids = c.at("greedy_new_ids").get<std::vector<int32_t>>();
    lc.greedy_step_margins = c.at("greedy_step_margins").get<std::vector<float>>();
    cases.push_back(std::move(lc));
  }
  return cases;
}

}  // namespace infera::test
