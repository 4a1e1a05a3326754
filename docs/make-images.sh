#!/usr/bin/env bash
# Regenerates the pictures of docs/cli.md with the CLI alone. Run from the
# repository root: bash docs/make-images.sh   (about a minute)
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/streamkpca" ./cmd/streamkpca
skpca="$tmp/streamkpca"

# Figure 1: convergence on the hermite stream, with a 1/t reference.
$skpca bench hermite --points 300000 --max-features 16384 > docs/bench-hermite.json
$skpca plot convergence --bench docs/bench-hermite.json --out docs/images/convergence.png

# Figure 2: learned eigenfunctions vs the closed form.
$skpca synth hermite --n 20000 --out "$tmp/hermite.csv"
$skpca fit --input "$tmp/hermite.csv" --k 3 --bandwidth 1 --epochs 5 --out "$tmp/hermite.skpca"
$skpca plot eigenfunctions --model "$tmp/hermite.skpca" --out docs/images/eigenfunctions.png

# Figure 4: 2-D projections of digit-like images, coloured by class.
$skpca synth digits --n 3000 --out "$tmp/digits.csv"          # 64 pixels + label
$skpca fit --input "$tmp/digits.csv" --cols 1-64 --k 2 --center --epochs 20 --out "$tmp/digits.skpca"
$skpca plot scatter --model "$tmp/digits.skpca" --input "$tmp/digits.csv" --label-col 65 --out docs/images/scatter.png

# KCCA: held-out canonical correlations on the twoview stream.
$skpca synth twoview --n 4000 --out "$tmp/tv.csv"
$skpca synth twoview --n 2000 --seed 2 --out "$tmp/tv-test.csv"
$skpca fit --input "$tmp/tv.csv" --algo kcca --k 2 --y-cols 6 --epochs 8 --out "$tmp/tv.skpca"
$skpca plot correlations --model "$tmp/tv.skpca" --input "$tmp/tv-test.csv" --y-cols 6 --out docs/images/correlations.png

# The long-stream comparison (docs/results.md) takes about 90 minutes, so it
# runs only with LONG=1; the two runs' JSON are merged for one picture.
if [ "${LONG:-0}" = 1 ]; then
  $skpca bench compare --case slow --points 10000000 --max-time 12m --budget 10m --methods dsgd,rff,nystrom=2048 > "$tmp/long-a.json"
  $skpca bench compare --case slow --points 10000000 --max-time 12m --budget 10m --methods dsgd --dsgd-features 262144 > "$tmp/long-b.json"
  jq -s '.[0] as $a | .[1] as $b | $a | .methods = [$a.methods[0], $b.methods[0], $a.methods[1], $a.methods[2]]' "$tmp/long-a.json" "$tmp/long-b.json" > "$tmp/long.json"
  $skpca plot compare --bench "$tmp/long.json" --out docs/images/compare-slow-long.png --width 18 --height 12
  # At less memory than Nyström: no batch's features kept (keep_bytes -1).
  $skpca bench compare --case slow --points 10000000 --max-time 12m --budget 10m --methods dsgd,nystrom=2048 --dsgd-features 262144 --keep-bytes -1 > "$tmp/long-c.json"
  $skpca plot compare --bench "$tmp/long-c.json" --out docs/images/compare-slow-memory.png --width 18 --height 12
fi
