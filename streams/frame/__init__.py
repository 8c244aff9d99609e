"""The frame of a worker process: faust-streaming, and nothing of the waits.

faust's consumer group says which partitions each worker owns and keeps warm
(`app`), runs the worker's loops as tasks and serves its web pages; the
worker (`streams.processor.worker`) does everything else.  `versions`
refuses a faust-streaming or aiokafka release this frame was not checked
with, and `fleet` refuses to share a group with workers of an earlier
version.  Only this package, `streams.app` and the console's web views
import faust.
"""
