#!/usr/bin/env bash
# Runs the long-tier TestLossyNetwork in a network namespace of its own
# whose loopback drops a share of the packets (an nftables rule: numgen
# random), so that the brokers, the members and the reader of the test
# lose packets for real (TCP retransmits them) while the test's proxies
# add latency. Needs root (ip netns) and nft (Debian nftables). The
# machine's own network is untouched.
#
#   integration/lossy.sh              # 1% of the packets dropped
#   LOSS=3 integration/lossy.sh       # 3%
set -euo pipefail
cd "$(dirname "$0")/.."
loss=${LOSS:-1}
ns=streamkpca-lossy-$$
bin=/tmp/$ns.test
go test -tags long -c -o "$bin" ./integration
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -f "$bin"; }
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link set lo up
ip netns exec "$ns" nft add table inet lossy
ip netns exec "$ns" nft add chain inet lossy in '{ type filter hook input priority 0; }'
ip netns exec "$ns" nft add rule inet lossy in "numgen random mod 100 < $loss drop"
echo "namespace $ns: $loss% of the packets on its loopback dropped"
(cd integration && ip netns exec "$ns" env STREAMKPCA_LOSS="$loss%" "$bin" -test.run 'TestLossyNetwork$' -test.v -test.timeout 20m)
