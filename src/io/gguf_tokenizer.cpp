#include "io/gguf_tokenizer.h"

#include <map>

#include "infera/error.h"

namespace infera::io {

namespace {

using nlohmann::json;

enum TokenType : int64_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

// Qwen2's pre-tokenizer, as its tokenizer.json spells it (llama.cpp calls this pre "qwen2").
const char* kQwen2Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

json byte_level() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", false},
          {"use_regex", false}};
}

[[noreturn]] void bad(const std::string& origin, const std::string& key, const std::string& what) {
  throw FormatError(origin + ": metadata " + key + ": " + what);
}

const GgufValue& require(const GgufFile& f, const std::string& origin, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (!v) bad(origin, key, "missing");
  return *v;
}

std::string require_string(const GgufFile& f, const std::string& origin, const std::string& key) {
  const GgufValue& v = require(f, origin, key);
  if (v.type != GgufType::STRING)
    bad(origin, key, std::string("expected STRING, got ") + gguf_type_name(v.type));
  return v.str;
}

const std::vector<std::string>& require_strings(const GgufFile& f, const std::string& origin,
                                                const std::string& key) {
  const GgufValue& v = require(f, origin, key);
  if (v.type != GgufType::ARRAY || v.elem_type != GgufType::STRING)
    bad(origin, key, "expected an array of strings");
  return v.strings;
}

std::optional<int32_t> token_id(const GgufFile& f, const std::string& origin,
                                const std::string& key, size_t n_tokens) {
  const GgufValue* v = f.find(key);
  if (!v) return std::nullopt;
  const auto id = v->as_int();
  if (!id || *id < 0 || static_cast<uint64_t>(*id) >= n_tokens)
    bad(origin, key, "not a token id in [0, " + std::to_string(n_tokens) + ")");
  return static_cast<int32_t>(*id);
}

bool looks_special(const std::string& t) {
  auto wrapped = [&](const std::string& open, const std::string& close) {
    return t.size() >= open.size() + close.size() && t.compare(0, open.size(), open) == 0 &&
           t.compare(t.size() - close.size(), close.size(), close) == 0;
  };
  return t == "<pad>" || t == "<mask>" || wrapped("<|", "|>") ||
         wrapped("<\xef\xbd\x9c", "\xef\xbd\x9c>") || wrapped("<unused", ">");
}

}  // namespace

std::string tokenizer_json_from_gguf(const GgufFile& f, const std::string& origin) {
  const std::string model = require_string(f, origin, "tokenizer.ggml.model");
  if (model != "gpt2")
    bad(origin, "tokenizer.ggml.model",
        "'" + model + "' is not supported (only byte-level BPE, 'gpt2')");
  const GgufValue* pre = f.find("tokenizer.ggml.pre");
  if (!pre || pre->type != GgufType::STRING || pre->str != "qwen2")
    bad(origin, "tokenizer.ggml.pre",
        "'" + (pre && pre->type == GgufType::STRING ? pre->str : std::string("(missing)")) +
            "' is not supported (only 'qwen2')");
  const auto& tokens = require_strings(f, origin, "tokenizer.ggml.tokens");
  const auto& merges = require_strings(f, origin, "tokenizer.ggml.merges");
  const GgufValue* types = f.find("tokenizer.ggml.token_type");
  std::vector<int64_t> type_of(tokens.size(), kNormal);
  if (types) {
    if (types->type != GgufType::ARRAY || types->array_size() != tokens.size() ||
        (types->elem_type != GgufType::INT32 && types->elem_type != GgufType::UINT32))
      bad(origin, "tokenizer.ggml.token_type",
          "expected an INT32 array as long as tokenizer.ggml.tokens (" +
              std::to_string(tokens.size()) + ")");
    for (size_t i = 0; i < tokens.size(); ++i)
      type_of[i] = types->elem_type == GgufType::INT32 ? types->sints[i]
                                                       : static_cast<int64_t>(types->uints[i]);
  }
  if (tokens.size() > (size_t{1} << 24)) bad(origin, "tokenizer.ggml.tokens", "too many tokens");

  json vocab = json::object();
  json added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string where = "tokenizer.ggml.tokens[" + std::to_string(id) + "]";
    switch (type_of[id]) {
      case kNormal:
        if (vocab.contains(tokens[id])) bad(origin, where, "duplicate token '" + tokens[id] + "'");
        vocab[tokens[id]] = id;
        break;
      case kControl:
      case kUserDefined:
        added.push_back({{"id", id},
                         {"content", tokens[id]},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", type_of[id] == kControl}});
        break;
      case kUnused:
      case kUnknown:
        break;  // padding rows of the embedding; no text maps to them
      default:
        bad(origin, "tokenizer.ggml.token_type[" + std::to_string(id) + "]",
            "token type " + std::to_string(type_of[id]) + " is not supported in a gpt2 tokenizer");
    }
  }
  json root = {{"version", "1.0"},
               {"truncation", nullptr},
               {"padding", nullptr},
               {"added_tokens", added},
               {"normalizer", {{"type", "NFC"}}},
               {"pre_tokenizer",
                {{"type", "Sequence"},
                 {"pretokenizers", json::array({{{"type", "Split"},
                                                 {"pattern", {{"Regex", kQwen2Split}}},
                                                 {"behavior", "Isolated"},
                                                 {"invert", false}},
                                                byte_level()})}}},
               {"post_processor", byte_level()},
               {"decoder", byte_level()},
               {"model",
                {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", nullptr},
                 {"continuing_subword_prefix", ""},
                 {"end_of_word_suffix", ""},
                 {"fuse_unk", false},
                 {"byte_fallback", false},
                 {"ignore_merges", false},
                 {"vocab", vocab},
                 {"merges", merges}}}};
  try {
    return root.dump();
  } catch (const json::exception&) {  // a token or merge that is not valid UTF-8
    throw FormatError(origin +
                      ": tokenizer.ggml.tokens or tokenizer.ggml.merges holds a string "
                      "that is not valid UTF-8");
  }
}

std::vector<int32_t> gguf_stop_token_ids(const GgufFile& f, const std::string& origin) {
  const auto& tokens = require_strings(f, origin, "tokenizer.ggml.tokens");
  std::vector<int32_t> ids;
  auto add = [&](std::optional<int32_t> id) {
    if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  };
  add(token_id(f, origin, "tokenizer.ggml.eos_token_id", tokens.size()));
  add(token_id(f, origin, "tokenizer.ggml.eot_token_id", tokens.size()));
  for (const char* text : {"<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end|>"})
    for (size_t id = 0; id < tokens.size(); ++id)
      if (tokens[id] == text) add(static_cast<int32_t>(id));
  return ids;
}

void add_tokenizer_metadata(GgufWriter& w, const TokenizerMetadataSource& src,
                            const std::string& origin) {
  const json& tok = *src.tokenizer;
  auto fail = [&](const std::string& what) { throw FormatError(origin + ": " + what); };
  if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object())
    fail("tokenizer.json has no 'model' object");
  const json& model = tok["model"];
  if (model.value("type", "BPE") != "BPE" || !model.contains("vocab") ||
      !model["vocab"].is_object())
    fail("tokenizer.json: only a BPE model with a vocab object can be written to GGUF");
  const int64_t n = src.vocab_size;
  std::vector<std::string> tokens(static_cast<size_t>(n));
  std::vector<int32_t> types(static_cast<size_t>(n), kUnused);
  std::vector<bool> set(static_cast<size_t>(n), false);
  auto place = [&](int64_t id, const std::string& text, int32_t type) {
    if (id < 0 || id >= n)
      fail("token '" + text + "' has id " + std::to_string(id) + " outside the " +
           std::to_string(n) + "-row embedding");
    tokens[static_cast<size_t>(id)] = text;
    types[static_cast<size_t>(id)] = type;
    set[static_cast<size_t>(id)] = true;
  };
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer())
      fail("tokenizer.json: vocab id of '" + text + "' is not an integer");
    place(id.get<int64_t>(), text, kNormal);
  }
  std::map<std::string, int64_t> added_ids;
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const json& a : tok["added_tokens"]) {
      const std::string content = a.value("content", "");
      const int64_t id = a.value("id", int64_t{-1});
      const bool special = a.value("special", false) || looks_special(content);
      place(id, content, special ? kControl : kUserDefined);
      added_ids[content] = id;
    }
  }
  for (int64_t id = 0; id < n; ++id)
    if (!set[static_cast<size_t>(id)])
      tokens[static_cast<size_t>(id)] = "[PAD" + std::to_string(id) + "]";

  std::vector<std::string> merges;
  if (model.contains("merges") && model["merges"].is_array()) {
    for (const json& m : model["merges"]) {
      if (m.is_string()) {
        merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      } else {
        fail("tokenizer.json: a merge is neither \"a b\" nor [\"a\", \"b\"]");
      }
    }
  }
  w.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
  w.set("tokenizer.ggml.pre", GgufValue::string("qwen2"));
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens)));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  w.set("tokenizer.ggml.merges", GgufValue::string_array(std::move(merges)));

  // Special ids the way llama.cpp's SpecialVocab finds them: tokenizer_config.json's token
  // strings first, config.json's bos_token_id as the fallback for bos.
  const json* cfg = src.tokenizer_config;
  auto token_of = [&](const char* key) -> std::optional<int64_t> {
    if (!cfg || !cfg->contains(key)) return std::nullopt;
    const json& v = (*cfg)[key];
    const std::string text = v.is_string() ? v.get<std::string>()
                             : v.is_object() && v.contains("content") && v["content"].is_string()
                                 ? v["content"].get<std::string>()
                                 : std::string();
    const auto it = added_ids.find(text);
    if (it != added_ids.end()) return it->second;
    const auto& vocab = model["vocab"];
    if (!text.empty() && vocab.contains(text)) return vocab[text].get<int64_t>();
    return std::nullopt;
  };
  std::optional<int64_t> bos = token_of("bos_token");
  if (!bos) bos = src.bos_token_id;
  if (bos) w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<uint32_t>(*bos)));
  if (const auto eos = token_of("eos_token"))
    w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<uint32_t>(*eos)));
  if (const auto pad = token_of("pad_token"))
    w.set("tokenizer.ggml.padding_token_id", GgufValue::u32(static_cast<uint32_t>(*pad)));
  if (cfg && cfg->contains("add_bos_token") && (*cfg)["add_bos_token"].is_boolean())
    w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean((*cfg)["add_bos_token"].get<bool>()));
  if (cfg && cfg->contains("chat_template") && (*cfg)["chat_template"].is_string())
    w.set("tokenizer.chat_template", GgufValue::string((*cfg)["chat_template"].get<std::string>()));
}

}  // namespace infera::io
