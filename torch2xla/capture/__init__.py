"""Dynamo graph to functional core ATen: the export, graph rewrites (``_rewrites``) and the
analyses that annotate an ATen graph's nodes for their lowerings (``_annotate``; the
``node.meta`` keys are in ``torch2xla/ops/_registry.py``), overlapping inputs, data-dependent
cuts, partitions around what XLA cannot run. (Only this docstring: importing a package
imports none of its modules.)"""
