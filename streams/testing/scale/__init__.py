"""Issue 10's scale bench (bench/scale_bench.py): one worker, waits parked up to 10M, every
figure that could grow with N measured at each checkpoint.

* `waits`: which definition and fate wait i has, its records, the stretched topology;
* `phases`: parking a segment and the measures of a checkpoint (`checkpoint`);
* `report`: the figures per checkpoint, the issue's targets, the table and the plot;
* `run`: the run (`run_scale`).
"""
