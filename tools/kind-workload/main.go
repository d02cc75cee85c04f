// labkit-workload: the stand-in container the kind backend runs instead of workload images
// that cannot run on a test machine (no registry, no real GPU). It prints its environment --
// which is where CDI puts the devices a claim gave the container -- and then sleeps until it is
// stopped, so `kubectl logs` and `kubectl exec ... env` both show what the container got.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

func main() {
	env := os.Environ()
	sort.Strings(env)
	fmt.Printf("labkit-workload: stand-in for %s\n", strings.Join(os.Args[1:], " "))
	for _, kv := range env {
		fmt.Println(kv)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
