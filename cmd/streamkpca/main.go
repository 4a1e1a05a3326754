// Command streamkpca learns kernel principal components online from a Kafka
// stream and serves the model over NATS and HTTP. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/streamkpca/streamkpca/internal/cliflag"
	"github.com/streamkpca/streamkpca/internal/tools/benchcli"
	"github.com/streamkpca/streamkpca/internal/tools/demo"
	"github.com/streamkpca/streamkpca/internal/tools/filecli"
)

const usage = `streamkpca — online kernel PCA by doubly stochastic gradients

Usage: streamkpca <verb> [flags]

Verbs:
  demo      embedded Kafka + NATS + synthetic producer + learner + HTTP, nothing to install
  run       the service: streamkpca run --config FILE
  fit       learn from a file:   streamkpca fit --input FILE|- --k K --out model.skpca
  project   project points:      streamkpca project --model model.skpca --input FILE|-
  inspect   print a snapshot's header as JSON: streamkpca inspect model.skpca
  produce   write synthetic or file data into a Kafka topic
  watch     follow a model's versions on NATS: streamkpca watch --model NAME [--nats URL]
  bench     benchmarks as JSON:  streamkpca bench hermite|drift|fit|keepup|kcca|throughput|compare|mnist|pipeline|cluster
  plot      PNG pictures:        streamkpca plot eigenfunctions|convergence|compare|drift|cluster|scatter|correlations
  synth     synthetic data as CSV: streamkpca synth hermite|hermite16|digits|twoview|mixture --n N --out FILE
  version   module version, commit, Go, SIMD level and BLAS, as JSON

Run 'streamkpca <verb> -h' or 'streamkpca help <verb>' for the verb's flags.
`

// verbs are the command's verbs, for a mistyped one's suggestion.
var verbs = []string{"fit", "project", "inspect", "run", "demo", "produce", "watch", "bench", "plot", "synth", "version", "help"}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal the stop is graceful, bounded by
		// shutdown_timeout; a second signal ends the process at once (the
		// default action, restored here) for an operator who will not wait.
		<-ctx.Done()
		stop()
		if signalled := context.Cause(ctx); signalled != nil && !errors.Is(signalled, context.Canceled) {
			fmt.Fprintln(os.Stderr, "streamkpca: stopping (a second signal ends it at once)")
		}
	}()
	verb, args := os.Args[1], os.Args[2:]
	var err error
	switch verb {
	case "fit":
		err = filecli.Std().Fit(ctx, args)
	case "project":
		err = filecli.Std().Project(args)
	case "inspect":
		err = filecli.Std().Inspect(args)
	case "bench":
		err = benchcli.Run(ctx, args)
	case "plot":
		err = cmdPlot(args)
	case "synth":
		err = cmdSynth(args)
	case "run":
		err = cmdRun(ctx, args)
	case "demo":
		err = demo.Run(ctx, args)
	case "produce":
		err = cmdProduce(ctx, args)
	case "watch":
		err = cmdWatch(ctx, args)
	case "version", "--version":
		err = cmdVersion()
	case "-h", "--help", "help":
		if verb == "help" && len(args) > 0 && args[0] != "help" {
			// help VERB: the verb's own help.
			os.Args = []string{os.Args[0], args[0], "-h"}
			main()
			return
		}
		fmt.Print(usage)
		return
	default:
		if s := cliflag.Nearest(verb, verbs); s != "" {
			fmt.Fprintf(os.Stderr, "streamkpca: unknown verb %q; did you mean %q? ('streamkpca help' lists the verbs)\n", verb, s)
		} else {
			fmt.Fprintf(os.Stderr, "streamkpca: unknown verb %q\n\n%s", verb, usage)
		}
		os.Exit(2)
	}
	var ue *cliflag.UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "streamkpca %s: %v\n", verb, err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "streamkpca %s: %v\n", verb, err)
		os.Exit(1)
	}
}

// isHelp reports whether a verb's first argument asks for its help.
func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "help" }
