// Decision-runtime latency on dummy weights (default: bench/configs/decision-large, a
// ModernBERT-large encoder with two decision-head layers), per request and per stage (prepare,
// forward, postprocess, end to end), with p50/p95 and every sample kept.
//
// Workloads (one request each, one state + N questions, 4 options per question):
//   short5 / short10 / short50: N distinct questions of ~93 tokens;  long10: 10 questions whose
//   state is cut at max_length (512 tokens);  dup50: 50 questions, 10 distinct x 5 (reported
//   apart, with dedup on and off).  short50 is the suite of 50 genuinely distinct questions.
// Headline numbers ("default": bf16 weights, token-budget batching with a 16-question cap,
// pruned last head layer, windowed local attention) never use dedup or the prefix cache: dedup is
// off and the cache is emptied before every request.
// Levers, each switched off in its own configuration, all run interleaved request by request
// (rotating the order) so that machine noise hits every configuration alike:
//   no_batching (one question per forward), no_pruning, dense_attention (every key tile), int8 and
//   int4 (group-64 weights, decision/weight_format.h).
// Quality: top-1 agreement and max |delta p| per question of int8/int4 against default.
//
//   build/release/bench/decision_bench --runs 200 --out bench/results/decision.json
//   build/release/bench/decision_bench --config-dir ../shared/fixtures/decision-micro --runs 200
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "bench/process_usage.h"
#include "bench/stats.h"
#include "decision/runtime.h"
#include "infera/error.h"

namespace {

using namespace infera;
using namespace infera::decision;
using Json = nlohmann::json;

// The project's shared statistics (src/bench): type-7 percentiles as numpy, peak RSS from VmHWM.
double peak_rss_mb() {
  return static_cast<double>(infera::bench::peak_rss_bytes()) / (1024.0 * 1024.0);
}

// q as a fraction (0.5 = median); NaN for no samples.
double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return infera::bench::percentile_sorted(v, q * 100.0);
}

// The WordPiece test tokenizer (tests/data, 700 ids, HF tokenizers) with its special tokens moved
// to the model's ids: a real tokenizer for the prepare stage; its ids fit any vocabulary >= 700.
std::shared_ptr<const Tokenizer> bench_tokenizer(const DecisionConfig& c, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument("--tokenizer " + path + ": cannot open");
  Json j = Json::parse(in);
  const std::map<std::string, int> moved = {{"[CLS]", c.cls_token_id},
                                            {"[SEP]", c.sep_token_id},
                                            {"[PAD]", c.pad_token_id},
                                            {"[MASK]", c.marker_token_id}};
  for (auto& t : j["added_tokens"])
    if (moved.count(t["content"])) t["id"] = moved.at(t["content"]);
  for (const auto& [tok, id] : moved) j["model"]["vocab"][tok] = id;
  for (auto& [name, entry] : j["post_processor"]["special_tokens"].items())
    entry["ids"] = {moved.at(name)};
  return std::make_shared<const Tokenizer>(Tokenizer::from_json_text(j.dump()));
}

const char* kWords[] = {"order", "arrived", "late", "and",         "the",   "box",
                        "was",   "damaged", "so",   "customer",    "asked", "for",
                        "a",     "refund",  "or",   "replacement", "today"};

std::string words(const Tokenizer& tok, int64_t tokens, int salt) {
  std::string s;
  for (int i = 0; static_cast<int64_t>(tok.encode(s).size()) < tokens; ++i)
    s += std::string(kWords[(i * 7 + salt) % 17]) + " ";
  return s;
}

Question question(int i, int variant) {
  Question q;
  q.qtype = i % 4 == 3 ? QuestionType::Score : QuestionType::Choice;
  q.text = "question " + std::to_string(i) + ": given the report, what should happen to item " +
           std::to_string(i * 13 + variant) + " next?";
  for (int k = 0; k < 4; ++k) q.options.push_back({"option " + std::to_string(k + 1), k * 2.5});
  return q;
}

// A workload's request. Short questions get as much state as makes them 93 tokens on average
// (the state's length is found by preparing the questions with no state first).
Request make_request(const std::string& name, const DecisionConfig& config, const Tokenizer& tok) {
  Request r;
  int n = 0, distinct = 0;
  bool long_state = false;
  if (name == "short5" || name == "short10" || name == "short50") {
    n = distinct = std::stoi(name.substr(5));
  } else if (name == "long10") {
    n = distinct = 10;
    long_state = true;  // cut to each question's room under max_length
  } else if (name == "dup50") {
    n = 50;
    distinct = 10;
  } else {
    throw InvalidArgument("unknown workload " + name);
  }
  for (int i = 0; i < n; ++i) r.questions.push_back(question(i % distinct, 0));
  r.state = "";
  Preparer prep(config, tok, "calibrate", 1);
  int64_t hits = 0, total = 0;
  for (const auto& p : prep.prepare(r, hits)) total += static_cast<int64_t>(p.ids.size());
  const int64_t empty_mean = total / n;
  r.state =
      words(tok, long_state ? 4 * config.max_length : std::max<int64_t>(0, 93 - empty_mean), n);
  return r;
}

struct Config {
  std::string name;
  DecisionModel* model;
  int cap;
  bool prune, dedup;
  Runtime* runtime = nullptr;
};

struct Samples {
  std::vector<double> prepare, forward, postprocess, total;
  Counts counts;
  void add(const Response& r) {
    prepare.push_back(r.times.prepare_ms);
    forward.push_back(r.times.forward_ms);
    postprocess.push_back(r.times.postprocess_ms);
    total.push_back(r.times.total_ms);
    counts = r.counts;
  }
  Json json() const {
    auto stat = [](const std::vector<double>& v) {
      double mean = 0;
      for (double x : v) mean += x / static_cast<double>(v.size());
      return Json{{"p50_ms", percentile(v, 0.5)},
                  {"p95_ms", percentile(v, 0.95)},
                  {"min_ms", percentile(v, 0)},
                  {"mean_ms", mean},
                  {"samples_ms", v}};
    };
    // Each stage's share of the end-to-end time (sums of the samples), for the Amdahl reading.
    double sum_p = 0, sum_f = 0, sum_o = 0, sum_t = 0;
    for (size_t i = 0; i < total.size(); ++i) {
      sum_p += prepare[i], sum_f += forward[i], sum_o += postprocess[i], sum_t += total[i];
    }
    const double pct = sum_t > 0 ? 100.0 / sum_t : NAN;
    return {{"requests", total.size()},
            {"share_percent",
             {{"prepare", sum_p * pct},
              {"forward", sum_f * pct},
              {"postprocess", sum_o * pct},
              {"other", (sum_t - sum_p - sum_f - sum_o) * pct}}},
            {"prepare", stat(prepare)},
            {"forward", stat(forward)},
            {"postprocess", stat(postprocess)},
            {"end_to_end", stat(total)},
            {"counts",
             {{"questions", counts.questions},
              {"unique_forward_inputs", counts.unique_forward_inputs},
              {"tokens_evaluated", counts.tokens_evaluated},
              {"batches", counts.batches}}}};
  }
};

Response run_once(Config& c, const Request& r) {
  Runtime& rt = *c.runtime;
  rt.options().max_batch_questions = c.cap;
  rt.options().dedup = c.dedup;
  rt.clear_prefix_cache();
  c.model->set_prune_last_layer(c.prune);
  return rt.decide(r);
}

// Interleaved: round r runs every configuration once, starting at configuration r mod n.
std::map<std::string, Samples> interleaved(std::vector<Config*> configs, const Request& request,
                                           int warmup, int runs, double max_seconds) {
  std::map<std::string, Samples> out;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < warmup + runs; ++r) {
    for (size_t k = 0; k < configs.size(); ++k) {
      Config& c = *configs[(static_cast<size_t>(r) + k) % configs.size()];
      const Response resp = run_once(c, request);
      if (r >= warmup) out[c.name].add(resp);
    }
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r >= warmup && elapsed > max_seconds) break;
  }
  return out;
}

void print_row(const std::string& workload, const std::string& config, const Samples& s) {
  std::printf(
      "  %-8s %-16s n=%-4zu e2e p50 %9.2f p95 %9.2f | prepare %7.2f forward %9.2f "
      "post %6.3f ms (p50)  tokens %lld batches %lld\n",
      workload.c_str(), config.c_str(), s.total.size(), percentile(s.total, 0.5),
      percentile(s.total, 0.95), percentile(s.prepare, 0.5), percentile(s.forward, 0.5),
      percentile(s.postprocess, 0.5), static_cast<long long>(s.counts.tokens_evaluated),
      static_cast<long long>(s.counts.batches));
  std::fflush(stdout);
}

Json quality(const Response& ref, const Response& got) {
  int agree = 0;
  double worst = 0;
  std::vector<double> per_question;
  for (size_t i = 0; i < ref.answers.size(); ++i) {
    agree += ref.answers[i].answer_index == got.answers[i].answer_index;
    double m = 0;
    for (size_t k = 0; k < ref.answers[i].probs.size(); ++k) {
      const double d = std::fabs(double(ref.answers[i].probs[k]) - got.answers[i].probs[k]);
      m = std::isfinite(d) ? std::max(m, d) : INFINITY;
    }
    per_question.push_back(m);
    worst = std::max(worst, m);
  }
  return {{"questions", ref.answers.size()},
          {"top1_agree", agree},
          {"max_abs_dp", worst},
          {"median_question_max_abs_dp", percentile(per_question, 0.5)},
          {"per_question_max_abs_dp", per_question}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Decision runtime latency per stage on dummy weights, levers interleaved"};
  std::string dir = "bench/configs/decision-large", out;
  std::vector<std::string> workloads = {"short5", "short10", "short50", "long10", "dup50"};
  std::vector<std::string> lever_workloads = {"short10", "long10"};
  std::vector<std::string> lever_names = {"no_batching", "no_pruning", "dense_attention", "int8",
                                          "int4"};
  int runs = 200, lever_runs = 50, warmup = 1, threads = 0;
  double max_seconds = 600;
  bool real_weights = false, quality_on = true;
  app.add_option("--config-dir", dir, "encoder_config.json + decision_config.json");
  app.add_option("--workload", workloads, "headline workloads");
  app.add_option("--lever-workload", lever_workloads, "workloads of the interleaved lever run");
  app.add_option("--runs", runs, "measured requests per headline workload (>= 1)");
  app.add_option("--lever", lever_names, "levers to switch off against default (all by default)");
  app.add_option("--lever-runs", lever_runs, "measured rounds of the lever run (0: skip)");
  app.add_option("--warmup", warmup, "unmeasured requests first");
  app.add_option("--max-seconds", max_seconds, "stop a workload's measurement after this long");
  app.add_option("--threads", threads, "CPU threads (0: one per core; the CPU only)");
  std::string device = "cpu";
  std::string tokenizer_path =
      std::string(INFERA_SOURCE_DIR) + "/tests/data/tokenizer_parity/wordpiece_bert.json";
  app.add_option("--device", device, "cpu, cuda or auto");
  app.add_option("--tokenizer", tokenizer_path,
                 "the WordPiece test tokenizer (tests/data/tokenizer_parity/wordpiece_bert.json)");
  app.add_option("--out", out, "JSON file for every sample");
  app.add_flag("--real-weights", real_weights,
               "load the folder's model.safetensors instead of dummy weights (quality numbers: "
               "dummy weights make every marker row alike, so their option probabilities are "
               "uniform and the 8/4-bit comparison says nothing)");
  app.add_flag("--quality,!--no-quality", quality_on,
               "compare int8/int4 answers with default over the headline workloads");
  CLI11_PARSE(app, argc, argv);
  try {
    auto backend = make_backend({.device = device, .threads = threads});
    auto dense = make_backend({.device = device, .threads = threads, .packed_attention = "dense"});
    auto load = [&](Backend& b, WeightFormat f) {
      ModelOptions o;
      o.dummy_weights = !real_weights;
      o.dummy_seed = 1;
      o.weights = f;
      return DecisionModel::load(dir, b, o);
    };
    auto model = load(*backend, WeightFormat::Stored);
    auto tok = bench_tokenizer(model->config(), tokenizer_path);
    Runtime rt(*model, {}, tok, "bench");
    Config def{"default", model.get(), 16, true, false, &rt};
    Json result = {{"config_dir", dir},
                   {"model", model->encoder_info().summary()},
                   {"backend", backend->name()},
                   {"threads", threads},
                   {"device", device},
                   {"warmup", warmup},
                   {"weights", real_weights ? "checkpoint" : "dummy (seed 1)"},
                   {"workloads", Json::object()}};
    std::printf("%s: %s, %s\n", dir.c_str(), model->encoder_info().summary().c_str(),
                backend->name().c_str());
    std::map<std::string, Response> reference;
    for (const std::string& w : workloads) {
      const Request req = make_request(w, model->config(), *tok);
      std::vector<Config*> cs = {&def};
      Config dedup{"default_dedup", model.get(), 16, true, true, &rt};
      if (w == "dup50") cs.push_back(&dedup);
      auto samples = interleaved(cs, req, warmup, runs, max_seconds);
      for (auto& [name, s] : samples) {
        print_row(w, name, s);
        result["workloads"][w][name] = s.json();
      }
      reference[w] = run_once(def, req);
    }
    if (lever_runs > 0) {
      auto int8 = load(*backend, WeightFormat::Int8Group64);
      auto int4 = load(*backend, WeightFormat::Int4Group64);
      auto wide = load(*dense, WeightFormat::Stored);
      Runtime rt8(*int8, {}, tok, "bench"), rt4(*int4, {}, tok, "bench"),
          rtd(*wide, {}, tok, "bench");
      Config no_batch{"no_batching", model.get(), 1, true, false, &rt};
      Config no_prune{"no_pruning", model.get(), 16, false, false, &rt};
      Config dense_cfg{"dense_attention", wide.get(), 16, true, false, &rtd};
      Config c8{"int8", int8.get(), 16, true, false, &rt8};
      Config c4{"int4", int4.get(), 16, true, false, &rt4};
      // A backend without a quantized matmul keeps every weight in full precision (the quant
      // report names each); measuring those "int8/int4" models would measure bf16 twice.
      const bool quantized = !int8->quant_report().quantized.empty();
      if (!quantized) {
        std::printf(
            "  int8/int4 levers and quality skipped: the %s backend has no quantized "
            "matmul (every weight stays in full precision)\n",
            backend->name().c_str());
        result["quant_levers_skipped"] = "the backend has no quantized matmul";
      }
      std::vector<Config*> levers = {&def};
      for (Config* c : {&no_batch, &no_prune, &dense_cfg, &c8, &c4})
        if (std::find(lever_names.begin(), lever_names.end(), c->name) != lever_names.end() &&
            (quantized || (c != &c8 && c != &c4)))
          levers.push_back(c);
      for (const auto& [fmt, m] : {std::pair{"int8", int8.get()}, std::pair{"int4", int4.get()}}) {
        const QuantReport& q = m->quant_report();
        Json kept = Json::array();
        for (const auto& k : q.kept) kept.push_back({{"tensor", k.tensor}, {"reason", k.reason}});
        result["quant_report"][fmt] = {{"quantized_tensors", q.quantized.size()},
                                       {"quantized_params", q.quantized_params},
                                       {"kept", kept}};
      }
      for (const std::string& w : lever_workloads) {
        const Request req = make_request(w, model->config(), *tok);
        auto samples = interleaved(levers, req, warmup, lever_runs, max_seconds);
        for (auto& [name, s] : samples) {
          print_row(w, name, s);
          result["levers"][w][name] = s.json();
        }
      }
      for (const std::string& w : quality_on&& quantized ? workloads : std::vector<std::string>{}) {
        const Request req = make_request(w, model->config(), *tok);
        const Response ref = reference.count(w) ? reference[w] : run_once(def, req);
        for (Config* c : {&c8, &c4}) {
          const Json q = quality(ref, run_once(*c, req));
          result["quality"][w][c->name] = q;
          std::printf(
              "  quality %-8s %-5s top-1 agree %d/%d, max |dp| %.4f (median per question "
              "%.4f)\n",
              w.c_str(), c->name.c_str(), q["top1_agree"].get<int>(), q["questions"].get<int>(),
              q["max_abs_dp"].get<double>(), q["median_question_max_abs_dp"].get<double>());
        }
      }
    }
    result["peak_rss_mb"] = peak_rss_mb();
    std::printf("peak RSS %.0f MB\n", peak_rss_mb());
    if (!out.empty()) std::ofstream(out) << result.dump(1) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decision_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
