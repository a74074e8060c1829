#include "backend/cpu/parallel.h"

namespace nemotron::cpu {

int num_threads() { return omp_get_max_threads(); }

}  // namespace nemotron::cpu
