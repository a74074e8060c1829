// The local artifact store: versions, dedup of unchanged content, aliases, lineage, the
// ${art:NAME,FIELD} resolver, and bad references.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "artifacts/art_resolver.h"
#include "artifacts/artifact_store.h"
#include "artifacts/content_hash.h"
#include "core/error.h"

namespace fs = std::filesystem;
using namespace nemotron;
using namespace nemotron::artifacts;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("nemotron_artifacts_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

Artifact data_artifact(const fs::path& dir, const std::string& name = "super3-sft-data") {
  Artifact a;
  a.name = name;
  a.type = kSftData;
  a.path = dir.string();
  a.content_hash = content_hash(dir, {"metadata.json"});
  a.metadata = {{"pack_size", 512}, {"total_tokens", 1234}};
  return a;
}

}  // namespace

TEST(ArtifactRef, ParsesNamesVersionsAndSemanticNames) {
  EXPECT_EQ(ArtifactRef::parse("super3-sft-data", "t").str(), "super3-sft-data:latest");
  EXPECT_EQ(ArtifactRef::parse("super3-sft-data:v3", "t").version, "v3");
  EXPECT_EQ(ArtifactRef::parse("super3/sft/data?sample=8:latest", "t").name, "super3-sft-data");
  EXPECT_EQ(artifact_name("super3/pretrain/data-phase1"), "super3-pretrain-data-phase1");
  EXPECT_THROW(ArtifactRef::parse("", "t"), InputError);
  EXPECT_THROW(ArtifactRef::parse("a:", "t"), InputError);
  EXPECT_THROW(ArtifactRef::parse("../etc:v1", "t"), InputError);
  EXPECT_THROW(ArtifactRef::parse("a b", "t"), InputError);
}

TEST(ContentHash, ChangesWithAnyByteOrNameAndSkipsWhatItIsTold) {
  const fs::path d = fresh_dir("hash");
  write(d / "a.bin", "hello");
  write(d / "sub/b.bin", "world");
  write(d / "metadata.json", "{\"created_at\": 1}");
  const std::string h = content_hash(d, {"metadata.json"});
  EXPECT_EQ(h.size(), 16u);
  write(d / "metadata.json", "{\"created_at\": 2}");
  EXPECT_EQ(content_hash(d, {"metadata.json"}), h);
  EXPECT_NE(content_hash(d), h);
  write(d / "sub/b.bin", "worle");
  EXPECT_NE(content_hash(d, {"metadata.json"}), h);
  write(d / "sub/b.bin", "world");
  EXPECT_EQ(content_hash(d, {"metadata.json"}), h);
  fs::rename(d / "a.bin", d / "c.bin");
  EXPECT_NE(content_hash(d, {"metadata.json"}), h);
  EXPECT_THROW(content_hash(d / "missing"), InputError);
  fs::remove_all(d);
}

TEST(ArtifactStore, SameContentKeepsItsVersionChangedContentMakesANewOne) {
  const fs::path root = fresh_dir("store"), data = fresh_dir("store_data");
  write(data / "shard_0.parquet", "rows");
  ArtifactStore store(root);
  const Artifact v1 = store.publish(data_artifact(data));
  EXPECT_EQ(v1.version, 1);
  EXPECT_TRUE(fs::exists(root / "super3-sft-data/v1/manifest.json"));
  EXPECT_TRUE(fs::exists(root / "super3-sft-data/v1/metadata.json"));
  const Artifact again = store.publish(data_artifact(data));
  EXPECT_EQ(again.version, 1) << "unchanged content must not make a new version";
  write(data / "shard_0.parquet", "other rows");
  const Artifact v2 = store.publish(data_artifact(data));
  EXPECT_EQ(v2.version, 2);
  EXPECT_EQ(store.get(ArtifactRef::parse("super3-sft-data", "t")).version, 2);
  EXPECT_EQ(store.get(ArtifactRef::parse("super3-sft-data:v1", "t")).content_hash, v1.content_hash)
      << "an old version is never overwritten";
  EXPECT_EQ(store.versions("super3-sft-data").size(), 2u);
  EXPECT_EQ(store.names(), std::vector<std::string>{"super3-sft-data"});
  EXPECT_FALSE(store.find(ArtifactRef::parse("super3-sft-data:v9", "t")).has_value());
  try {
    store.get(ArtifactRef::parse("super3-sft-data:v9", "t"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("super3-sft-data has v1 v2"), std::string::npos) << e.what();
  }
  fs::remove_all(root), fs::remove_all(data);
}

TEST(ArtifactStore, AliasesLineageAndUnknownInputs) {
  const fs::path root = fresh_dir("lineage"), data = fresh_dir("lineage_data"), ckpt = fresh_dir("lineage_ckpt");
  write(data / "x", "1");
  write(ckpt / "iter_0000010/train_state.json", "{}");
  ArtifactStore store(root);
  const Artifact d = store.publish(data_artifact(data, "super3-pretrain-data"));
  Artifact m;
  m.name = "super3-tiny-pretrain-model";
  m.type = kModel;
  m.path = ckpt.string();
  m.content_hash = content_hash(ckpt / "iter_0000010/train_state.json");
  m.metadata = {{"iteration", 10}};
  m.inputs = {d.ref()};
  m.aliases = {"iter_0000010"};
  const Artifact mv = store.publish(m);
  EXPECT_EQ(store.get(ArtifactRef::parse("super3-tiny-pretrain-model:iter_0000010", "t")).version, mv.version);
  Artifact s = data_artifact(data, "super3-sft-model");
  s.type = kModel;
  s.inputs = {mv.ref(), d.ref()};
  store.publish(s);
  const auto chain = lineage(store, ArtifactRef::parse("super3-sft-model", "t"));
  ASSERT_EQ(chain.size(), 4u);  // sft-model, pretrain-data (sorted first), pretrain-model, its data
  EXPECT_EQ(chain[0].artifact.name, "super3-sft-model");
  EXPECT_EQ(chain[0].depth, 0);
  EXPECT_EQ(chain[3].depth, 2);
  EXPECT_EQ(chain[3].artifact.name, "super3-pretrain-data");
  Artifact bad = data_artifact(data, "orphan");
  bad.inputs = {"nothing-here:v1"};
  EXPECT_THROW(store.publish(bad), InputError);
  EXPECT_FALSE(fs::exists(root / "orphan/v1"));
  fs::remove_all(root), fs::remove_all(data), fs::remove_all(ckpt);
}

// What a stage that read plain directories records as its inputs: the newest artifact at a path
// (of a type, when given), looked up one path at a time or for every path from one read.
TEST(ArtifactStore, LatestAtPathTakesTheNewestAndLatestByPathAnswersTheSameForEveryPath) {
  const fs::path root = fresh_dir("by_path"), data = fresh_dir("by_path_data"), other = fresh_dir("by_path_other");
  write(data / "x", "1");
  write(other / "y", "2");
  ArtifactStore store(root);
  Artifact older = data_artifact(data, "b-older"), newer = data_artifact(data, "a-newer");
  older.created_at = "2026-11-25T08:00:00+00:00", newer.created_at = "2026-11-25T09:00:00+00:00";
  newer.type = kModel;
  store.publish(older), store.publish(newer), store.publish(data_artifact(other, "c-other"));
  EXPECT_EQ(version_label(12), "v12");
  EXPECT_EQ(store.latest_at_path(data.string())->name, "a-newer");
  EXPECT_EQ(store.latest_at_path((data.parent_path() / "sub" / ".." / data.filename()).string())->name, "a-newer");
  EXPECT_EQ(store.latest_at_path(data.string(), kSftData)->name, "b-older");
  EXPECT_FALSE(store.latest_at_path((data / "x").string()).has_value());
  const std::map<std::string, Artifact> all = store.latest_by_path(), sft = store.latest_by_path(kSftData);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all.at(fs::absolute(data).lexically_normal().string()).name, "a-newer");
  EXPECT_EQ(all.at(fs::absolute(other).lexically_normal().string()).ref(), "c-other:v1");
  EXPECT_EQ(sft.at(fs::absolute(data).lexically_normal().string()).name, "b-older");
  fs::remove_all(root), fs::remove_all(data), fs::remove_all(other);
}

TEST(ArtResolver, ResolvesFieldsKeepsTypesAndNamesTheKeyOnErrors) {
  const fs::path root = fresh_dir("resolver"), data = fresh_dir("resolver_data");
  write(data / "x", "1");
  ArtifactStore store(root);
  const Artifact a = store.publish(data_artifact(data));
  nlohmann::json cfg = {{"run", {{"data", "super3-sft-data:latest"}}},
                        {"dataset", {{"dataset_root", "${art:data,path}"},
                                     {"seq_length", "${art:data,pack_size}"},
                                     {"note", "from ${art:data,version} of ${art:data,name}"}}}};
  EXPECT_TRUE(has_artifact_refs(cfg));
  const auto used = resolve_artifact_refs(cfg, store, "sft.yaml");
  EXPECT_EQ(used, std::vector<std::string>{a.ref()});
  EXPECT_EQ(cfg["dataset"]["dataset_root"], a.path);
  EXPECT_EQ(cfg["dataset"]["seq_length"], 512) << "a whole-string reference keeps the field's type";
  EXPECT_EQ(cfg["dataset"]["note"], "from v1 of super3-sft-data");
  EXPECT_FALSE(has_artifact_refs(cfg));

  auto error_of = [&](nlohmann::json c) {
    try {
      resolve_artifact_refs(c, store, "sft.yaml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of({{"x", "${art:model,path}"}}).find("sft.yaml: x: ${art:model,...} needs run.model"),
            std::string::npos);
  EXPECT_NE(error_of({{"run", {{"data", "super3-sft-data:v7"}}}, {"x", "${art:data}"}})
                .find("artifact super3-sft-data:v7 not found"),
            std::string::npos);
  EXPECT_NE(error_of({{"run", {{"data", "super3-sft-data"}}}, {"x", "${art:data,nope}"}}).find("has no field \"nope\""),
            std::string::npos);
  EXPECT_NE(error_of({{"run", {{"data", "super3-sft-data"}}}, {"x", "${art:data"}}).find("unclosed"), std::string::npos);
  fs::remove_all(root), fs::remove_all(data);
}
