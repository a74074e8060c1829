// Sets a field (a Context member, usually) for one scope and restores it on exit, also when the
// scope throws.
#pragma once

namespace nemotron {

template <class T>
class ScopedField {
 public:
  ScopedField(T& field, T value) : field_(field), old_(field) { field = value; }
  ~ScopedField() { field_ = old_; }
  ScopedField(const ScopedField&) = delete;
  ScopedField& operator=(const ScopedField&) = delete;

 private:
  T& field_;
  T old_;
};

}  // namespace nemotron
