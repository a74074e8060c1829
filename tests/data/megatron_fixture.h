// Reading tests/fixtures/megatron: paths, spec.json documents, and writing them with our
// builder by the rule the fixture tool uses for Megatron's builder (no sequences: end_document;
// one: add_item + end_document; several: add_document(concatenation, lengths)).
#pragma once
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"

#include "data/indexed_dataset_builder.h"

namespace nemotron::data::testing::megatron {

using Document = std::vector<std::vector<int64_t>>;  // sequences of one document

inline std::string path(const std::string& name) {
  return (nemotron::testing::source_root() / "tests" / "fixtures" / "megatron" / name).string();
}

inline nlohmann::json load_json(const std::string& name) {
  std::ifstream f(path(name));
  if (!f) throw std::runtime_error(path(name) + " is missing");
  std::stringstream text;
  text << f.rdbuf();
  return nlohmann::json::parse(text.str());
}

inline nlohmann::json spec() { return load_json("spec.json"); }

inline std::vector<Document> documents(const nlohmann::json& variant) {
  return variant.at("documents").get<std::vector<Document>>();
}

inline void write_ours(const std::string& prefix, TokenDType dtype, const std::vector<Document>& docs) {
  IndexedDatasetBuilder b(prefix, dtype);
  for (const Document& doc : docs) {
    if (doc.empty()) {
      b.end_document();
    } else if (doc.size() == 1) {
      b.add_item(doc[0]);
      b.end_document();
    } else {
      std::vector<int32_t> flat, lengths;
      for (const auto& seq : doc) {
        for (int64_t t : seq) flat.push_back(static_cast<int32_t>(t));
        lengths.push_back(static_cast<int32_t>(seq.size()));
      }
      b.add_document(flat, lengths);
    }
  }
  b.finalize();
}

struct Expected {
  std::vector<int32_t> lengths;
  std::vector<int64_t> document_indices{0};
  std::vector<std::vector<int64_t>> sequences;
};

inline Expected expected(const std::vector<Document>& docs) {
  Expected e;
  for (const Document& doc : docs) {
    for (const auto& seq : doc) {
      e.lengths.push_back(static_cast<int32_t>(seq.size()));
      e.sequences.push_back(seq);
    }
    e.document_indices.push_back(static_cast<int64_t>(e.lengths.size()));
  }
  return e;
}

inline std::string fnv1a64_hex(const std::vector<unsigned char>& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace nemotron::data::testing::megatron
