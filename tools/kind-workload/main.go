// labkit-workload: the stand-in container the kind backend runs instead of workload images
// that cannot run on a test machine (no registry, no real GPU). It prints its environment --
// which is where CDI puts the devices a claim gave the container -- and then sleeps until it is
// stopped, so `kubectl logs` shows what the container got. The original command line arrives
// as arguments and is printed first.
//
// The image holds no shell: the same binary is also installed as /usr/bin/env and /bin/env, and
// run under a name ending in "env" it prints the environment and exits, so
// `kubectl exec POD -- env` works.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

func printEnv() {
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		fmt.Println(kv)
	}
}

func main() {
	if strings.HasSuffix(filepath.Base(os.Args[0]), "env") {
		printEnv()
		return
	}
	fmt.Printf("labkit-workload: stand-in for: %s\n", strings.Join(os.Args[1:], " "))
	printEnv()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	sig := <-stop
	// end as the stood-in command would: killed by the signal (128+n, e.g. 143), so a Job's pod that is
	// deleted or evicted fails and the Job replaces it, as with the real image; never a success (0)
	os.Exit(128 + int(sig.(syscall.Signal)))
}
