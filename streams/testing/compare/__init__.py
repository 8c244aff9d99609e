"""xwait beside the raw and faust pipes and the bench kit's peers (bench/compare.py).

* `workloads`: the systems, the issue's three workloads, the order of the runs;
* `kit`: the bench kit's tools (its load generator, pipes and peers) as processes;
* `sampling`: the CPU of a run's processes, xwait's stats during a run;
* `judging`: what a run left on its topics, judged and counted;
* `runs`: one run of one system on one workload, and its figures;
* `report`: the ratios, the Markdown tables and the plot.
"""
