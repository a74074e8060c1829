// What both transformers parity tests (parity_test.cpp: Nemotron-H, decilm_parity_test.cpp:
// DeciLM) check of one fixture: the checkpoint directory imported into a float64 model, run on the
// reference's input_ids; logits (relative error < 1e-4), the mean next-token loss (< 1e-6) and
// every parameter's gradient (< 1e-3, Frobenius norms) against the reference file's tensors
// (`logits`, `loss`, `grad.<name>`). Buffers (requires_grad false: the router's correction bias)
// must have no gradient on either side.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace nemotron::testing {

// ||ours - ref|| / ||ref|| (||ours - ref|| when ref is 0).
double rel_err(const std::vector<double>& ours, const std::vector<double>& ref);

// Next-token labels of ids [B, T] int64: ids shifted left by one, -100 at each row's last position.
std::vector<int64_t> next_token_labels(const Tensor& ids);

// The measured errors, for the test's printout.
struct ParityErrors {
  double logits = 0, loss = 0, worst_grad = 0;
  std::string worst_grad_name;
  int gradients = 0;  // gradients compared
};

// Runs the checks above as gtest expectations (a fatal failure returns early: check
// HasFatalFailure() before using *out).
void check_f64_parity(const std::string& checkpoint_dir, const std::string& reference_file, ParityErrors* out);

}  // namespace nemotron::testing
