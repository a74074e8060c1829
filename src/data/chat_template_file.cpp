// ChatTemplate: the built-in renderers or a Jinja template loaded from a file, a
// tokenizer_config.json or a checkpoint directory, rendered with the variables transformers gives
// it (chat_template.h).
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_limits.h"
#include "data/chat_template.h"
#include "data/jinja/template.h"

namespace nemotron::data {

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read the chat template", p.string()));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

OrderedJson read_json(const fs::path& p) {
  OrderedJson j;
  if (std::optional<JsonError> e = parse_json_bounded(read_file(p), j))
    throw InputError(fmt::format("{}: {}: {}", p.string(), e->where(), e->reason));
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object", p.string()));
  return j;
}

// transformers' special_tokens_map as template variables: each token as its text (a config
// stores a string or an AddedToken object {"content": ...}).
OrderedJson special_tokens_of(const OrderedJson& config) {
  OrderedJson out = OrderedJson::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_string()) out[key] = *it;
    else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) out[key] = (*it)["content"];
  }
  if (auto it = config.find("additional_special_tokens"); it != config.end() && it->is_array()) {
    OrderedJson list = OrderedJson::array();
    for (const OrderedJson& t : *it) {
      if (t.is_string()) list.push_back(t);
      else if (t.is_object() && t.contains("content")) list.push_back(t["content"]);
    }
    out["additional_special_tokens"] = list;
  }
  return out;
}

// The chat_template of a tokenizer_config.json: a string, or a list of {name, template} of which
// "default" is taken (as transformers takes it when no name is asked for).
std::string config_template(const OrderedJson& config, const fs::path& p) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) throw InputError(fmt::format("{}: no \"chat_template\" key", p.string()));
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array())
    for (const OrderedJson& t : *it)
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string())
        return t["template"].get<std::string>();
  throw InputError(fmt::format("{}: chat_template: expected a string or a list with a \"default\" template", p.string()));
}

ChatTemplate compile(const std::string& source, const fs::path& origin, const OrderedJson& special) {
  try {
    return ChatTemplate::from_jinja(source, origin.string(), special);
  } catch (const ChatTemplateError& e) {
    throw InputError(e.what());
  }
}

ChatTemplate from_config(const fs::path& p) {
  const OrderedJson config = read_json(p);
  return compile(config_template(config, p), p, special_tokens_of(config));
}

// A .jinja file: its special tokens come from a tokenizer_config.json beside it or beside the tokenizer.
ChatTemplate from_jinja_file(const fs::path& p, const std::string& tokenizer_file) {
  OrderedJson special = OrderedJson::object();
  for (const fs::path& dir : {p.parent_path(), tokenizer_file.empty() ? fs::path() : fs::path(tokenizer_file).parent_path()}) {
    if (!dir.empty() && fs::is_regular_file(dir / "tokenizer_config.json")) {
      special = special_tokens_of(read_json(dir / "tokenizer_config.json"));
      break;
    }
  }
  return compile(read_file(p), p, special);
}

}  // namespace

ChatTemplate ChatTemplate::from_jinja(std::string_view source, std::string origin, const OrderedJson& special_tokens) {
  ChatTemplate t;
  t.name_ = std::move(origin);
  try {
    t.jinja_ = std::make_shared<const jinja::Template>(source);
  } catch (const jinja::TemplateError& e) {
    throw ChatTemplateError(fmt::format("{}:{}: {}", t.name_, e.line, e.what()));
  }
  t.special_tokens_ = std::make_shared<const OrderedJson>(special_tokens.is_object() ? special_tokens : OrderedJson::object());
  return t;
}

ChatTemplate ChatTemplate::load(const std::string& spec, const std::string& tokenizer_file) {
  if (std::optional<ChatFormat> f = chat_format_from_name(spec)) return ChatTemplate(*f);
  const fs::path p(spec);
  if (!fs::exists(p))
    throw InputError(fmt::format("chat template \"{}\": not a built-in ({}) and no such file or directory", spec,
                                 kChatFormatNames));
  if (fs::is_directory(p)) {
    // A checkpoint: chat_template.jinja, which transformers prefers, else tokenizer_config.json's.
    if (fs::is_regular_file(p / "chat_template.jinja")) return from_jinja_file(p / "chat_template.jinja", tokenizer_file);
    if (fs::is_regular_file(p / "tokenizer_config.json")) return from_config(p / "tokenizer_config.json");
    throw InputError(fmt::format("{}: holds neither chat_template.jinja nor tokenizer_config.json", spec));
  }
  if (p.extension() == ".json") return from_config(p);
  return from_jinja_file(p, tokenizer_file);
}

// Whether `dir` carries a chat template of its own.
static bool has_own_template(const fs::path& dir) {
  if (fs::is_regular_file(dir / "chat_template.jinja")) return true;
  if (!fs::is_regular_file(dir / "tokenizer_config.json")) return false;
  const OrderedJson config = read_json(dir / "tokenizer_config.json");
  return config.contains("chat_template") && !config["chat_template"].is_null();
}

ChatTemplate ChatTemplate::for_model(const std::string& spec, const std::string& checkpoint_dir) {
  if (spec == "auto") return has_own_template(checkpoint_dir) ? load(checkpoint_dir) : ChatTemplate(ChatFormat::nano3);
  if (spec != "checkpoint") return load(spec);
  if (!fs::is_regular_file(fs::path(checkpoint_dir) / "chat_template.jinja") &&
      !fs::is_regular_file(fs::path(checkpoint_dir) / "tokenizer_config.json"))
    throw InputError(fmt::format("chat template \"checkpoint\": {} holds neither chat_template.jinja nor "
                                 "tokenizer_config.json (name a template: {}, or a .jinja file)",
                                 checkpoint_dir, kChatFormatNames));
  return load(checkpoint_dir);
}

std::string render_prompt(const ChatTemplate& t, const OrderedJson& messages, const OrderedJson& tools) {
  if (const auto f = t.builtin()) return render_chat(*f, messages, tools) + chat_generation_prompt(*f, false);
  ChatRenderOptions opt;
  opt.add_generation_prompt = true;
  opt.enable_thinking = false;
  return t.render(messages, tools, opt);
}

std::string ChatTemplate::render(const OrderedJson& messages, const OrderedJson& tools, const ChatRenderOptions& opt) const {
  if (!jinja_) return render_chat(builtin_, messages, tools, opt);
  using jinja::Value;
  jinja::Dict kwargs = {{"enable_thinking", Value::boolean(opt.enable_thinking)}};
  if (!opt.truncate_history_thinking) kwargs.emplace_back("truncate_history_thinking", Value::boolean(false));
  if (opt.reasoning_budget) kwargs.emplace_back("reasoning_budget", Value::integer(*opt.reasoning_budget));
  jinja::Dict vars = {{"messages", jinja::from_json(messages)},
                      {"tools", jinja::from_json(tools)},
                      {"documents", Value::none()},
                      {"add_generation_prompt", Value::boolean(opt.add_generation_prompt)}};
  for (const auto& [k, v] : special_tokens_->items()) vars.emplace_back(k, jinja::from_json(v));
  vars.emplace_back("chat_template_kwargs", Value::dict(std::move(kwargs)));
  vars.emplace_back("enable_thinking", Value::boolean(opt.enable_thinking));
  try {
    return jinja_->render(vars);
  } catch (const jinja::TemplateError& e) {
    throw ChatTemplateError(fmt::format("{}:{}: {}", name_, e.line, e.what()));
  }
}

}  // namespace nemotron::data
