package devstack

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATSCluster is a NATS cluster as production runs one: N embedded
// nats-servers joined by routes, each with JetStream and its own store,
// so that a bucket with replicas > 1 lives on several servers and the
// cluster elects JetStream leaders. Every server listens on 127.0.0.1 at
// ports fixed at start, so a stopped server restarts at its address.
type NATSCluster struct {
	Servers []*server.Server // nil where a server is stopped
	opts    []server.Options
	name    string
}

// StartNATSCluster starts n servers (n ≥ 3 for a JetStream quorum that
// survives the loss of one) with their stores under dir, and waits until
// the routes are up and JetStream has a meta leader.
func StartNATSCluster(dir string, n int) (*NATSCluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("devstack: a NATS cluster of %d servers", n)
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = "nats-route://127.0.0.1:" + strconv.Itoa(ports[n+i])
	}
	c := &NATSCluster{Servers: make([]*server.Server, n), opts: make([]server.Options, n), name: "streamkpca-devstack"}
	for i := range n {
		c.opts[i] = server.Options{Host: "127.0.0.1", Port: ports[i], NoLog: true, NoSigs: true,
			ServerName: "n" + strconv.Itoa(i), JetStream: true, StoreDir: filepath.Join(dir, "n"+strconv.Itoa(i)),
			Cluster: server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: ports[n+i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ","))}
	}
	for i := range n {
		if err := c.start(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitReady(30 * time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *NATSCluster) start(i int) error {
	o := c.opts[i] // a copy: the server keeps and changes its options
	ns, err := server.NewServer(&o)
	if err != nil {
		return fmt.Errorf("devstack: nats server %d: %w", i, err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return fmt.Errorf("devstack: nats server %d not ready after 10s", i)
	}
	c.Servers[i] = ns
	return nil
}

// WaitReady waits until every running server has routes to the others
// and JetStream has a meta leader that counts every running server among
// its group's peers and that every running server follows — the wait
// nats-server's own cluster tests use (waitOnClusterReadyWithNumPeers).
// Without the peer count a cluster looked ready while its third server
// was not yet in the meta group: stopping the leader then left one of
// two peers, no quorum, and no new leader ever (TestNATSClusterElectsAgain
// failed so beside three busy loops).
func (c *NATSCluster) WaitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		up, peers, current := 0, 0, true
		for _, s := range c.Servers {
			if s == nil {
				continue
			}
			up++
			if s.JetStreamIsLeader() {
				peers = len(s.JetStreamClusterPeers())
			}
			current = current && s.JetStreamIsCurrent()
		}
		leader := peers >= up
		routed := true
		for _, s := range c.Servers {
			if s != nil && s.NumRoutes() < up-1 {
				routed = false
			}
		}
		if routed && leader && current {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("devstack: the NATS cluster has no JetStream leader counting every server as a peer, or missing routes, after " + d.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL is server i's client URL.
func (c *NATSCluster) URL(i int) string { return "nats://127.0.0.1:" + strconv.Itoa(c.opts[i].Port) }

// URLs is every server's client URL, comma-separated (the form of the
// service's nats.url), server first's first: a client connects to the
// first it reaches, in order when its list is not randomised.
func (c *NATSCluster) URLs(first int) string {
	urls := make([]string, len(c.opts))
	for i := range c.opts {
		urls[i] = c.URL((first + i) % len(c.opts))
	}
	return strings.Join(urls, ",")
}

// Stop shuts server i down as a crash of its machine would look to the
// others (its store stays for a restart).
func (c *NATSCluster) Stop(i int) {
	if s := c.Servers[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.Servers[i] = nil
	}
}

// Restart starts server i again at its address with its store.
func (c *NATSCluster) Restart(i int) error {
	if c.Servers[i] != nil {
		return nil
	}
	return c.start(i)
}

// MetaLeader is the index of the server leading JetStream's meta group,
// or -1.
func (c *NATSCluster) MetaLeader() int {
	for i, s := range c.Servers {
		if s != nil && s.JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

// StreamLeader is the index of the server leading a stream of the global
// account (a bucket's stream: OBJ_<bucket>, KV_<bucket>), or -1.
func (c *NATSCluster) StreamLeader(stream string) int {
	for i, s := range c.Servers {
		if s != nil && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// Close stops every server.
func (c *NATSCluster) Close() {
	for i := range c.Servers {
		c.Stop(i)
	}
}

// freePorts returns n distinct ports free on 127.0.0.1 now (listened on
// together, then closed).
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("devstack: a free port: %w", err)
		}
		lns = append(lns, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
