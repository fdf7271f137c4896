"""opsched benchmarks (issue 7): throughput and latency as ratios to raw NATS and Kubernetes-client
rates measured in the same run. Not tests: ``python -m bench`` (see docs/benchmark-harness.md)."""
