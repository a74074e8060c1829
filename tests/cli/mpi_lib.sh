# Shared by the CLI tests that start several ranks (source after lib.sh): how they run mpirun on
# this machine, and how they compare a run's losses with another's.
# MPIRUN: Open MPI's mpirun as these tests use it (root allowed, as CI runs; more ranks than cores).
MPIRUN=(mpirun --oversubscribe)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # ranks share the cores

# losses FILE [FROM]: every train (lm loss, MTP depth 1's loss, grad norm) and validation loss of a
# metrics.jsonl from iteration FROM on, one record per line.
losses() {
  python3 -c 'import json,sys
first = int(sys.argv[2])
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("iteration", 0) < first: continue
    if r.get("type") == "train": print("train", r["iteration"], repr(r["lm_loss"]), repr(r.get("mtp_1_loss")), repr(r["grad_norm"]))
    if r.get("type") == "validation": print("valid", r["iteration"], repr(r["lm_loss"]))' "$1" "${2:-0}"
}

# close A B TOL: the lists A and B have the same entries, every number within TOL relative; prints
# the largest difference.
close() {
  python3 -c 'import sys
a, b, tol = open(sys.argv[1]).read().split(), open(sys.argv[2]).read().split(), float(sys.argv[3])
assert len(a) == len(b) and len(a) > 0, (a, b)
worst = 0.0
for x, y in zip(a, b):
    if x == y: continue
    fx, fy = float(x), float(y)
    worst = max(worst, abs(fx - fy) / max(abs(fy), 1e-30))
print(f"max relative loss difference {worst:.3e}")
sys.exit(0 if worst <= tol else 1)' "$1" "$2" "$3"
}
