"""Real workers and real Kafka clients for tests and benchmarks.

`workers` starts and stops `xwait worker` processes as a user would;
`chaos` (with its load and watch, `load`) drives a realistic load through
them while killing workers, restarting the broker and moving partitions,
and checks every wait against what the broker's clock says it should have
become; `cluster_chaos`, `rolling` and `upgrade` do the same while a cluster
fails, a fleet restarts, a release is replaced.  The test suite runs small
versions (tests/e2e), the benches under bench/ the long ones.  `harness`
holds what every bench shares; `park`, `flood`, `scale` and `compare` are
the runs of the benches of those names.

`kit` is for users' tests: a worker on a clock the test moves
(`clock`, ``XWAIT_CLOCK=file:PATH``), the ``xwait_kit`` fixture of the
``xwait`` pytest plugin (`pytest_plugin`), docs/guides/testing.md.
"""
