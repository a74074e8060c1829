// A Jinja2 chat template, parsed once and rendered many times, byte for byte as transformers'
// apply_chat_template renders it with jinja2 (trim_blocks, lstrip_blocks, loopcontrols, the
// `generation` block, tojson = json.dumps(ensure_ascii=False), raise_exception). The subset is
// what chat templates use (jinja/parser.h, jinja/builtins.h); no template inheritance, includes,
// imports or call blocks. Rendering is bounded: macro recursion, evaluation depth, loop
// iterations and output size each have a limit, so a hostile template ends in a TemplateError
// (with its line), never a crash.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "data/jinja/value.h"

namespace nemotron::data::jinja {

struct Stmt;

struct RenderLimits {
  int max_call_depth = 64;          // nested macro calls
  int max_eval_depth = 1000;        // nested expression/statement evaluations
  int64_t max_loop_iterations = 1'000'000;  // all for-loop iterations of one render
  size_t max_output_bytes = size_t{64} << 20;
};

class Template {
 public:
  // Throws TemplateError (with the line) on a syntax error.
  explicit Template(std::string_view source);
  // `vars`: the template's variables (messages, tools, add_generation_prompt, special tokens,
  // the caller's kwargs). Throws TemplateError on a render error, raise_exception included.
  std::string render(const Dict& vars, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

}  // namespace nemotron::data::jinja
