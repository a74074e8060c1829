// The parsed template: expressions and statements of the Jinja subset chat templates use. One
// struct per level with a kind tag keeps the tree plain; each node keeps its template line for
// errors.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/jinja/value.h"

namespace nemotron::data::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    literal,   // value
    name,      // name
    list,      // args (items); tuple = true for (a, b)
    dict,      // args: key0, value0, key1, value1, ...
    getattr,   // args[0].name
    getitem,   // args[0][args[1]]
    slice,     // args[0][args[1]:args[2]:args[3]] (null parts omitted)
    call,      // args[0](args[1..], kwargs)
    filter,    // args[0] | name(args[1..], kwargs)
    test,      // args[0] is [not] name(args[1..])
    neg,       // -args[0]
    pos,       // +args[0]
    not_,      // not args[0]
    binary,    // args[0] name args[1]: + - * / // % ** ~
    and_,      // args[0] and args[1]
    or_,       // args[0] or args[1]
    compare,   // args[0] ops[0] args[1] ops[1] args[2] ...: == != < <= > >= in notin
    cond,      // args[0] if args[1] else args[2] (args[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  bool tuple = false;
  bool negated = false;  // test: "is not"
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind { text, output, if_, for_, set, set_block, macro, filter_block, break_, continue_, block };
  Kind kind;
  int line = 0;
  std::string text;                  // text
  ExprPtr expr;                      // output, set (value), for (iterable)
  std::vector<std::string> targets;  // set / for targets; macro: name then parameter names
  std::string attr;                  // set ns.attr: targets[0] is the namespace, attr the attribute
  ExprPtr filter;                    // for ... if filter; filter block: the filter call (operand unused)
  std::vector<std::pair<ExprPtr, Body>> branches;  // if / elif
  Body body;                         // for, set_block, macro, filter_block, block, if's else
  Body else_body;                    // for ... else
  std::vector<ExprPtr> defaults;     // macro parameter defaults (null: none), one per parameter
};

}  // namespace nemotron::data::jinja
