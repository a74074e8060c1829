// The bundled corpus: a deterministic, seeded stream of arithmetic problems (corpus_skills.h)
// rendered in the three forms the pipeline needs, so the skill pretraining teaches is the one
// SFT formats and RL rewards:
//   pretraining  {"text": "17 + 25 = 42.\n..."}                       (problems_per_document per row)
//   SFT          {"messages": [{"role": "user", ...}, {"role": "assistant", ...}]}
//   RL           {"input": "What is 17 + 25?", "output": "42"}         (a verifiable integer)
// Pretraining document d holds problems first_problem + d * P ..; SFT and RL row i is problem
// first_problem + i. Disjoint first_problem ranges give disjoint train and eval sets.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/corpus_skills.h"

namespace nemotron {
class ConfigReader;
}

namespace nemotron::data {

struct CorpusConfig {
  uint64_t seed = 1234;
  int64_t first_problem = 0;
  int64_t num_documents = 2000;        // pretraining rows
  int64_t problems_per_document = 8;
  int64_t num_examples = 1000;         // SFT and RL rows
  SkillKnobs knobs;                    // digits, steps, skills
  // `where` is the config section ("data.corpus"); errors read "<where>.<key>: ...".
  void validate(const std::string& where) const;
  // Keys: seed, first_problem, num_documents, problems_per_document, num_examples, min_digits,
  // max_digits, max_steps, skills (a list of skill names). Validated.
  static CorpusConfig read(ConfigReader& r);
};

struct Document {
  std::string text;
};
struct ChatMessage {
  std::string role, content;
};
struct SftExample {
  std::vector<ChatMessage> messages;
};
struct RlExample {
  std::string input;   // the question
  std::string output;  // the answer as a decimal integer
};

std::vector<Problem> generate_problems(const CorpusConfig& cfg, int64_t first, int64_t count);
std::vector<Document> generate_pretrain_corpus(const CorpusConfig& cfg);
std::vector<SftExample> generate_sft_examples(const CorpusConfig& cfg);
std::vector<RlExample> generate_rl_examples(const CorpusConfig& cfg);

nlohmann::json to_json(const Document& d);    // {"text": ...}
nlohmann::json to_json(const SftExample& e);  // {"messages": [{"role", "content"}, ...]}
nlohmann::json to_json(const RlExample& e);   // {"input": ..., "output": ...}

// JSON Lines, written through a temporary file and a rename.
void write_pretrain_jsonl(const std::string& path, const std::vector<Document>& docs);
void write_sft_jsonl(const std::string& path, const std::vector<SftExample>& examples);
void write_rl_jsonl(const std::string& path, const std::vector<RlExample>& examples);

}  // namespace nemotron::data
