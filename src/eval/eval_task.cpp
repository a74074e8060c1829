#include "eval/eval_task.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/json_limits.h"
#include "core/rng.h"
#include "data/jsonl.h"

namespace nemotron::eval {

const char* task_type_name(TaskType t) {
  switch (t) {
    case TaskType::multiple_choice: return "multiple_choice";
    case TaskType::generate: return "generate";
    case TaskType::perplexity: return "perplexity";
  }
  return "?";
}

std::optional<TaskType> task_type_from_name(const std::string& name) {
  for (TaskType t : {TaskType::multiple_choice, TaskType::generate, TaskType::perplexity})
    if (name == task_type_name(t)) return t;
  return std::nullopt;
}

std::optional<RowFormat> row_format_from_name(const std::string& name) {
  if (name == "auto") return RowFormat::automatic;
  if (name == "native") return RowFormat::native;
  if (name == "lm_eval_mc") return RowFormat::lm_eval_mc;
  if (name == "gsm8k") return RowFormat::gsm8k;
  return std::nullopt;
}

namespace {

std::string get_string(const nlohmann::json& row, const char* key, const std::string& where) {
  if (!row.contains(key) || !row[key].is_string())
    throw InputError(fmt::format("{}: {}: expected a string", where, key));
  return row[key].get<std::string>();
}

std::vector<std::string> get_strings(const nlohmann::json& v, const char* key, const std::string& where) {
  if (!v.is_array() || v.empty()) throw InputError(fmt::format("{}: {}: expected a non-empty list of strings", where, key));
  std::vector<std::string> out;
  for (const auto& s : v) {
    if (!s.is_string()) throw InputError(fmt::format("{}: {}: expected a non-empty list of strings", where, key));
    out.push_back(s.get<std::string>());
  }
  return out;
}

int64_t get_index(const nlohmann::json& v, const char* key, size_t n, const std::string& where) {
  int64_t g = -1;
  if (v.is_number_integer()) g = v.get<int64_t>();
  else if (v.is_string() && !v.get<std::string>().empty() &&
           v.get<std::string>().find_first_not_of("0123456789") == std::string::npos)
    g = std::stoll(v.get<std::string>());
  if (g < 0 || g >= static_cast<int64_t>(n))
    throw InputError(fmt::format("{}: {}: expected an index of the {} choices, got {}", where, key, n, json_excerpt(v)));
  return g;
}

// lm-eval multiple choice rows: ARC, HellaSwag, or query/choices/gold.
EvalItem lm_eval_mc(const nlohmann::json& row, const std::string& where) {
  EvalItem it;
  if (row.contains("question") && row.contains("answerKey")) {  // ARC (allenai/ai2_arc)
    const auto& c = row.value("choices", nlohmann::json());
    if (!c.is_object()) throw InputError(fmt::format("{}: choices: expected {{\"text\": [...], \"label\": [...]}}", where));
    const auto texts = get_strings(c.value("text", nlohmann::json()), "choices.text", where);
    const auto labels = get_strings(c.value("label", nlohmann::json()), "choices.label", where);
    if (labels.size() != texts.size()) throw InputError(fmt::format("{}: choices: {} labels for {} texts", where, labels.size(), texts.size()));
    const std::string key = get_string(row, "answerKey", where);
    const auto pos = std::find(labels.begin(), labels.end(), key);
    if (pos == labels.end()) throw InputError(fmt::format("{}: answerKey: \"{}\" is not one of the labels", where, key));
    it.context = "Question: " + get_string(row, "question", where) + "\nAnswer:";
    it.choices = texts;
    it.gold = pos - labels.begin();
  } else if (row.contains("ctx") && row.contains("endings")) {  // HellaSwag
    it.context = get_string(row, "ctx", where);
    it.choices = get_strings(row["endings"], "endings", where);
    it.gold = get_index(row.value("label", nlohmann::json()), "label", it.choices.size(), where);
  } else if (row.contains("query") && row.contains("choices")) {
    it.context = get_string(row, "query", where);
    it.choices = get_strings(row["choices"], "choices", where);
    it.gold = get_index(row.value("gold", nlohmann::json()), "gold", it.choices.size(), where);
  } else {
    throw InputError(fmt::format("{}: not an lm-eval multiple-choice row (ARC: question/choices/answerKey; "
                                 "HellaSwag: ctx/endings/label; or query/choices/gold)",
                                 where));
  }
  it.shot_target = it.choices[static_cast<size_t>(it.gold)];
  return it;
}

EvalItem gsm8k(const nlohmann::json& row, const std::string& where) {
  EvalItem it;
  it.context = "Question: " + get_string(row, "question", where) + "\nAnswer:";
  const std::string answer = get_string(row, "answer", where);
  const size_t mark = answer.rfind("####");
  if (mark == std::string::npos) throw InputError(fmt::format("{}: answer: no \"#### N\" final answer", where));
  std::string final = answer.substr(mark + 4);
  final.erase(0, final.find_first_not_of(" \t"));
  final.erase(final.find_last_not_of(" \t\r\n") + 1);
  it.answer = final;
  it.shot_target = answer;
  return it;
}

}  // namespace

EvalItem parse_row(const nlohmann::json& row, TaskType type, RowFormat format, const std::string& where) {
  if (!row.is_object()) throw InputError(fmt::format("{}: expected a JSON object", where));
  if (format == RowFormat::automatic) {
    if (type == TaskType::multiple_choice)
      format = row.contains("context") ? RowFormat::native : RowFormat::lm_eval_mc;
    else if (type == TaskType::generate)
      format = row.contains("prompt") ? RowFormat::native : RowFormat::gsm8k;
    else
      format = RowFormat::native;
  }
  if (format == RowFormat::lm_eval_mc) {
    if (type != TaskType::multiple_choice) throw InputError(fmt::format("{}: lm_eval_mc rows are multiple_choice", where));
    return lm_eval_mc(row, where);
  }
  if (format == RowFormat::gsm8k) {
    if (type != TaskType::generate) throw InputError(fmt::format("{}: gsm8k rows are generate tasks", where));
    return gsm8k(row, where);
  }
  EvalItem it;
  switch (type) {
    case TaskType::multiple_choice:
      it.context = get_string(row, "context", where);
      it.choices = get_strings(row.value("choices", nlohmann::json()), "choices", where);
      it.gold = get_index(row.value("gold", nlohmann::json()), "gold", it.choices.size(), where);
      it.shot_target = it.choices[static_cast<size_t>(it.gold)];
      break;
    case TaskType::generate:
      it.context = get_string(row, "prompt", where);
      it.answer = get_string(row, "answer", where);
      it.shot_target = row.contains("solution") && row["solution"].is_string() ? row["solution"].get<std::string>()
                                                                               : it.answer;
      break;
    case TaskType::perplexity:
      it.text = get_string(row, "text", where);
      if (it.text.empty()) throw InputError(fmt::format("{}: text: empty", where));
      break;
  }
  return it;
}

std::vector<EvalItem> read_task_file(const std::string& path, TaskType type, RowFormat format, int64_t limit) {
  data::JsonlReader reader(path);
  nlohmann::json row;
  std::vector<EvalItem> out;
  while ((limit <= 0 || static_cast<int64_t>(out.size()) < limit) && reader.next_row(row))
    out.push_back(parse_row(row, type, format, reader.where()));
  if (out.empty()) throw InputError(fmt::format("{}: no rows", path));
  return out;
}

std::string fewshot_context(const EvalItem& item, int64_t item_index, const std::vector<EvalItem>& pool,
                            bool pool_is_items, const FewShot& shots) {
  if (shots.num_fewshot <= 0) return item.context;
  const int64_t available = static_cast<int64_t>(pool.size()) - (pool_is_items ? 1 : 0);
  if (available < shots.num_fewshot)
    throw InputError(fmt::format("num_fewshot {} needs at least that many examples besides the item; the pool has {}",
                                 shots.num_fewshot, available));
  // A partial Fisher-Yates over the pool's indices, drawn from (seed, item): the same shots for an
  // item whatever the order or subset the items are scored in.
  std::vector<int64_t> idx(pool.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  const Philox rng(shots.seed, static_cast<uint64_t>(item_index));
  std::string out;
  int64_t taken = 0;
  for (size_t i = 0; taken < shots.num_fewshot; ++i) {
    const size_t j = i + static_cast<size_t>(rng.bits(i) % (idx.size() - i));
    std::swap(idx[i], idx[j]);
    if (pool_is_items && idx[i] == item_index) continue;
    const EvalItem& shot = pool[static_cast<size_t>(idx[i])];
    out += shot.context + shots.target_delimiter + shot.shot_target + shots.fewshot_delimiter;
    ++taken;
  }
  return out + item.context;
}

}  // namespace nemotron::eval
