// Encode throughput of infera::Tokenizer on a large mixed text: the Qwen3 corpus fixture (code,
// prose, many scripts, special tokens) joined with newlines and repeated to --mb megabytes.
// scripts/bench_tokenizer_hf.py builds the same text and measures Hugging Face `tokenizers`.
//
//   build/tok/bench/tokenizer_bench [--model DIR] [--corpus FILE] [--mb 8] [--repeats 7]
//
// Two workloads: the whole text in one encode() call, and every corpus line as its own call
// (what a server sees). Both are single-threaded; the first whole-text run is reported apart
// because it fills the piece cache. Prints min/median/p95 MB/s and peak RSS.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "infera/tokenizer.h"

namespace {

struct Stats {
  double min, median, p95;
};

Stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * (v.size() - 1) + 0.5))];
  };
  return {v.front(), at(0.5), at(0.95)};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = INFERA_SOURCE_DIR "/../shared/models/qwen3-0.6b";
  std::string corpus = INFERA_SOURCE_DIR "/../shared/fixtures/tokenizer/qwen3_corpus.jsonl";
  double mb = 8;
  int repeats = 7;
  for (int k = 1; k + 1 < argc; k += 2) {
    if (!std::strcmp(argv[k], "--model"))
      model = argv[k + 1];
    else if (!std::strcmp(argv[k], "--corpus"))
      corpus = argv[k + 1];
    else if (!std::strcmp(argv[k], "--mb"))
      mb = std::atof(argv[k + 1]);
    else if (!std::strcmp(argv[k], "--repeats"))
      repeats = std::max(1, std::atoi(argv[k + 1]));
    else {
      std::fprintf(stderr, "usage: %s [--model DIR] [--corpus FILE] [--mb N] [--repeats N]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    std::vector<std::string> lines;
    std::ifstream in(corpus);
    for (std::string line; std::getline(in, line);) {
      lines.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
    }
    if (lines.empty()) throw std::runtime_error("no texts in " + corpus);
    std::string text;
    std::size_t line_bytes = 0;
    for (const auto& l : lines) line_bytes += l.size();
    while (text.size() < mb * 1e6) {
      for (const auto& l : lines) {
        text += l;
        text += '\n';
      }
    }
    const infera::Tokenizer tok = infera::Tokenizer::load(model);
    const double text_mb = text.size() / 1e6;

    auto t0 = std::chrono::steady_clock::now();
    std::size_t n_ids = tok.encode(text).size();
    const double cold = text_mb / seconds_since(t0);

    std::vector<double> whole, per_line;
    for (int r = 0; r < repeats; ++r) {
      t0 = std::chrono::steady_clock::now();
      n_ids = tok.encode(text).size();
      whole.push_back(text_mb / seconds_since(t0));
    }
    // Per-line calls: loop over the corpus until about as many bytes as the whole text.
    const int passes = std::max<int>(1, static_cast<int>(text.size() / line_bytes));
    for (int r = 0; r < repeats; ++r) {
      t0 = std::chrono::steady_clock::now();
      std::size_t bytes = 0;
      for (int p = 0; p < passes; ++p) {
        for (const auto& l : lines) {
          bytes += l.size();
          if (tok.encode(l).empty() && !l.empty()) return 3;
        }
      }
      per_line.push_back(bytes / 1e6 / seconds_since(t0));
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const Stats w = summarize(whole), p = summarize(per_line);
    std::printf("text: %.2f MB, %zu ids (%.2f bytes/token), %d repeats\n", text_mb, n_ids,
                text.size() / static_cast<double>(n_ids), repeats);
    std::printf("infera encode, whole text, first run (cold cache): %.2f MB/s\n", cold);
    std::printf("infera encode, whole text   MB/s: min %.2f  median %.2f  p95 %.2f\n", w.min,
                w.median, w.p95);
    std::printf("infera encode, %zu-line calls MB/s: min %.2f  median %.2f  p95 %.2f\n",
                lines.size(), p.min, p.median, p.p95);
    std::printf("peak RSS: %.1f MB\n", ru.ru_maxrss / 1024.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
