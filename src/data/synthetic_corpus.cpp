#include "data/synthetic_corpus.h"

#include "core/config_tree.h"
#include "core/error.h"
#include "data/jsonl.h"

namespace nemotron::data {

void CorpusConfig::validate(const std::string& where) const {
  auto fail = [&](const char* key, const std::string& what) {
    throw InputError(fmt::format("{}.{}: {}", where, key, what));
  };
  if (first_problem < 0) fail("first_problem", fmt::format("expected an integer >= 0, got {}", first_problem));
  if (num_documents < 0) fail("num_documents", fmt::format("expected an integer >= 0, got {}", num_documents));
  if (problems_per_document < 1)
    fail("problems_per_document", fmt::format("expected a positive integer, got {}", problems_per_document));
  if (num_examples < 0) fail("num_examples", fmt::format("expected an integer >= 0, got {}", num_examples));
  if (knobs.min_digits < 1 || knobs.min_digits > 9)
    fail("min_digits", fmt::format("expected an integer in [1, 9], got {}", knobs.min_digits));
  if (knobs.max_digits < knobs.min_digits || knobs.max_digits > 9)
    fail("max_digits", fmt::format("expected an integer in [min_digits = {}, 9], got {}", knobs.min_digits,
                                   knobs.max_digits));
  if (knobs.max_steps < 1 || knobs.max_steps > 8)
    fail("max_steps", fmt::format("expected an integer in [1, 8], got {}", knobs.max_steps));
  if (knobs.skills.empty()) fail("skills", "expected at least one skill");
}

CorpusConfig CorpusConfig::read(ConfigReader& r) {
  CorpusConfig c;
  c.seed = static_cast<uint64_t>(r.get_nonnegative_int("seed", static_cast<int64_t>(c.seed)));
  c.first_problem = r.get_nonnegative_int("first_problem", c.first_problem);
  c.num_documents = r.get_nonnegative_int("num_documents", c.num_documents);
  c.problems_per_document = r.get_positive_int("problems_per_document", c.problems_per_document);
  c.num_examples = r.get_nonnegative_int("num_examples", c.num_examples);
  c.knobs.min_digits = static_cast<int>(r.get_positive_int("min_digits", c.knobs.min_digits));
  c.knobs.max_digits = static_cast<int>(r.get_positive_int("max_digits", c.knobs.max_digits));
  c.knobs.max_steps = static_cast<int>(r.get_positive_int("max_steps", c.knobs.max_steps));
  const nlohmann::json& skills = r.get_raw("skills");
  if (!skills.is_null()) {
    if (!skills.is_array()) r.fail("skills", "expected a list of skill names, got " + describe_value(skills));
    std::vector<std::string> names;
    for (Skill s : kAllSkills) names.emplace_back(skill_name(s));
    c.knobs.skills.clear();
    for (size_t i = 0; i < skills.size(); ++i) {
      const std::string key = fmt::format("skills[{}]", i);
      if (!skills[i].is_string()) r.fail(key, "expected a skill name, got " + describe_value(skills[i]));
      auto s = skill_from_name(skills[i].get<std::string>());
      if (!s) {
        const std::string near = nearest_key(skills[i].get<std::string>(), names);
        r.fail(key, fmt::format("unknown skill {}{}; expected one of {}", describe_value(skills[i]),
                                near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near),
                                fmt::join(names, ", ")));
      }
      c.knobs.skills.push_back(*s);
    }
  }
  c.validate(r.source() + ": " + (r.path().empty() ? std::string("corpus") : r.path()));
  return c;
}

std::vector<Problem> generate_problems(const CorpusConfig& cfg, int64_t first, int64_t count) {
  cfg.validate("corpus");
  std::vector<Problem> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out.push_back(make_problem(cfg.seed, first + i, cfg.knobs));
  return out;
}

std::vector<Document> generate_pretrain_corpus(const CorpusConfig& cfg) {
  cfg.validate("corpus");
  std::vector<Document> docs;
  docs.reserve(static_cast<size_t>(cfg.num_documents));
  for (int64_t d = 0; d < cfg.num_documents; ++d) {
    Document doc;
    for (int64_t j = 0; j < cfg.problems_per_document; ++j) {
      const Problem p = make_problem(cfg.seed, cfg.first_problem + d * cfg.problems_per_document + j, cfg.knobs);
      doc.text += (j ? "\n" : "") + p.text;
    }
    docs.push_back(std::move(doc));
  }
  return docs;
}

std::vector<SftExample> generate_sft_examples(const CorpusConfig& cfg) {
  std::vector<SftExample> out;
  for (const Problem& p : generate_problems(cfg, cfg.first_problem, cfg.num_examples))
    out.push_back(SftExample{{{"user", p.question}, {"assistant", p.solution}}});
  return out;
}

std::vector<RlExample> generate_rl_examples(const CorpusConfig& cfg) {
  std::vector<RlExample> out;
  for (const Problem& p : generate_problems(cfg, cfg.first_problem, cfg.num_examples))
    out.push_back(RlExample{p.question, std::to_string(p.answer)});
  return out;
}

nlohmann::json to_json(const Document& d) { return {{"text", d.text}}; }

nlohmann::json to_json(const SftExample& e) {
  nlohmann::json messages = nlohmann::json::array();
  for (const auto& m : e.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  return {{"messages", messages}};
}

nlohmann::json to_json(const RlExample& e) { return {{"input", e.input}, {"output", e.output}}; }

namespace {
template <class T>
void write_rows(const std::string& path, const std::vector<T>& items) {
  std::vector<nlohmann::json> rows;
  rows.reserve(items.size());
  for (const auto& item : items) rows.push_back(to_json(item));
  write_jsonl(path, rows);
}
}  // namespace

void write_pretrain_jsonl(const std::string& path, const std::vector<Document>& docs) { write_rows(path, docs); }
void write_sft_jsonl(const std::string& path, const std::vector<SftExample>& examples) { write_rows(path, examples); }
void write_rl_jsonl(const std::string& path, const std::vector<RlExample>& examples) { write_rows(path, examples); }

}  // namespace nemotron::data
