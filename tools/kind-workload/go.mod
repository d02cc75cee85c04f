module labkit.dev/kind-workload

go 1.26.0
