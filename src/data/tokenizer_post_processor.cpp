#include "data/tokenizer_post_processor.h"

#include <algorithm>
#include <sstream>

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::data {

using nlohmann::json;

namespace {

// One template piece: "$A" / "$0" / "$" (the sequence), "$B" / "$1" (a second sequence), or a
// special token name; each may end in ":<type_id>" (ignored here).
struct Piece {
  bool sequence = false;
  bool second = false;
  std::string special;
};

Piece parse_piece_string(std::string s) {
  Piece p;
  if (auto colon = s.rfind(':'); colon != std::string::npos && colon > 0 &&
                                 s.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
                                 colon + 1 < s.size())
    s = s.substr(0, colon);
  if (!s.empty() && s[0] == '$') {
    const std::string rest = s.substr(1);
    p.sequence = true;
    p.second = !(rest.empty() || rest == "A" || rest == "a" || rest == "0");
    return p;
  }
  p.special = s;
  return p;
}

std::vector<Piece> parse_template(const json& t, const JsonAt& at) {
  std::vector<Piece> out;
  if (t.is_string()) {  // "<s> $A </s>"
    std::istringstream in(t.get<std::string>());
    for (std::string w; in >> w;) out.push_back(parse_piece_string(w));
    return out;
  }
  if (!t.is_array()) at.expected("a template (a list of pieces)", t);
  for (size_t i = 0; i < t.size(); ++i) {
    const json& e = t[i];
    const JsonAt e_at = at.index(i);
    if (e.is_string()) {
      out.push_back(parse_piece_string(e.get<std::string>()));
    } else if (e.is_object() && e.contains("Sequence")) {
      const std::string id = json_string(json_object(e, "Sequence", e_at), "id", e_at.key("Sequence"));
      if (id != "A" && id != "B") e_at.key("Sequence").key("id").expected(R"("A" or "B")", id);
      out.push_back({true, id == "B", ""});
    } else if (e.is_object() && e.contains("SpecialToken")) {
      out.push_back({false, false, json_string(json_object(e, "SpecialToken", e_at), "id", e_at.key("SpecialToken"))});
    } else {
      e_at.expected(R"({"Sequence": {...}} or {"SpecialToken": {...}})", e);
    }
  }
  return out;
}

// ("[CLS]", 101) pairs of Bert/RobertaProcessing.
int32_t token_pair_id(const json& node, const std::string& k, const JsonAt& at) {
  const json& v = json_require(node, k, at);
  if (!v.is_array() || v.size() != 2 || !v[0].is_string()) at.key(k).expected(R"(["token", id])", v);
  return json_id(v[1], at.key(k).index(1));
}

}  // namespace

PostProcessor PostProcessor::from_json(const json& node, const JsonAt& at) {
  PostProcessor p;
  if (node.is_null()) return p;
  p.spec_ = node;
  p.add(node, at);
  return p;
}

void PostProcessor::add_template(std::vector<int32_t> items) {
  if (templates_.empty()) {  // bos / eos: the special ids right around the sequence
    auto seq = std::find(items.begin(), items.end(), kSequence);
    if (seq != items.end()) {
      if (seq != items.begin()) bos_ = *(seq - 1);
      if (seq + 1 != items.end() && *(seq + 1) != kSequence) eos_ = *(seq + 1);
    }
  }
  templates_.push_back(std::move(items));
}

void PostProcessor::add(const json& node, const JsonAt& at) {
  if (!node.is_object()) at.expected("a post-processor mapping", node);
  const std::string type = json_string(node, "type", at);
  if (type == "Sequence") {
    const json& list = json_require(node, "processors", at);
    if (!list.is_array()) at.key("processors").expected("a list", list);
    for (size_t i = 0; i < list.size(); ++i) add(list[i], at.key("processors").index(i));
  } else if (type == "ByteLevel") {
    // offsets only
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    add_template({token_pair_id(node, "cls", at), kSequence, token_pair_id(node, "sep", at)});
  } else if (type == "TemplateProcessing") {
    const json& specials = json_object(node, "special_tokens", at);
    const JsonAt sp_at = at.key("special_tokens");
    const std::vector<Piece> single = parse_template(json_require(node, "single", at), at.key("single"));
    if (node.contains("pair")) parse_template(node["pair"], at.key("pair"));  // validated, unused
    std::vector<int32_t> items;
    for (size_t i = 0; i < single.size(); ++i) {
      const Piece& pc = single[i];
      if (pc.sequence) {
        if (pc.second) at.key("single").index(i).fail("the single-sequence template refers to a second sequence ($B)");
        items.push_back(kSequence);
        continue;
      }
      auto it = specials.find(pc.special);
      if (it == specials.end())
        at.key("single").index(i).fail(
            fmt::format("special token {} is missing from {}.special_tokens", describe_value(pc.special), at.path));
      const JsonAt tok_at = sp_at.key(describe_value(pc.special));
      const json& ids = json_require(*it, "ids", tok_at);
      if (!ids.is_array() || ids.empty()) tok_at.key("ids").expected("a non-empty list of token ids", ids);
      for (size_t k = 0; k < ids.size(); ++k) items.push_back(json_id(ids[k], tok_at.key("ids").index(k)));
    }
    add_template(std::move(items));
  } else {
    at.key("type").fail(fmt::format(
        "unsupported post-processor {} (supported: TemplateProcessing, BertProcessing, RobertaProcessing, "
        "ByteLevel, Sequence)",
        describe_value(type)));
  }
}

std::vector<int32_t> PostProcessor::apply(std::vector<int32_t> ids) const {
  for (const std::vector<int32_t>& t : templates_) {
    std::vector<int32_t> out;
    out.reserve(ids.size() + t.size());
    for (int32_t item : t) {
      if (item == kSequence) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else {
        out.push_back(item);
      }
    }
    ids = std::move(out);
  }
  return ids;
}

}  // namespace nemotron::data
