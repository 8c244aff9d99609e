"""Real workers and real Kafka clients for tests and benchmarks.

`workers` starts and stops `xwait worker` processes as a user would;
`chaos` drives a realistic load through them while killing workers,
restarting the broker and moving partitions, and checks every wait against
what the broker's clock says it should have become.  The test suite runs
small versions (tests/e2e), `bench/crash_bench.py` the long ones.

`kit` is for users' tests: a worker on a clock the test moves
(`clock`, ``XWAIT_CLOCK=file:PATH``), the ``xwait_kit`` fixture of the
``xwait`` pytest plugin (`pytest_plugin`), docs/guides/testing.md.
"""
