#include "data/tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <omp.h>

#include "core/config_tree.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "data/byte_level.h"
#include "data/tokenizer_impl.h"
#include "data/tokenizer_utf8.h"

namespace nemotron::data {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

void check_normalizer(const json& root, const JsonAt& at) {
  auto it = root.find("normalizer");
  if (it == root.end() || it->is_null()) return;
  const JsonAt n_at = at.key("normalizer");
  const std::string type = json_string(*it, "type", n_at);
  if (type == "Sequence") {  // an empty sequence is no normalizer
    const json& list = json_require(*it, "normalizers", n_at);
    if (list.is_array() && list.empty()) return;
    if (list.is_array()) {
      const std::string inner = list[0].is_object() && list[0].contains("type") ? list[0]["type"].dump() : "?";
      n_at.key("normalizers").index(0).fail(
          fmt::format("unsupported normalizer {} (only tokenizers without a normalizer are supported)", inner));
    }
  }
  n_at.key("type").fail(fmt::format("unsupported normalizer {} (only tokenizers without a normalizer are supported)",
                                    describe_value(type)));
}

std::vector<AddedToken> parse_added_tokens(const json& root, const JsonAt& at) {
  std::vector<AddedToken> out;
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return out;
  const JsonAt list_at = at.key("added_tokens");
  if (!it->is_array()) list_at.expected("a list of added tokens", *it);
  for (size_t i = 0; i < it->size(); ++i) {
    const json& e = (*it)[i];
    const JsonAt e_at = list_at.index(i);
    if (!e.is_object()) e_at.expected("an added-token mapping", e);
    AddedToken t;
    t.content = json_string(e, "content", e_at);
    json_id(json_require(e, "id", e_at), e_at.key("id"));  // validated; HF reassigns ids on load
    t.special = json_bool_or(e, "special", false, e_at);
    t.single_word = json_bool_or(e, "single_word", false, e_at);
    t.lstrip = json_bool_or(e, "lstrip", false, e_at);
    t.rstrip = json_bool_or(e, "rstrip", false, e_at);
    t.normalized = json_bool_or(e, "normalized", !t.special, e_at);
    out.push_back(std::move(t));
  }
  return out;
}

// `v` with "type" first in every mapping (as HF writes it), other keys in sorted order.
ojson type_first(const json& v) {
  if (v.is_array()) {
    ojson a = ojson::array();
    for (const json& e : v) a.push_back(type_first(e));
    return a;
  }
  if (!v.is_object()) return parse_json<ojson>(v.dump(), "tokenizer.json");
  ojson o = ojson::object();
  if (auto t = v.find("type"); t != v.end()) o["type"] = type_first(*t);
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it.key() != "type") o[it.key()] = type_first(it.value());
  return o;
}

// Per-thread buffers for encode().
struct EncodeScratch {
  PretokScratch pretok;
  std::vector<TextSegment> segments;
  std::vector<std::string_view> words;
};

EncodeScratch& thread_scratch() {
  thread_local EncodeScratch s;
  return s;
}

}  // namespace

void TokenizerImpl::finish() {
  vocab_size = model->id_limit();
  for (const AddedToken& t : added.sorted()) vocab_size = std::max(vocab_size, t.id + 1);
  decoded.assign(vocab_size, std::string());
  flags.assign(vocab_size, 0);
  for (int32_t id = 0; id < vocab_size; ++id) {
    const std::string* tok = nullptr;
    if (const AddedToken* a = added.by_id(id)) {
      tok = &a->content;
    } else {
      tok = model->id_to_token(id);
    }
    if (tok == nullptr) continue;
    flags[id] = kPresent | (added.is_special(*tok) ? kSpecial : 0);
    if (byte_level_decoder) {
      byte_level_decode_token(*tok, decoded[id]);
    } else {
      decoded[id] = *tok;
    }
  }
}

std::shared_ptr<const TokenizerImpl> tokenizer_from_json(const json& root, const std::string& source) {
  const JsonAt at{source, ""};
  if (!root.is_object()) at.expected("a tokenizer.json mapping", root);
  if (auto v = root.find("version"); v != root.end() && !v->is_null() && *v != "1.0")
    at.key("version").fail(fmt::format("unsupported tokenizer.json version {} (expected \"1.0\")", describe_value(*v)));
  check_normalizer(root, at);
  auto impl = std::make_shared<TokenizerImpl>();
  impl->model = BpeModel::from_json(json_require(root, "model", at), at.key("model"));
  impl->pre_tokenizer = PreTokenizer::from_json(root.value("pre_tokenizer", json()), at.key("pre_tokenizer"));
  impl->added.add(parse_added_tokens(root, at), *impl->model);
  impl->post_processor = PostProcessor::from_json(root.value("post_processor", json()), at.key("post_processor"));
  impl->decoder = root.value("decoder", json());
  if (!impl->decoder.is_null()) {
    const std::string type = json_string(impl->decoder, "type", at.key("decoder"));
    if (type != "ByteLevel")
      at.key("decoder").key("type").fail(
          fmt::format("unsupported decoder {} (supported: ByteLevel, or null)", describe_value(type)));
    impl->byte_level_decoder = true;
  }
  impl->finish();
  return impl;
}

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::from_json_text(const std::string& text, const std::string& source) {
  return Tokenizer(tokenizer_from_json(parse_json_text(text, source), source));
}

Tokenizer Tokenizer::load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw_config_error(path, "", "is a directory, expected a tokenizer.json");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw_config_error(path, "", "cannot open file");
  std::stringstream ss;
  ss << f.rdbuf();
  return from_json_text(ss.str(), path);
}

std::string Tokenizer::to_json_text() const {
  const TokenizerImpl& t = *impl_;
  ojson root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  ojson added = ojson::array();
  for (const AddedToken& a : t.added.sorted())
    added.push_back({{"id", a.id},
                     {"content", a.content},
                     {"single_word", a.single_word},
                     {"lstrip", a.lstrip},
                     {"rstrip", a.rstrip},
                     {"normalized", a.normalized},
                     {"special", a.special}});
  root["added_tokens"] = std::move(added);
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = type_first(t.pre_tokenizer.to_json());
  root["post_processor"] = type_first(t.post_processor.to_json());
  root["decoder"] = type_first(t.decoder);
  root["model"] = t.model->to_json();
  return root.dump(2, ' ', false) + "\n";
}

void Tokenizer::save(const std::string& path) const {
  const std::string text = to_json_text();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(fmt::format("{}: cannot write: {}", tmp, std::strerror(errno)));
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.close();
    if (!f) throw Error(fmt::format("{}: write failed: {}", tmp, std::strerror(errno)));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(fmt::format("{}: cannot rename to {}: {}", tmp, path, ec.message()));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const size_t bad = utf8_invalid_at(text); bad != std::string_view::npos)
    throw InputError(fmt::format("encode: text is not valid UTF-8 (byte {} of {})", bad, text.size()));
  const TokenizerImpl& t = *impl_;
  EncodeScratch& s = thread_scratch();
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  s.segments.clear();
  t.added.split(text, s.segments);
  for (const TextSegment& seg : s.segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    s.words.clear();
    t.pre_tokenizer.run(text.substr(seg.begin, seg.end - seg.begin), s.pretok, s.words);
    for (std::string_view w : s.words) t.model->tokenize(w, ids);
    s.pretok.clear();
  }
  if (text.size() > (size_t{8} << 20)) s = EncodeScratch();  // do not keep huge buffers per thread
  if (add_special_tokens) return t.post_processor.apply(std::move(ids));
  return ids;
}

std::vector<std::vector<int32_t>> Tokenizer::encode_batch(const std::vector<std::string>& texts,
                                                          bool add_special_tokens) const {
  std::vector<std::vector<int32_t>> out(texts.size());
  std::exception_ptr error;
  const auto n = static_cast<int64_t>(texts.size());
#pragma omp parallel for schedule(dynamic, 4) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    try {
      out[i] = encode(texts[i], add_special_tokens);
    } catch (...) {
#pragma omp critical(nemotron_tokenizer_batch_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const TokenizerImpl& t = *impl_;
  std::string bytes;
  bool first = true;
  for (int32_t id : ids) {
    if (id < 0 || id >= t.vocab_size) continue;
    const uint8_t f = t.flags[id];
    if (!(f & TokenizerImpl::kPresent)) continue;
    if (skip_special_tokens && (f & TokenizerImpl::kSpecial)) continue;
    if (!t.byte_level_decoder && !first) bytes += ' ';  // no decoder: HF joins tokens with spaces
    bytes += t.decoded[id];
    first = false;
  }
  return t.byte_level_decoder ? utf8_lossy(bytes) : bytes;
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = impl_->added.id_of(token)) return id;
  return impl_->model->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* a = impl_->added.by_id(id)) return a->content;
  if (const std::string* s = impl_->model->id_to_token(id)) return *s;
  return std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size && (impl_->flags[id] & TokenizerImpl::kSpecial);
}

std::optional<int32_t> Tokenizer::bos_token_id() const {
  if (bos_override_) return bos_override_;
  if (auto id = impl_->post_processor.template_bos()) return id;
  for (const char* name : {"<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>"})
    if (auto id = token_to_id(name)) return id;
  return std::nullopt;
}

std::optional<int32_t> Tokenizer::template_bos_token_id() const { return impl_->post_processor.template_bos(); }

std::optional<std::string> Tokenizer::token_bytes(int32_t id) const {
  const TokenizerImpl& t = *impl_;
  if (id < 0 || id >= t.vocab_size || !(t.flags[id] & TokenizerImpl::kPresent)) return std::nullopt;
  return t.decoded[id];
}

std::optional<int32_t> Tokenizer::eos_token_id() const {
  if (eos_override_) return eos_override_;
  if (auto id = impl_->post_processor.template_eos()) return id;
  for (const char* name : {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>"})
    if (auto id = token_to_id(name)) return id;
  return std::nullopt;
}

void Tokenizer::set_bos_token(const std::string& token) {
  auto id = token_to_id(token);
  if (!id) throw InputError(fmt::format("bos token {} is not in the tokenizer's vocabulary", describe_value(token)));
  bos_override_ = id;
}

void Tokenizer::set_eos_token(const std::string& token) {
  auto id = token_to_id(token);
  if (!id) throw InputError(fmt::format("eos token {} is not in the tokenizer's vocabulary", describe_value(token)));
  eos_override_ = id;
}

}  // namespace nemotron::data
