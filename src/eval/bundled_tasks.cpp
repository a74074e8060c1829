#include "eval/bundled_tasks.h"

#include <fmt/format.h>

#include <regex>
#include <set>

#include "core/config_tree.h"
#include "core/error.h"
#include "data/synthetic_corpus.h"

namespace nemotron::eval {

namespace {

// "17 + 25 = 42." -> context "17 + 25 =", answer 42; nullopt for the other text forms.
bool split_fact(const std::string& text, std::string* context, int64_t* answer) {
  static const std::regex fact(R"(^(\d+ [-+*] \d+) = (-?\d+)\.$)");
  std::smatch m;
  if (!std::regex_match(text, m, fact)) return false;
  *context = m[1].str() + " =";
  *answer = std::stoll(m[2].str());
  return true;
}

}  // namespace

std::vector<EvalItem> generate_task_items(TaskType type, const nlohmann::json& generator, const std::string& source,
                                          const std::string& where) {
  ConfigReader r(generator, source, where);
  const std::string kind = r.get_string("kind", "");
  const int64_t count = r.get_positive_int("count", 100);
  data::CorpusConfig cfg = data::CorpusConfig::read(r);
  r.check_unknown_keys();
  const std::string want = type == TaskType::multiple_choice ? "arithmetic_facts"
                           : type == TaskType::generate      ? "arithmetic_chat"
                                                             : "arithmetic_text";
  if (kind != want)
    throw_config_error(source, where + ".kind",
                       fmt::format("a {} task generates kind: {} (got \"{}\")", task_type_name(type), want, kind));
  std::vector<EvalItem> items;
  if (type == TaskType::perplexity) {
    cfg.num_documents = count;
    for (const data::Document& d : data::generate_pretrain_corpus(cfg)) {
      EvalItem it;
      it.text = d.text;
      items.push_back(std::move(it));
    }
    return items;
  }
  // Problems in order from first_problem; facts keep the ones in the plain "a op b = c." form.
  for (int64_t next = cfg.first_problem; static_cast<int64_t>(items.size()) < count; next += count) {
    if (next - cfg.first_problem > 1000 * count)
      throw_config_error(source, where, "no problem of these skills has the fact form \"a + b = c.\" (use addition, "
                                        "subtraction or multiplication)");
    for (const data::Problem& p : data::generate_problems(cfg, next, count)) {
      if (static_cast<int64_t>(items.size()) == count) break;
      EvalItem it;
      if (type == TaskType::generate) {
        it.context = p.question;
        it.answer = std::to_string(p.answer);
        it.shot_target = p.solution;
      } else {
        int64_t ans = 0;
        if (!split_fact(p.text, &it.context, &ans)) continue;
        std::set<int64_t> seen{ans};
        it.choices.push_back(std::to_string(ans) + ".");
        for (int64_t d : {1, -1, 10, -10})
          if (seen.insert(ans + d).second) it.choices.push_back(std::to_string(ans + d) + ".");
        // The right answer's place rotates so that position tells nothing.
        const auto gold = static_cast<size_t>(p.index % static_cast<int64_t>(it.choices.size()));
        std::swap(it.choices[0], it.choices[gold]);
        it.gold = static_cast<int64_t>(gold);
        it.shot_target = it.choices[gold];
      }
      items.push_back(std::move(it));
    }
  }
  return items;
}

}  // namespace nemotron::eval
