// Command oracle runs the real Kubernetes structured allocator
// (k8s.io/dynamic-resource-allocation) over the same YAML input as
// `labkit allocate` and prints the same JSON, for differential testing.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

const usage = `usage: oracle -f FILE... --node NODE [--feature-gates G=true,...] [--kubernetes-version 1.37] [-o json]
       oracle --batch DIR          (every DIR/*/input.yaml + case.yaml; one JSON line per case)
       oracle --bench -f FILE...   (place every pending claim on the first Node that fits; timings)
--timeout D (default 10s, 0 = none) bounds each Allocate call like kube-scheduler's filterTimeout.`

type options struct {
	files   []string
	node    string
	gates   string
	version string
	output  string
	batch   string
	bench   bool
	timeout time.Duration
}

func parseArgs(args []string) (*options, error) {
	o := &options{version: "1.37", output: "json", timeout: 10 * time.Second}
	inFiles := false
	for i := 0; i < len(args); i++ {
		arg := args[i]
		name, value, hasValue := strings.Cut(arg, "=")
		next := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		switch name {
		case "-f", "--filename", "--f":
			var v string
			if v, err = next(); err == nil {
				o.files = append(o.files, v)
				inFiles = true
			}
			continue
		case "--node", "-node":
			o.node, err = next()
		case "--feature-gates", "-feature-gates":
			o.gates, err = next()
		case "--kubernetes-version", "-kubernetes-version":
			o.version, err = next()
		case "-o", "--output":
			o.output, err = next()
		case "--batch", "-batch":
			o.batch, err = next()
		case "--bench", "-bench":
			o.bench = true
		case "--timeout", "-timeout":
			var v string
			if v, err = next(); err == nil {
				o.timeout, err = time.ParseDuration(v)
			}
		case "--no-validate", "--explain":
			// accepted for command-line compatibility with labkit; no effect here
		case "-h", "--help":
			return nil, fmt.Errorf("%s", usage)
		default:
			if inFiles && !strings.HasPrefix(arg, "-") {
				o.files = append(o.files, arg)
				continue
			}
			return nil, fmt.Errorf("unknown argument %q\n%s", arg, usage)
		}
		if err != nil {
			return nil, err
		}
		inFiles = false
	}
	if o.output != "json" {
		return nil, fmt.Errorf("-o %s: the oracle only prints json", o.output)
	}
	return o, nil
}

func main() {
	opts, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	switch {
	case opts.batch != "":
		os.Exit(runBatch(ctx, opts.batch, opts.timeout, os.Stdout))
	case opts.bench:
		os.Exit(runBench(ctx, opts))
	}
	sc := scenario{files: opts.files, node: opts.node, gates: opts.gates, version: opts.version}
	out := runScenario(ctx, sc, newShareIDs(), opts.timeout)
	os.Stdout.Write(out.json())
	os.Stdout.Write([]byte("\n"))
	os.Exit(out.exitCode())
}
