package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// runClusterProcesses is RunCluster with cfg.Processes: for each d and
// group size n it starts n separate `streamkpca run` processes
// (cfg.Binary) with cluster.enabled in one consumer group, over the
// embedded Kafka broker and NATS server of this process, each from the
// same model with the whole budget drawn. Once the group has formed the
// rows are produced (f64le) as fast as the broker takes them, and after
// two steps the timing starts: the group's rate is the rows every member
// learned (their streamkpca_samples_learned_total) over the wall time of
// cfg.Steps steps, CPUMicros the children's CPU time (user + system, from
// /proc) over those rows, and SentBytes/ReceivedBytes the most any member
// sent to and received from NATS (streamkpca_nats_*_bytes_total) per step
// — the whole connection: the exchange's parts with their chunk headers,
// the roster, and the lowest-ranked member's publishing.
func runClusterProcesses(ctx context.Context, cfg ClusterConfig) ([]ClusterRow, error) {
	if cfg.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("bench cluster --processes: the streamkpca binary: %w", err)
		}
		cfg.Binary = exe
	}
	var rows []ClusterRow
	for _, d := range cfg.Dims {
		topics := map[string]int32{}
		for _, n := range cfg.Members {
			topics[serviceTopic(d, n)] = int32(max(serviceTopicPartitions, n))
		}
		stack, err := devstack.Start(devstack.Options{Dir: filepath.Join(cfg.Dir, "d"+strconv.Itoa(d)), Topics: topics})
		if err != nil {
			return nil, err
		}
		for _, n := range cfg.Members {
			row, err := processRun(ctx, stack, cfg, d, n)
			if err != nil {
				stack.Close()
				return nil, fmt.Errorf("bench cluster --processes: d = %d, %d processes: %w", d, n, err)
			}
			rows = append(rows, row)
			if cfg.Progress != nil {
				cfg.Progress(row)
			}
		}
		stack.Close()
	}
	return rows, nil
}

// child is one `streamkpca run` process of a run.
type child struct {
	cmd  *exec.Cmd
	port int
	log  *os.File
}

// metrics scrapes the child's unlabelled samples by name.
func (c *child) metrics(ctx context.Context, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:"+strconv.Itoa(c.port)+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if ok && want[name] {
			if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
				out[name] = v
			}
		}
	}
	return out, sc.Err()
}

// cpu is the child's CPU seconds (user + system) so far, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s: the
// USER_HZ of every Linux ABI).
func (c *child) cpu() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", c.cmd.Process.Pid, len(f))
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (ut + st) / 100, nil
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// processRun times one group of n processes.
func processRun(ctx context.Context, stack *devstack.Stack, cfg ClusterConfig, d, n int) (ClusterRow, error) {
	c0 := serviceConfig(stack, cfg, d, n, 0)
	start, err := fullBudget(c0.Learner.Online(c0.Model, d), d)
	if err != nil {
		return ClusterRow{}, err
	}
	children := make([]*child, n)
	defer func() {
		for _, c := range children {
			if c != nil && c.cmd.Process != nil {
				c.cmd.Process.Signal(syscall.SIGTERM)
				done := make(chan struct{})
				go func() { c.cmd.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					c.cmd.Process.Kill()
					<-done
				}
				c.log.Close()
			}
		}
	}()
	for i := range children {
		c := serviceConfig(stack, cfg, d, n, i)
		st := snapshot.Store{Dir: c.Snapshot.Dir, Model: c.Model}
		if _, _, err := st.Save(start); err != nil {
			return ClusterRow{}, err
		}
		port, err := freeLoopbackPort()
		if err != nil {
			return ClusterRow{}, err
		}
		dir := filepath.Join(cfg.Dir, fmt.Sprintf("d%d-n%d-process%d", d, n, i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return ClusterRow{}, err
		}
		yaml := fmt.Sprintf(`model: %s
kafka: {brokers: [%q], topic: %s, group: %s, format: f64le, dim: %d, session_timeout: 6s, rebalance_timeout: 6s}
nats: {url: %q}
cluster: {enabled: true}
learner: {k: %d, bandwidth: %d, max_features: %d, batch: %d, block: %d, workers: %d, load_shedding: "off", forget: %q}
snapshot: {dir: %q}
http: {addr: "127.0.0.1:%d"}
log: {level: warn, format: json}
`, c.Model, stack.Brokers()[0], c.Kafka.Topic, c.Kafka.Group, d, c.NATS.URL,
			c.Learner.K, d, c.Learner.MaxFeatures, c.Learner.Batch, c.Learner.Block, c.Learner.Workers, c.Learner.Forget, c.Snapshot.Dir, port)
		cfgFile := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(cfgFile, []byte(yaml), 0o600); err != nil {
			return ClusterRow{}, err
		}
		logf, err := os.Create(filepath.Join(dir, "run.log"))
		if err != nil {
			return ClusterRow{}, err
		}
		cmd := exec.CommandContext(ctx, cfg.Binary, "run", "--config", cfgFile)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			return ClusterRow{}, fmt.Errorf("start %s run: %w", cfg.Binary, err)
		}
		children[i] = &child{cmd: cmd, port: port, log: logf}
	}
	const (
		samples = "streamkpca_samples_learned_total"
		batches = "streamkpca_batches_total"
		members = "streamkpca_cluster_members"
		feats   = "streamkpca_features"
		sent    = "streamkpca_nats_sent_bytes_total"
		recv    = "streamkpca_nats_received_bytes_total"
	)
	type reading struct {
		samples, cpu      float64
		steps, sent, recv []float64 // each member's
		features          int       // the fewest any member's model has
	}
	read := func() (reading, error) {
		var r reading
		for i, c := range children {
			m, err := c.metrics(ctx, samples, batches, sent, recv, feats)
			if err != nil {
				return r, err
			}
			cpu, err := c.cpu()
			if err != nil {
				return r, err
			}
			r.samples += m[samples]
			r.cpu += cpu
			r.sent, r.recv = append(r.sent, m[sent]), append(r.recv, m[recv])
			r.steps = append(r.steps, m[batches])
			if i == 0 {
				r.features = int(m[feats])
			}
			r.features = min(r.features, int(m[feats]))
		}
		return r, nil
	}
	wait := func(what string, cond func() bool) error {
		deadline := time.Now().Add(10 * time.Minute)
		for !cond() {
			for i, c := range children {
				if c.cmd.ProcessState != nil {
					return fmt.Errorf("process %d exited while waiting for %s (its log: %s)", i, what, c.log.Name())
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("no %s within 10 minutes (logs beside the snapshot dirs under %s)", what, cfg.Dir)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		return nil
	}
	formed := func() bool {
		for _, c := range children {
			m, err := c.metrics(ctx, members)
			if err != nil || int(m[members]) != n {
				return false
			}
		}
		return true
	}
	if err := wait("group of every process", formed); err != nil {
		return ClusterRow{}, err
	}
	pool := randomRows(rand.New(rand.NewPCG(uint64(d), 3)), 4096, d)
	total := n * cfg.Batch * (serviceWarmSteps + cfg.Steps + serviceTailSteps)
	message := func(i int) []byte { return encodeRow("f64le", pool[(i%4096)*d:(i%4096+1)*d]) }
	prodCtx, stopProd := context.WithCancel(ctx)
	defer stopProd()
	produced := make(chan error, 1)
	go func() {
		produced <- devstack.Produce(prodCtx, message, devstack.ProduceOptions{Brokers: stack.Brokers(), Topic: c0.Kafka.Topic, N: total})
	}()
	var r0, r1 reading
	learnedAtLeast := func(rows float64, into *reading) func() bool {
		return func() bool {
			r, err := read()
			if err != nil {
				return false
			}
			*into = r
			return r.samples >= rows
		}
	}
	if err := wait("the first steps", learnedAtLeast(float64(n*cfg.Batch*serviceWarmSteps), &r0)); err != nil {
		return ClusterRow{}, err
	}
	t0 := time.Now()
	timed := min(float64(n*cfg.Batch*cfg.Steps), float64(total)-r0.samples)
	if timed < float64(n*cfg.Batch) {
		return ClusterRow{}, fmt.Errorf("%.0f of the %d rows were learned before the timing began (raise --steps)", r0.samples, total)
	}
	if err := wait("the timed rows learned", learnedAtLeast(r0.samples+timed, &r1)); err != nil {
		return ClusterRow{}, err
	}
	wall := time.Since(t0).Seconds()
	stopProd()
	<-produced
	rowsLearned := r1.samples - r0.samples
	// A member's bytes a step are over its own steps, read in the same
	// scrape: over the first member's, read a moment apart, they were a
	// step off (4% in 24 steps).
	steps := max(r1.steps[0]-r0.steps[0], 1)
	var maxSent, maxRecv float64
	for i := range r1.sent {
		si := max(r1.steps[i]-r0.steps[i], 1)
		maxSent = max(maxSent, (r1.sent[i]-r0.sent[i])/si)
		maxRecv = max(maxRecv, (r1.recv[i]-r0.recv[i])/si)
	}
	return ClusterRow{D: d, Members: n, Features: r1.features, K: cfg.K, Batch: cfg.Batch,
		PointsPerSec: rowsLearned / wall, StepSec: wall / steps, PayloadBytes: 8 * r1.features * online.Config{K: cfg.K, BlockSize: min(online.DefaultSubspaceBlockSize, cfg.Features)}.Columns(),
		SentBytes: maxSent, ReceivedBytes: maxRecv, CPUMicros: 1e6 * (r1.cpu - r0.cpu) / rowsLearned,
		Exchange: "reduce-scatter"}, nil
}
