"""The hostile-record flood of bench/flood_bench.py.

* `mix`: every kind of hostile record the processor refuses, how each must end
  (`Fate`), and the flood's records in the order they are produced (`plan_flood`);
* `accounting`: what the worker did with each record, judged (pure);
* `run`: the run against one real worker (`run_flood`).
"""

