"""Reusable test suites for pytfrt interfaces (conformance suites, style practice 10).

A new implementation of an interface inherits the behaviour tests by subclassing the suite's
mixin in its own test module, e.g.::

    from pytfrt.testing.work_queue_conformance import WorkQueueConformance

    class TestMyQueue(WorkQueueConformance):
        queue_type = "my_queue:4"

The suites need ``pytest`` (the ``test`` extra); nothing in the runtime imports this package.
"""
